"""PyInstaller entry point of the frozen executable: the same as ``python -m bridge``.

First, in the one-file build's Python process (POSIX): hold this run's unpack folder as in
use, and remove the folders that killed runs left behind (``bridge/system/unpacksweep.py``);
the run empties its own folder at its end (``bridge/cli/diagnostics.py``, ``exit_now``).
"""

if __name__ == "__main__":
    from bridge.system import unpacksweep

    _bundle = unpacksweep.own_unpack_folder()
    if _bundle is not None:
        _lock = unpacksweep.hold_own_folder(_bundle)  # held until this process exits
        unpacksweep.start_sweep(_bundle)

    from bridge.cli.serve import main

    main()
