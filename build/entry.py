"""PyInstaller entry point of the frozen executable: the same as ``python -m bridge``."""

from bridge.cli.commands import main

if __name__ == "__main__":
    main()
