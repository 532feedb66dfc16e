"""An MCP Bundle (``.mcpb``) around the frozen executable: Claude Desktop installs it with a
double click.

A bundle is a zip archive with ``manifest.json`` at its root (the MCPB manifest, version
:data:`MANIFEST_VERSION`, as the official ``@anthropic-ai/mcpb`` CLI validates it) and the
server's files beside it. This one holds the frozen bridge as ``server/mcp-app-bridge``
(``.exe`` on Windows), declared as a ``binary`` server whose ``mcp_config`` starts it from
the folder the client unpacked the bundle into (``${__dirname}``) with the bridge options
given here.

What the user must supply goes into ``user_config``, which the client asks for at install
time and keeps itself: a ``--token-env VAR`` becomes a required, sensitive ``token``
setting that the client passes as ``VAR`` in the server's environment. No secret value is
ever read or written here: the environment of the machine building the bundle is not
looked at, and a header that carries credentials is refused.

The manifest's ``version`` is the bridge's own (``bridge._version``), the one
``mcp-app-bridge --version`` prints. The bridge's licence (MIT) requires its text to travel
with every copy, so the archive holds ``server/LICENSE`` beside the executable.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._version import __version__

__all__ = [
    "LICENSE_ENTRY",
    "MANIFEST_VERSION",
    "PLATFORMS",
    "BundleError",
    "bundle_manifest",
    "entry_point",
    "license_text",
    "read_manifest",
    "write_bundle",
]

#: The MCPB manifest version written: the one ``mcpb init`` writes (0.3 and 0.4 are marked
#: work in progress and experimental in the CLI's schemas).
MANIFEST_VERSION = "0.2"
#: The platform names of the manifest's ``compatibility.platforms`` (Node's ``process.platform``).
PLATFORMS = ("darwin", "win32", "linux")
#: Headers whose value is a credential: never written into a bundle.
_SECRET_HEADERS = ("authorization", "proxy-authorization", "cookie", "x-api-key")
#: Where the bridge's licence text goes in the archive: beside the executable.
LICENSE_ENTRY = "server/LICENSE"
#: The distribution whose licence text is bundled (pyproject's ``name``).
_DISTRIBUTION = "mcp-app-bridge"
#: Fixed time stamps make the archive depend on its contents only.
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


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


def bundle_manifest(
    *,
    name: str,
    bridge_args: Sequence[str],
    platform: str,
    display_name: str | None = None,
    description: str | None = None,
    author: str | None = None,
    version: str = __version__,
) -> dict[str, Any]:
    """The ``manifest.json`` document.

    Args:
        name: the bundle's machine-readable name (e.g. ``myapp``).
        bridge_args: the bridge options, as ``mcp-app-bridge`` takes them (already
            checked by the caller); ``--token-env VAR`` becomes ``user_config.token``.
        platform: one of :data:`PLATFORMS`: the OS the executable was built for.
        display_name, description, author: shown by the client (defaults from ``name``).
        version: the bridge's version.
    Raises:
        BundleError: an unknown platform, a credential in ``bridge_args``, or more than
            one ``--token-env``.
    """
    if platform not in PLATFORMS:
        raise BundleError(f"platform must be one of {', '.join(PLATFORMS)}, not {platform!r}")
    args = list(bridge_args)
    env: dict[str, str] = {}
    user_config: dict[str, Any] = {}
    shown = display_name or name
    for index, arg in enumerate(args):
        value = args[index + 1] if index + 1 < len(args) else ""
        option, _, inline = arg.partition("=")
        if option == "--header":
            header = inline or value
            if header.partition(":")[0].strip().lower() in _SECRET_HEADERS:
                raise BundleError(f"the header {header.partition(':')[0].strip()!r} carries a credential; a bundle never holds one (use --token-env)")
        if option == "--token-env":
            variable = inline or value
            if env:
                raise BundleError("give at most one --token-env")
            env[variable] = "${user_config.token}"
            user_config["token"] = {
                "type": "string",
                "title": f"{shown} token",
                "description": f"The token {shown} gives for AI clients. Kept by the client and passed to the bridge as {variable}.",
                "sensitive": True,
                "required": True,
            }
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
            f"message to {shown}'s own MCP server on this computer (Streamable HTTP on 127.0.0.1)."
        ),
        "author": {"name": author or shown},
        "license": "MIT",
        "server": {"type": "binary", "entry_point": entry, "mcp_config": mcp_config},
        "compatibility": {"platforms": [platform]},
    }
    if user_config:
        manifest["user_config"] = user_config
    return manifest


def write_bundle(executable: Path, out: Path, manifest: dict[str, Any], *, license_body: str | None = None) -> None:
    """Write the ``.mcpb`` archive: ``manifest.json``, the executable at the manifest's
    ``server.entry_point`` (mode 0755 recorded, so unzipping keeps it executable) and the
    licence text beside it at :data:`LICENSE_ENTRY` (``license_body``, by default
    :func:`license_text`).

    The archive is written beside ``out`` and renamed into place, so ``out`` is either
    the old file or the complete new one.

    Raises:
        BundleError: ``executable`` is not a regular file, or not executable on POSIX; or
            no licence text was found.
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
    if license_body is None:
        license_body = license_text()
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            info = zipfile.ZipInfo("manifest.json", _ZIP_TIME)
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
            info = zipfile.ZipInfo(manifest["server"]["entry_point"], _ZIP_TIME)
            info.external_attr = (stat.S_IFREG | 0o755) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            with executable.open("rb") as source, archive.open(info, "w", force_zip64=True) as target:
                while chunk := source.read(1024 * 1024):
                    target.write(chunk)
            info = zipfile.ZipInfo(LICENSE_ENTRY, _ZIP_TIME)
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, license_body)
        os.replace(temporary, out)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def read_manifest(bundle: Path) -> dict[str, Any]:
    """The ``manifest.json`` of a ``.mcpb`` archive (for checks and tests)."""
    with zipfile.ZipFile(bundle) as archive:
        document: dict[str, Any] = json.loads(archive.read("manifest.json"))
    return document
