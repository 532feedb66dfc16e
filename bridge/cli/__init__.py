"""The command line: the only package that knows click. ``main`` is the click command;
the console script is :func:`bridge.cli.serve.main`, which serves a plain command line
without loading click and hands every other one to ``main``. So this package loads its
modules (and click) only when they are asked for."""

from __future__ import annotations

from typing import Any

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    if name == "main":
        from .commands import main

        return main
    raise AttributeError(f"module 'bridge.cli' has no attribute {name!r}")
