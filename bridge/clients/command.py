"""The command a client config entry starts: the bridge itself (frozen executable,
console script, or ``python -I -m bridge``) or an app's own executable given with
``--command``, as an absolute path with its symlinks kept."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence

from .clienttable import ClientConfigError

__all__ = ["bridge_command", "isolate_python", "resolve_command", "command_warnings", "split_secrets"]


def _is_python(command: str) -> bool:
    name = os.path.basename(command).lower()
    return re.fullmatch(r"python[0-9.]*(\.exe)?|pythonw?(\.exe)?", name) is not None


def isolate_python(command: Sequence[str]) -> list[str]:
    """``command`` with ``-I`` added when it runs ``python -m bridge`` without it.

    Isolated mode keeps the working folder (and PYTHONPATH, and the user's site folder) off
    ``sys.path``, so a ``bridge/`` package in the folder a client starts servers in is not
    run instead of the bridge."""
    argv = list(command)
    if argv and _is_python(argv[0]):
        for index in range(1, len(argv) - 1):
            if argv[index] == "-m" and argv[index + 1] == "bridge":
                if "-I" not in argv[1:index]:
                    argv.insert(1, "-I")
                break
    return argv


def bridge_command(*, prefer_script: bool = True) -> list[str]:
    """The argv prefix that starts this bridge again, as absolute paths, symlinks kept (a
    venv's ``python`` stays the venv's).

    In order: the frozen executable when frozen; the ``mcp-app-bridge`` console script
    that runs now, or the one installed beside this Python (same environment); else this
    Python in isolated mode: ``python -I -m bridge``.
    """
    if getattr(sys, "frozen", False):
        return [os.path.abspath(sys.executable)]
    names = ("mcp-app-bridge.exe", "mcp-app-bridge") if os.name == "nt" else ("mcp-app-bridge",)
    if prefer_script:
        script = sys.argv[0] if sys.argv else ""
        if script and os.path.basename(script) in names and os.path.isfile(script):
            return [os.path.abspath(script)]
        folder = os.path.dirname(os.path.abspath(sys.executable))
        for candidate in (folder, os.path.join(folder, "Scripts")):
            for name in names:
                path = os.path.join(candidate, name)
                if os.path.isfile(path) and os.access(path, os.X_OK):
                    return [path]
    return [os.path.abspath(sys.executable), "-I", "-m", "bridge"]


def resolve_command(
    given: str, *, environ: Mapping[str, str] | None = None, cwd: str | None = None
) -> tuple[str, list[str]]:
    """The absolute path to write for ``--command``, and warnings to show.

    The path is made absolute as the user gave it, symlinks kept (a venv's ``python`` must
    stay the venv's; a symlinked ``~/bin/MyApp`` must follow its later targets). A bare
    name (no folder in it) is looked up on ``PATH``.

    Raises:
        ClientConfigError: a bare name that is not on ``PATH``.
    """
    import shutil

    environ = os.environ if environ is None else environ
    cwd = os.getcwd() if cwd is None else cwd
    separators = (os.sep, os.altsep) if os.altsep else (os.sep,)
    if not any(sep in given for sep in separators if sep):
        found = shutil.which(given, path=environ.get("PATH", os.defpath))
        if found is None:
            raise ClientConfigError(
                f"{given!r} is not on PATH; give the executable's path (for example ./{given} or /full/path/{given})"
            )
        given = found
    path = given if os.path.isabs(given) else os.path.join(cwd, given)
    while os.sep + "." + os.sep in path:  # only the no-op "./" parts go; ".." is left, as it may cross a symlink
        path = path.replace(os.sep + "." + os.sep, os.sep)
    warnings = []
    if not os.path.exists(path):
        warnings.append(f"{path} does not exist (yet); the client will fail to start it until it does")
    elif os.path.isdir(path) or (os.name == "posix" and not os.access(path, os.X_OK)):
        warnings.append(f"{path} is not an executable file; the client will fail to start it")
    if path.lower().endswith((".cmd", ".bat")):  # punkpeye/mcp-remote#52
        warnings.append(
            f"{path} is a batch file, which Windows clients run through cmd.exe, where spaces split arguments; give the .exe"
        )
    return path, warnings


def command_warnings(argv: Sequence[str]) -> list[str]:
    """Warnings for an app's own command: without ``--mcp-stdio`` the client would start
    the app's window instead of the bridge."""
    if _is_python(argv[0]) and "bridge" in argv and "-m" in argv:
        return []
    if os.path.basename(argv[0]).startswith("mcp-app-bridge") or "--mcp-stdio" in argv[1:]:
        return []
    return [
        f"the arguments for {argv[0]} have no --mcp-stdio, so the client would start the app itself, "
        "not its bridge; add it after the command's options: --command PATH -- --mcp-stdio"
    ]


def split_secrets(args: Sequence[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The ``env`` block for bridge ``args``: the value of every ``--token-env VAR`` that is
    set in ``environ`` (the token must reach the bridge through its environment)."""
    env: dict[str, str] = {}
    for index, arg in enumerate(args):
        variable = None
        if arg == "--token-env" and index + 1 < len(args):
            variable = args[index + 1]
        elif arg.startswith("--token-env="):
            variable = arg.split("=", 1)[1]
        if variable and environ.get(variable):
            env[variable] = environ[variable]
    return env
