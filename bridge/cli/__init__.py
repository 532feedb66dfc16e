"""The command line: the only package that knows click. ``main`` is the console script."""

from .commands import main

__all__ = ["main"]
