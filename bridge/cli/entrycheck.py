"""``mcp-app-bridge check --client CLIENT``: whether the programs a client's entries name
still exist.

An app updated or moved to another install folder leaves an entry pointing at nothing: its
``command`` (the bridge, or the app's own executable given with ``--command``), and the
``--launch`` program in its ``args``, which the bridge needs once the app is down. The client
then reports no more than "failed to start" (or the bridge cannot start the app). This reads
the client's configuration file where ``config install`` writes it, and for each stdio entry
(only ``names``, when given) prints ✓ with the programs found, or ✗ with the one that no
longer exists and the fix (docs/clients.md, "A stable launcher path"). Nothing is written.

A program is found when it is an existing executable file at its absolute path, or a bare
name on this ``PATH`` (the client may start it with another one). A ``--launch`` command
that does not split is reported as such.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["entry_problems", "read_entries", "run_entry_check"]

Echo = Callable[[str], None]

#: The longest configuration file read (a client's own file may hold much else).
MAX_CONFIG_BYTES = 16 * 1024 * 1024


def read_entries(path: Path, client: str) -> dict[str, dict[str, Any]]:
    """The server entries of ``client``'s file at ``path`` (JSON, JSONC or Codex's TOML);
    ``{}`` when there is no file.

    Raises:
        ClientConfigError: the file cannot be read or parsed, or is another client's.
    """
    from ..clients.clienttable import CLIENT_INFO, ClientConfigError, read_servers

    try:
        with open(path, "rb") as file:
            raw = file.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ClientConfigError(f"cannot read {path}: {exc.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ClientConfigError(f"{path} is larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ClientConfigError(f"{path} is not UTF-8 text") from None
    if not text.strip():
        return {}
    document: Any
    if CLIENT_INFO[client].syntax == "toml":
        import tomllib

        try:
            document = tomllib.loads(text.removeprefix("\ufeff"))  # (a byte order mark Codex reads past)
        except tomllib.TOMLDecodeError as exc:
            raise ClientConfigError(f"{path} is not valid TOML ({exc})") from None
    else:
        from ..clients import jsonc

        try:
            document = jsonc.parse(text).to_python()
        except jsonc.JsoncError as exc:
            raise ClientConfigError(f"{path} is not valid JSON ({exc})") from None
    return read_servers(document, client)[1]


def _program_problem(program: str, what: str, environ: Mapping[str, str]) -> tuple[str, str | None]:
    """(the program's path as found, or as given; what is wrong with it, or ``None``)."""
    if not any(sep in program for sep in (os.sep, os.altsep) if sep):
        found = shutil.which(program, path=environ.get("PATH", os.defpath))
        return (found, None) if found else (program, f"{what} {program!r} is not on PATH here")
    if not os.path.isabs(program):
        return program, f"{what} {program} is not an absolute path: the client starts it from a folder of its own"
    if not os.path.exists(program):
        return program, f"{what} {program} no longer exists"
    if os.path.isdir(program) or (os.name == "posix" and not os.access(program, os.X_OK)):
        return program, f"{what} {program} is not an executable file"
    return program, None


def _launch_program(args: list[Any]) -> tuple[str | None, str | None]:
    """(the ``--launch`` program in ``args``, or ``None``; a problem splitting it)."""
    from .buildconfig import split_command

    for index, arg in enumerate(args):
        value = None
        if arg == "--launch" and index + 1 < len(args):
            value = args[index + 1]
        elif isinstance(arg, str) and arg.startswith("--launch="):
            value = arg.split("=", 1)[1]
        if isinstance(value, str):
            try:
                return split_command(value)[0], None
            except ValueError as exc:
                return None, f"its --launch command does not split ({exc})"
    return None, None


def entry_problems(entry: dict[str, Any], environ: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
    """(the programs found, the problems) of one stdio entry: its ``command``, and the
    ``--launch`` program in its ``args``."""
    environ = os.environ if environ is None else environ
    found: list[str] = []
    problems: list[str] = []
    command = entry.get("command")
    if isinstance(command, str) and command:
        path, problem = _program_problem(command, "its command", environ)
        if problem:
            problems.append(problem)
        else:
            found.append(f"command {path}")
    args = entry.get("args")
    program, problem = _launch_program(args if isinstance(args, list) else [])
    if problem:
        problems.append(problem)
    elif program is not None:
        path, problem = _program_problem(program, "its --launch program", environ)
        if problem:
            problems.append(problem)
        else:
            found.append(f"--launch {path}")
    return found, problems


def _unix_url_note(entry: dict[str, Any]) -> str | None:
    """A note for an entry whose ``--url`` names a Unix socket: the socket does not exist now
    (the app is down, or made another one), or, when it does, that an app making a new
    socket at each start breaks such an entry (``--app-name``/``--discovery-file`` follow it)."""
    from ..core.unixurl import is_unix_url, split_unix_url

    args = entry.get("args")
    args = args if isinstance(args, list) else []
    urls = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--url" and isinstance(args[i + 1], str)]
    urls += [arg.partition("=")[2] for arg in args if isinstance(arg, str) and arg.startswith("--url=")]
    for url in urls:
        if not is_unix_url(url):
            continue
        try:
            path, _target = split_unix_url(url)
        except ValueError:
            return "its --url is not a valid http+unix:// URL"
        if not os.path.exists(path):
            return (f"its --url names the socket {path!r}, which does not exist now: the app is not running, or it made "
                    "another socket; an app that names its socket anew at each start needs --app-name or --discovery-file")
        return None
    return None


def _wsl_distribution() -> str | None:
    """This WSL distribution's name, or ``None`` outside WSL (``bridge.clients.wsl``)."""
    import sys

    if sys.platform != "linux":
        return None
    from ..clients.wsl import wsl_distribution

    return wsl_distribution(os.environ)


def run_entry_check(
    client: str,
    names: tuple[str, ...],
    echo: Echo,
    style: Callable[..., str],
    *,
    path: Path | None = None,
    problems_only: bool = False,
) -> bool:
    """Print each stdio entry of ``client`` (only ``names``, when given) with ✓ and the
    programs it names, or ✗ with what no longer exists and the fix; return whether all were ✓.
    A name with no entry is a ✗ with the ``config install`` command that adds it.

    ``problems_only`` (Codex, whose own report follows and covers the rest): print only the
    entries whose programs are missing, under the heading, and nothing when there is none."""
    from ..clients.clienttable import ClientConfigError, config_location
    from ..clients.stablepath import versioned_folder

    good = style("✓", fg="green")
    bad = style("✗", fg="red", bold=True)
    distribution = _wsl_distribution()
    notes: list[str] = []
    if path is None:
        try:
            location = config_location(client)
        except ClientConfigError as exc:
            echo(f"The {client} entries:")
            echo(f"{bad} {exc}")
            return False
        target = location.path
        if location.reason:
            notes.append(f"  the app reads this file: {location.reason}")
        notes += [f"  {ignored} exists too, but the app does not read it" for ignored in location.ignored]
    else:
        target = path
    heading = "\n".join([f"The {client} entries in {target}:", *notes])
    try:
        entries = read_entries(target, client)
    except ClientConfigError as exc:
        echo(heading)
        echo(f"{bad} {exc}")
        return False
    if problems_only:
        names = tuple(name for name in (names or tuple(entries)) if name in entries)
        if not names:
            return True
    chosen = {name: entries.get(name) for name in names} if names else dict(entries)
    if not chosen:
        echo(heading)
        echo(f"{bad} no MCP server configured: add one with `mcp-app-bridge config install --client {client} --name NAME …`")
        return False
    report: list[tuple[bool, str]] = []  # (a problem?, line)
    for name, entry in chosen.items():
        if entry is None:
            report.append((True, f"{bad} {name}: no entry of that name; add it with "
                                 f"`mcp-app-bridge config install --client {client} --name {name} …`"))
            continue
        if "command" not in entry:
            report.append((False, f"{good} {name}: not started by the client (a remote server)"))
            continue
        found, problems = entry_problems(entry)
        side = None
        if distribution is not None and isinstance(entry.get("command"), str):
            from ..clients.wsl import describe_command

            side = (bool(problems), f"  it {describe_command(entry['command'], distribution)}")
        if problems:
            report.append((True, f"{bad} {name}: " + "; ".join(problems)))
            report.append((True, f"  {style('fix:', bold=True)} point the entry at the app's stable launcher, not a "
                                 "versioned install folder, and install it again "
                                 f"(`mcp-app-bridge config install --client {client} --name {name} --force …`)"))
            if side:
                report.append(side)
            continue
        report.append((False, f"{good} {name}: " + ", ".join(found) + " (they exist; `check` with the entry's options tries the app)"))
        if side:
            report.append(side)
        socket_note = _unix_url_note(entry)
        if socket_note:
            report.append((False, f"  {socket_note}"))
        for program in found:
            kind, _, where = program.partition(" ")
            folder = versioned_folder(where)
            if folder is not None:
                report.append((False, f"  {kind} is inside a versioned install folder ({folder!r}): an update that "
                                      "replaces it leaves the entry pointing at nothing; install it again with the "
                                      "app's stable launcher"))
    ok = not any(problem for problem, _line in report)
    if problems_only and ok:
        return True
    echo(heading)
    for problem, line in report:
        if problem or not problems_only:
            echo(line)
    return ok
