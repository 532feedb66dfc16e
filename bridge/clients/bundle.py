"""An MCP Bundle (``.mcpb``) around the frozen executable: Claude Desktop installs it with a
double click.

A bundle is a zip archive with ``manifest.json`` at its root (the MCPB manifest, version
:data:`MANIFEST_VERSION`, as the official ``@anthropic-ai/mcpb`` CLI validates it) and the
server's files beside it. This one holds the frozen bridge as ``server/mcp-app-bridge``
(``.exe`` on Windows), declared as a ``binary`` server whose ``mcp_config`` starts it from
the folder the client unpacked the bundle into (``${__dirname}``) with the bridge options
given here.

What the user must supply goes into ``user_config``, which the client asks for at install
time and keeps itself; ``mcp_config`` names it as ``${user_config.KEY}``, which the client
replaces wherever it appears in ``args`` and ``env``. No value that could be a secret is
ever written into the manifest:

- ``--token-env VAR`` becomes a required, sensitive ``token`` setting that the client
  passes as ``VAR`` in the server's environment;
- ``--token-command CMD`` becomes a required, sensitive ``token_command`` setting (the
  command may hold a credential);
- each ``--header 'NAME: VALUE'`` keeps its name and asks for its value (a required
  ``header_NAME`` setting); a header whose name says it carries a credential
  (``Authorization``, ``Cookie``, anything with *token*, *key*, *secret*, *auth*,
  *session*, *password*…) is refused, since the bridge would get its value on a command
  line that every local user can read: ``--token-env`` is the way to pass a token.

The environment of the machine building the bundle is not looked at.

**One folder or one file.** A PyInstaller one-folder build (``build/out/mcp-app-bridge-onedir/``:
the executable beside its ``_internal/`` folder) starts in place; a one-file executable
unpacks itself into a temporary folder at every start, which takes seconds on macOS and on
Windows with antivirus (pyinstaller#8774, #7473), against a client's 1-second budget.
Given the one-folder build (its folder, or the executable in it), the bundle holds the
whole folder: the executable at the entry point and ``_internal/`` beside it
(:data:`CONTENTS_FOLDER`). A one-file executable is bundled alone, as before.

The manifest's ``version`` is the bridge's own (``bridge._version``), the one
``mcp-app-bridge --version`` prints. The bridge's licence (MIT) requires its text to travel
with every copy, so the archive holds ``server/LICENSE`` beside the executable.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import tempfile
import zipfile
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from .._version import __version__
from ..core.unixurl import is_unix_url, split_unix_url
from .devicenames import is_device_name

__all__ = [
    "CONTENTS_FOLDER",
    "LICENSE_ENTRY",
    "MANIFEST_VERSION",
    "PLATFORMS",
    "BundleError",
    "bundle_manifest",
    "check_bundle_name",
    "entry_point",
    "frozen_executable",
    "license_text",
    "name_from_app_name",
    "read_manifest",
    "write_bundle",
]

#: The MCPB manifest version written: the one ``mcpb init`` writes (0.3 and 0.4 are marked
#: work in progress and experimental in the CLI's schemas).
MANIFEST_VERSION = "0.2"
#: The platform names of the manifest's ``compatibility.platforms`` (Node's ``process.platform``).
PLATFORMS = ("darwin", "win32", "linux")
#: Words in a header's name that say its value is a credential (matched in the lower-case
#: name): such a header is refused.
_SECRET_HEADER_WORDS = ("auth", "cookie", "token", "key", "secret", "passw", "session", "credential", "signature", "csrf", "xsrf")
#: A bundle's name: it may end up as a folder name on the user's machine.
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")
#: Bridge options that take a value, when the caller does not say (``bridge/cli/commands.py`` does).
_VALUE_OPTIONS = frozenset({"--header", "--token-env", "--token-command"})
#: Where the bridge's licence text goes in the archive: beside the executable.
LICENSE_ENTRY = "server/LICENSE"
#: The distribution whose licence text is bundled (pyproject's ``name``).
_DISTRIBUTION = "mcp-app-bridge"
#: Fixed time stamps make the archive depend on its contents only.
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
#: The folder beside a one-folder build's executable that holds its libraries and modules
#: (PyInstaller 6's ``contents_directory``); the bundle keeps it beside the entry point.
CONTENTS_FOLDER = "_internal"


class BundleError(ValueError):
    """The bundle cannot be built as asked; nothing was written."""


def license_text() -> str:
    """The bridge's licence text (``LICENSE``, MIT), as shipped with this copy of the bridge.

    Looked up in the installed distribution's metadata (``*.dist-info/licenses/LICENSE``,
    core metadata 2.4's ``License-File``), then in the frozen executable's unpacked data
    (``sys._MEIPASS``, where ``build/mcp-app-bridge.spec`` puts it), then in the source tree
    the package is imported from (a clone used without installing it).

    Raises:
        BundleError: no licence text was found in any of these places.
    """
    from importlib import metadata

    for distribution in metadata.distributions(name=_DISTRIBUTION):
        text = distribution.read_text("licenses/LICENSE")
        if text:
            return text
    places = []
    unpacked = getattr(sys, "_MEIPASS", None)
    if unpacked:
        places.append(Path(unpacked) / "LICENSE")
    for folder in Path(__file__).resolve().parents:
        if (folder / "pyproject.toml").is_file():
            places.append(folder / "LICENSE")
            break
    for place in places:
        if place.is_file():
            return place.read_text(encoding="utf-8")
    raise BundleError("the bridge's licence text (LICENSE) is not part of this installation; reinstall mcp-app-bridge")


def entry_point(platform: str) -> str:
    """The executable's path inside the bundle for ``platform``."""
    return "server/mcp-app-bridge.exe" if platform == "win32" else "server/mcp-app-bridge"


