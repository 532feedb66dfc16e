"""PyInstaller entry point of the frozen executable: the same as ``python -m bridge``.

In the one-file build's Python process (POSIX), around that: hold this run's unpack folder
as in use, remove the folders that killed runs left behind, and, if the bootloader was
killed while this process ran, remove this run's own folder at the end
(``bridge/system/unpacksweep.py``).
"""

import os
import sys

if __name__ == "__main__":
    _bundle = getattr(sys, "_MEIPASS", None)
    if getattr(sys, "frozen", False) and _bundle and os.path.basename(_bundle).startswith("_MEI") and os.name == "posix":
        from bridge.system import unpacksweep

        _lock = unpacksweep.hold_own_folder(_bundle)  # held until this process exits
        unpacksweep.start_sweep(_bundle)
        _bootloader = os.getppid()
        try:
            from bridge.cli.serve import main

            main()
        finally:
            if os.getppid() != _bootloader:  # re-parented: the bootloader cannot clean up any more
                unpacksweep.remove_own_folder(_bundle)
    else:
        from bridge.cli.serve import main

        main()
