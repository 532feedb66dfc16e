"""``python -m bridge``: the same as the ``mcp-app-bridge`` command."""

from bridge.cli import main

if __name__ == "__main__":
    main()