def frozen_executable(path: Path) -> Path:
    """The frozen executable ``path`` names: ``path`` itself, or, for a one-folder build's
    folder, the ``mcp-app-bridge`` (``.exe``) in it.

    Raises:
        BundleError: a folder with neither executable in it.
    """
    if not path.is_dir():
        return path
    for name in ("mcp-app-bridge", "mcp-app-bridge.exe"):
        if (path / name).is_file():
            return path / name
    raise BundleError(f"{path} is a folder without mcp-app-bridge or mcp-app-bridge.exe in it: give the frozen executable")


def _contents_folder(executable: Path) -> Path | None:
    """The ``_internal`` folder beside ``executable`` when it is a one-folder build's."""
    folder = executable.parent / CONTENTS_FOLDER
    return folder if folder.is_dir() and not folder.is_symlink() else None


def check_bundle_name(name: str) -> str:
    """Return ``name`` if it is a safe bundle name: 1 to 100 letters, digits, ``.``, ``_``
    and ``-``, starting and ending with a letter or digit, no ``..`` (no path separator, no
    parent folder: clients may use it as a folder name), and not a Windows device name
    (``con``, ``nul.txt``, ``LPT1``: ``devicenames.is_device_name``) on any OS.

    Raises:
        BundleError: it is not.
    """
    if not _NAME.fullmatch(name) or ".." in name:
        raise BundleError(
            f"the bundle name {name!r} is not allowed: use 1 to 100 letters, digits, '.', '_' or '-', "
            "starting and ending with a letter or digit (no path separators, no '..')"
        )
    if is_device_name(name):
        raise BundleError(
            f"the bundle name {name!r} is a Windows device name (CON, PRN, AUX, NUL, COM0-COM9, LPT0-LPT9, "
            "with or without an extension), which cannot be a folder name there: give --name another name"
        )
    return name


def name_from_app_name(app_name: str) -> str:
    """The default bundle name for ``--app-name``: lower case, other characters as ``-``.

    Raises:
        BundleError: nothing usable is left (then ``--name`` must be given).
    """
    slug = re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9._-]", "-", app_name.lower())).strip("-._")
    return check_bundle_name(slug.replace("..", "."))


