"""A client inside WSL (Windows Subsystem for Linux), and a Windows app beside it.

Codex on Windows runs its agent inside WSL by default. A bridge started there is a Linux
process: it reaches neither a Windows app's named pipe nor, under WSL 2's NAT networking,
the app's loopback port (CoderGamester/mcp-unity issue 74, cookjohn/zotero-mcp issue 68,
mrexodia/ida-pro-mcp issue 405). WSL's interop runs a Windows executable started from
Linux as a Windows process (Microsoft Learn, "Working across Windows and Linux file
systems"), so the entry ``config install`` writes inside WSL runs the *Windows*
``mcp-app-bridge.exe`` by its ``/mnt/c/…`` path, with every path argument written the
Windows way: the bridge then runs on the Windows side, beside the app.

- :func:`wsl_distribution`: whether this is WSL, from ``WSL_DISTRO_NAME``, WSL's interop
  registration ``/proc/sys/fs/binfmt_misc/WSLInterop``, or "microsoft" in ``/proc/version``.
- :func:`find_windows_exe`: ``mcp-app-bridge.exe`` on this ``PATH`` (WSL appends the Windows
  ``PATH`` to the Linux one unless ``appendWindowsPath`` is off in ``/etc/wsl.conf``);
  ``--windows-exe`` names it otherwise.
- :func:`windows_path`: ``/mnt/c/Users/me/x`` → ``C:\\Users\\me\\x``; a path of the Linux
  side → ``\\\\wsl.localhost\\<distribution>\\…``.
- :func:`windows_entry`: the argv and ``env`` of such an entry. A Windows process gets
  only the Linux variables that ``WSLENV`` names, so the entry's ``env`` sets ``WSLENV`` to
  the names it must carry across (a ``--token-env`` variable among them), and leaves out
  ``XDG_STATE_HOME``, which means nothing to the Windows bridge.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

__all__ = [
    "WINDOWS_EXE_NAME",
    "find_windows_exe",
    "wsl_distribution",
    "windows_entry",
    "windows_path",
    "describe_command",
    "wsl_exe_path",
]

#: The Windows bridge's file name (the release's ``mcp-app-bridge-windows-x86_64.exe``
#: installed under this name, or pipx's console script).
WINDOWS_EXE_NAME = "mcp-app-bridge.exe"
#: Bridge options whose value is one path, and those whose value is a command line.
PATH_OPTIONS = ("--discovery-file", "--token-file", "--secret-file", "--launch-log", "--log-file")
COMMAND_OPTIONS = ("--launch", "--token-command")
_DRIVE = re.compile(r"^/mnt/([A-Za-z])(?:/(.*))?$")


def wsl_distribution(environ: Mapping[str, str], proc: Path = Path("/proc")) -> str | None:
    """The WSL distribution this runs in (its name, or ``"WSL"`` when unnamed), or ``None``
    outside WSL. ``proc`` is the ``/proc`` to read (a fake one in the tests)."""
    name = environ.get("WSL_DISTRO_NAME", "").strip()
    if name:
        return name
    if (proc / "sys" / "fs" / "binfmt_misc" / "WSLInterop").exists():
        return "WSL"
    try:
        version = (proc / "version").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return "WSL" if "microsoft" in version.lower() else None


def find_windows_exe(path_variable: str | None) -> str | None:
    """``mcp-app-bridge.exe`` on ``path_variable`` (this shell's ``PATH``, which holds the
    Windows one too in WSL by default), or ``None``."""
    return shutil.which(WINDOWS_EXE_NAME, path=path_variable)


def wsl_exe_path(path: str) -> str:
    """``--windows-exe`` as WSL runs it: a Windows path (``C:\\…\\x.exe``) as its drive
    mount (``/mnt/c/…/x.exe``); a WSL path kept."""
    match = re.match(r"^([A-Za-z]):[\\/](.*)$", path)
    if match:
        return f"/mnt/{match.group(1).lower()}/" + match.group(2).replace("\\", "/")
    return path


def windows_path(path: str, distribution: str) -> str:
    """``path`` as a Windows program names it: a drive's mount (``/mnt/c/…``) as ``C:\\…``,
    any other absolute path through ``\\\\wsl.localhost\\<distribution>``; a relative path
    or one written the Windows way already is kept."""
    if not path.startswith("/"):
        return path
    match = _DRIVE.match(str(PurePosixPath(path)))
    if match:
        drive, rest = match.group(1).upper(), match.group(2) or ""
        return f"{drive}:\\" + rest.replace("/", "\\")
    return f"\\\\wsl.localhost\\{distribution}" + str(PurePosixPath(path)).replace("/", "\\")


def _command_value(value: str, distribution: str) -> str:
    """A ``--launch``/``--token-command`` value written in WSL (POSIX words) as a Windows
    command line, each absolute path in it made a Windows one."""
    import shlex

    try:
        words = shlex.split(value)
    except ValueError:
        return value
    return subprocess.list2cmdline([windows_path(word, distribution) for word in words])


def windows_entry(
    exe: str, args: Sequence[str], env: Mapping[str, str], passed: Sequence[str], distribution: str
) -> tuple[list[str], dict[str, str], list[str]]:
    """The entry that runs the Windows bridge ``exe`` (its ``/mnt/…`` path) from WSL.

    Args:
        exe: the Windows bridge, by its WSL path (``/mnt/c/…/mcp-app-bridge.exe``).
        args: the bridge options as given in WSL.
        env: the entry's ``env`` as it would be on Linux.
        passed: variables the client passes from its own environment by name.
        distribution: this WSL distribution's name.

    Returns:
        ``(argv, env, remarks)``: ``args`` with every path option's value and every path in
        a command option made a Windows path; ``env`` without ``XDG_STATE_HOME`` and with
        ``WSLENV`` naming each variable the Windows bridge must get; what to tell the user.
    """
    argv = [exe]
    remarks: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        name, equals, inline = arg.partition("=")
        if name in PATH_OPTIONS + COMMAND_OPTIONS:
            value = inline if equals else (args[index + 1] if index + 1 < len(args) else None)
            if value is not None:
                converted = windows_path(value, distribution) if name in PATH_OPTIONS else _command_value(value, distribution)
                if "\\\\wsl.localhost\\" in converted:
                    remarks.append(
                        f"{name} names a file of the Linux side ({value}); the Windows bridge reaches it as {converted} "
                        "while this distribution runs, but a Windows path is safer"
                    )
                argv += [f"{name}={converted}"] if equals else [name, converted]
                index += 1 if equals else 2
                continue
        argv.append(arg)
        index += 1
    windows_env = {name: value for name, value in env.items() if name != "XDG_STATE_HOME"}
    carried = [name for name in (*windows_env, *passed) if name != "WSLENV"]
    if carried:
        windows_env["WSLENV"] = ":".join(dict.fromkeys(carried))
    return argv, windows_env, remarks


def describe_command(command: str, distribution: str) -> str:
    """What an entry's ``command`` runs, said from inside WSL (for ``check``)."""
    if command.lower().endswith(".exe") and _DRIVE.match(command):
        return (
            f"runs the Windows program {windows_path(command, distribution)} through WSL interop: the bridge is a "
            "Windows process, beside a Windows app"
        )
    return (
        "runs a Linux program inside WSL: it reaches an app in this distribution, but neither a Windows app's named "
        "pipe nor, under WSL 2's NAT, its loopback port (install it again from here to run the Windows "
        f"{WINDOWS_EXE_NAME} instead)"
    )
