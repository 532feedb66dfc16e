"""``python -m bridge``: the same as the ``mcp-app-bridge`` command."""

from bridge.cli.serve import main  # a plain serving command line never loads click

if __name__ == "__main__":
    main()