def bundle_manifest(
    *,
    name: str,
    bridge_args: Sequence[str],
    platform: str,
    display_name: str | None = None,
    description: str | None = None,
    author: str | None = None,
    version: str = __version__,
    value_options: Collection[str] = _VALUE_OPTIONS,
) -> dict[str, Any]:
    """The ``manifest.json`` document.

    Args:
        name: the bundle's machine-readable name (e.g. ``myapp``; :func:`check_bundle_name`).
        bridge_args: the bridge options, as ``mcp-app-bridge`` takes them (already
            checked by the caller). ``--token-env``, ``--token-command`` and each
            ``--header`` value become ``user_config`` settings (see the module's docstring).
        platform: one of :data:`PLATFORMS`: the OS the executable was built for.
        display_name, description, author: shown by the client (defaults from ``name``).
        version: the bridge's version.
        value_options: the long options of ``bridge_args`` that take a value (so a value
            that looks like an option is not read as one).
    Raises:
        BundleError: a bad name, an unknown platform, a credential header in
            ``bridge_args``, more than one ``--token-env``, or an ``http+unix://``
            ``--url`` that ``platform`` cannot reach (Windows; a socket path over
            macOS's 103 bytes).
    """
    check_bundle_name(name)
    if platform not in PLATFORMS:
        raise BundleError(f"platform must be one of {', '.join(PLATFORMS)}, not {platform!r}")
    env: dict[str, str] = {}
    user_config: dict[str, Any] = {}
    shown = display_name or name
    args: list[str] = []
    link = "127.0.0.1"
    for option, value in _options(bridge_args, value_options):
        if value is None:
            args.append(option)
            continue
        if option == "--header":
            value = _header_setting(value, user_config)
        elif option == "--url" and is_unix_url(value):
            _check_unix_url_for(value, platform)
            link = "a Unix domain socket"
        elif option == "--token-command":
            user_config["token_command"] = {
                "type": "string",
                "title": f"{shown} token command",
                "description": f"The command that prints a token for {shown} (run without a shell). Kept by the client.",
                "sensitive": True,
                "required": True,
            }
            value = "${user_config.token_command}"
        elif option == "--token-env":
            if env:
                raise BundleError("give at most one --token-env")
            env[value] = "${user_config.token}"
            user_config["token"] = {
                "type": "string",
                "title": f"{shown} token",
                "description": f"The token {shown} gives for AI clients. Kept by the client and passed to the bridge as {value}.",
                "sensitive": True,
                "required": True,
            }
        args += [option, value]
    entry = entry_point(platform)
    mcp_config: dict[str, Any] = {"command": "${__dirname}/" + entry, "args": args}
    if env:
        mcp_config["env"] = env
    manifest: dict[str, Any] = {
        "manifest_version": MANIFEST_VERSION,
        "name": name,
        "display_name": shown,
        "version": version,
        "description": description or f"Lets Claude reach {shown}'s MCP server while {shown} runs.",
        "long_description": (
            f"The bundle holds mcp-app-bridge {version}: it speaks MCP on stdio to Claude and forwards each "
            f"message to {shown}'s own MCP server on this computer (Streamable HTTP on {link})."
        ),
        "author": {"name": author or shown},
        "license": "MIT",
        "server": {"type": "binary", "entry_point": entry, "mcp_config": mcp_config},
        "compatibility": {"platforms": [platform]},
    }
    if user_config:
        manifest["user_config"] = user_config
    return manifest


#: ``sun_path``'s room for a socket path, in bytes (without its final NUL), per platform.
_MAX_SOCKET_PATH_BYTES = {"linux": 107, "darwin": 103}


def _check_unix_url_for(url: str, platform: str) -> None:
    """An ``http+unix://`` ``--url`` the bridge on ``platform`` can reach (the bundle may be
    built on another OS than the one it is for; ``bridge/core/unixurl.py``'s own size
    check is this OS's).

    Raises:
        BundleError: ``platform`` is ``win32`` (its bridge has no Unix-socket link), or the
            socket path is longer than ``platform`` allows.
    """
    if platform == "win32":
        raise BundleError("--url: an http+unix:// URL names a Unix domain socket, which the Windows bridge does not "
                          "connect to (Windows apps serve on TCP); give the app's http://127.0.0.1 URL or --app-name")
    try:
        socket_path, _target = split_unix_url(url)
    except ValueError as exc:
        raise BundleError(f"--url: {exc}") from None
    size, limit = len(os.fsencode(socket_path)), _MAX_SOCKET_PATH_BYTES[platform]
    if size > limit:
        raise BundleError(f"--url: the socket path of the http+unix:// URL is {size} bytes; {platform} allows {limit}")


def _refuse_shim(executable: Path) -> None:
    """Refuse what only runs beside its own Python: a script (a text file starting with
    ``#!``, like the ``mcp-app-bridge`` console script pip writes) or any entry point in a
    virtual environment's ``bin``/``Scripts`` folder (on Windows pip's ``.exe`` launcher,
    which starts the venv's ``python.exe``). The bundle must carry the frozen executable.

    Raises:
        BundleError: it is one of those; the message says what to give instead.
    """
    try:
        with executable.open("rb") as file:
            head = file.read(2)
    except OSError as exc:
        raise BundleError(f"cannot read the executable {executable}: {exc.strerror}") from None
    frozen = "give the frozen executable instead (build/out/mcp-app-bridge, built as build/README.md says)"
    if head == b"#!":
        raise BundleError(
            f"{executable} is a script (it starts with #!), such as the console script pip installs; "
            f"it needs its Python and cannot run anywhere else: {frozen}"
        )
    folder = executable.resolve().parent
    if folder.name in ("bin", "Scripts") and (folder.parent / "pyvenv.cfg").is_file():
        raise BundleError(
            f"{executable} is an entry point of the virtual environment {folder.parent}; "
            f"it needs that environment and cannot run anywhere else: {frozen}"
        )


