"""PyInstaller entry point of the frozen executable: the same as ``python -m bridge``.

First, in the one-file build's Python process (POSIX): hold this run's unpack folder as in
use, and remove the folders that killed runs left behind (``bridge/system/unpacksweep.py``).
"""

import os
import sys

if __name__ == "__main__":
    _bundle = getattr(sys, "_MEIPASS", None)
    if getattr(sys, "frozen", False) and _bundle and os.path.basename(_bundle).startswith("_MEI") and os.name == "posix":
        from bridge.system import unpacksweep

        _lock = unpacksweep.hold_own_folder(_bundle)  # held until this process exits
        unpacksweep.start_sweep(_bundle)

    from bridge.cli.serve import main

    main()
