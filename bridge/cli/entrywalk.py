"""The entries that run the bridge, in every client's file: listed (``config list``) and
walked with their own arguments and ``env`` (``check --client X --name N``, ``check --all``).

An entry runs the bridge when its ``command`` is ``mcp-app-bridge`` (the console script or
the frozen executable of that name, ``.exe`` on Windows) or a Python run as ``python [-I]
-m bridge``; its bridge options are then its ``args`` (after ``-m bridge``). An app's own
entry (``--command MyApp -- --mcp-stdio``) runs the bridge inside the app, whose options are
the app's: it is listed, but not walked (its options are not the bridge's).

The walk is ``check``'s (``bridge/cli/check.py``), with the options the entry gives and, for
the token, its ``env`` over this environment (a ``$VAR`` or ``${VAR}`` value expanded from
this environment, as Gemini CLI does; Codex's ``env_vars`` are passed from it anyway).
Nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["BRIDGE_PROGRAM", "bridge_args_of", "bridge_entries", "walk_entry"]

#: The bridge's program name (the console script, the frozen executable).
BRIDGE_PROGRAM = "mcp-app-bridge"

Echo = Callable[[str], None]


def bridge_args_of(entry: Mapping[str, Any]) -> list[str] | None:
    """The bridge options of a client entry that runs the bridge, else ``None`` (a remote
    server, an app's own ``--mcp-stdio`` entry, anything else)."""
    command = entry.get("command")
    args = entry.get("args") or []
    if not isinstance(command, str) or not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        return None
    program = Path(command).name.lower().removesuffix(".exe")
    if program == BRIDGE_PROGRAM:
        return list(args)
    for index in range(len(args) - 1):
        if args[index] == "-m" and args[index + 1] == "bridge":
            return list(args[index + 2 :])
    return None


def bridge_entries() -> Iterator[tuple[tuple[str, ...], Path, str, dict[str, Any], str | None]]:
    """Every stdio entry of every client's file at its default place, once, as ``(clients,
    file, name, entry, problem)``: ``clients`` are the ``--client`` values that read that
    file (``claude-code`` and ``vscode-agent-project`` share a project's ``.mcp.json``,
    ``copilot-cli`` and ``vscode-agent`` ``~/.copilot/mcp-config.json``), in the order of
    the client table; ``problem`` says why a file could not be read (then ``name`` is empty
    and ``entry`` is ``{}``)."""
    from ..clients.clienttable import CLIENTS, ClientConfigError, config_path
    from .entrycheck import read_entries

    readers: dict[Path, list[str]] = {}
    for client in CLIENTS:
        try:
            readers.setdefault(config_path(client), []).append(client)
        except ClientConfigError:
            continue
    for path, clients in readers.items():
        rows: list[tuple[list[str], str, dict[str, Any], str | None]] = []
        for client in clients:
            found: list[tuple[str, dict[str, Any], str | None]]
            try:
                found = [(name, entry, None) for name, entry in read_entries(path, client).items() if "command" in entry]
            except ClientConfigError as exc:
                found = [("", {}, str(exc))]
            for name, entry, problem in found:
                same = next((row for row in rows if row[1:] == (name, entry, problem)), None)
                if same is not None:  # the same entry, read by another client of this file
                    same[0].append(client)
                else:
                    rows.append(([client], name, entry, problem))
        for row_clients, name, entry, problem in rows:
            yield tuple(row_clients), path, name, entry, problem


@contextmanager
def _environment(env: Mapping[str, Any]) -> Iterator[None]:
    """This process's environment with ``env`` (an entry's) set over it, ``$VAR`` expanded."""
    saved = dict(os.environ)
    try:
        for key, value in env.items():
            if isinstance(key, str) and isinstance(value, str):
                os.environ[key] = os.path.expandvars(value)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def walk_entry(client: str, name: str, entry: Mapping[str, Any], echo: Echo, style: Callable[..., str]) -> bool:
    """Run ``check``'s whole walk with the entry's own bridge options and ``env``; return
    whether every step passed. An entry that does not run the bridge is said so (✗)."""
    import asyncio

    import click

    from .check import run_check
    from .options import build_config, parse_bridge_args

    args = bridge_args_of(entry)
    echo("")
    echo(f"The walk of {client}'s {name!r}, with its own arguments:")
    if args is None:
        echo(f"{style('✗', fg='red', bold=True)} it does not run mcp-app-bridge itself (an app's own --mcp-stdio, or "
             "another program): run that program's own check")
        return False
    env = entry.get("env")
    with _environment(env if isinstance(env, dict) else {}):
        try:
            config = build_config(parse_bridge_args(args))
        except click.ClickException as exc:
            echo(f"{style('✗', fg='red', bold=True)} its arguments: {exc.format_message()}")
            return False
        return asyncio.run(run_check(config, echo, style))