def write_bundle(executable: Path, out: Path, manifest: dict[str, Any], *, license_body: str | None = None) -> None:
    """Write the ``.mcpb`` archive: ``manifest.json``, the executable at the manifest's
    ``server.entry_point`` (mode 0755 recorded, so unzipping keeps it executable), for a
    one-folder build its :data:`CONTENTS_FOLDER` beside it (each file's executable bit
    kept; a symbolic link as the file it names) and the licence text at
    :data:`LICENSE_ENTRY` (``license_body``, by default :func:`license_text`).

    The archive is written beside ``out`` and renamed into place, so ``out`` is either
    the old file or the complete new one.

    Raises:
        BundleError: ``executable`` is not a regular file, not executable on POSIX, or a
            script or virtual-environment entry point, not a frozen executable; or no
            licence text was found.
        OSError: the archive could not be written (``out`` is unchanged).
    """
    try:
        mode = executable.stat().st_mode
    except OSError as exc:
        raise BundleError(f"cannot read the executable {executable}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise BundleError(f"{executable} is not a file")
    if sys.platform != "win32" and not mode & stat.S_IXUSR:
        raise BundleError(f"{executable} is not executable")
    _refuse_shim(executable)
    if license_body is None:
        license_body = license_text()
    out.parent.mkdir(parents=True, exist_ok=True)
    # Created O_EXCL (never through a planted link) with an unpredictable name, in the same
    # folder so the rename is atomic.
    descriptor, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    temporary = Path(name)
    try:
        with os.fdopen(descriptor, "w+b") as handle, zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            info = zipfile.ZipInfo("manifest.json", _ZIP_TIME)
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
            info = zipfile.ZipInfo(manifest["server"]["entry_point"], _ZIP_TIME)
            info.external_attr = (stat.S_IFREG | 0o755) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            _add_file(archive, executable, info)
            contents = _contents_folder(executable)
            if contents is not None:
                base = manifest["server"]["entry_point"].rpartition("/")[0] + "/" + CONTENTS_FOLDER
                for file in sorted(path for path in contents.rglob("*") if path.is_file()):
                    info = zipfile.ZipInfo(f"{base}/{file.relative_to(contents).as_posix()}", _ZIP_TIME)
                    info.external_attr = (stat.S_IFREG | (0o755 if os.stat(file).st_mode & stat.S_IXUSR else 0o644)) << 16
                    info.compress_type = zipfile.ZIP_DEFLATED
                    _add_file(archive, file, info)
            info = zipfile.ZipInfo(LICENSE_ENTRY, _ZIP_TIME)
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, license_body)
        if os.name == "posix":  # mkstemp makes it 0600; a bundle is for sharing: the usual mode
            umask = os.umask(0o022)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, out)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _add_file(archive: zipfile.ZipFile, file: Path, info: zipfile.ZipInfo) -> None:
    """Copy ``file`` into ``archive`` as ``info``, a MiB at a time."""
    with file.open("rb") as source, archive.open(info, "w", force_zip64=True) as target:
        while chunk := source.read(1024 * 1024):
            target.write(chunk)


def _options(bridge_args: Sequence[str], value_options: Collection[str]) -> list[tuple[str, str | None]]:
    """``bridge_args`` as (option, value) pairs: ``--x V`` and ``--x=V`` give ``("--x", "V")``;
    a flag or anything else gives ``(arg, None)``."""
    pairs: list[tuple[str, str | None]] = []
    index = 0
    while index < len(bridge_args):
        arg = bridge_args[index]
        option, equals, inline = arg.partition("=")
        index += 1
        if arg.startswith("--") and option in value_options:
            if equals:
                pairs.append((option, inline))
            elif index < len(bridge_args):
                pairs.append((option, bridge_args[index]))
                index += 1
            else:
                pairs.append((arg, None))
        else:
            pairs.append((arg, None))
    return pairs


def _header_setting(header: str, user_config: dict[str, Any]) -> str:
    """``NAME: ${user_config.header_NAME}`` for ``--header 'NAME: VALUE'``, with the setting
    added to ``user_config``; the value itself is dropped.

    Raises:
        BundleError: the name says the value is a credential.
    """
    name = header.partition(":")[0].strip()
    if any(word in name.lower() for word in _SECRET_HEADER_WORDS):
        raise BundleError(
            f"the header {name!r} carries a credential: a bundle never holds one, and the bridge would get it on "
            "its command line, which other local users can read (give the token with --token-env instead)"
        )
    key = base = "header_" + (re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "value")
    number = 2
    while key in user_config:
        key, number = f"{base}_{number}", number + 1
    user_config[key] = {
        "type": "string",
        "title": f"{name} header",
        "description": f"The value of the {name} header the bridge sends with every request to the app.",
        "sensitive": False,
        "required": True,
    }
    return f"{name}: ${{user_config.{key}}}"


def read_manifest(bundle: Path) -> dict[str, Any]:
    """The ``manifest.json`` of a ``.mcpb`` archive (for checks and tests)."""
    with zipfile.ZipFile(bundle) as archive:
        document: dict[str, Any] = json.loads(archive.read("manifest.json"))
    return document
