"""One-click install links (``config link``) for the clients that take them.

- VS Code: ``vscode:mcp/install?<percent-encoded JSON>``, the JSON being what
  ``code --add-mcp`` takes: ``{"name", "type", "command", "args", "env", "inputs"}``
  (https://code.visualstudio.com/docs/copilot/guides/mcp-developer-guide, "MCP URL handler").
- Cursor: ``cursor://anysphere.cursor-deeplink/mcp/install?name=NAME&config=BASE64``, the
  config being the entry's ``mcp.json`` object, JSON then base64
  (https://cursor.com/docs/mcp/install-links).

A secret value never goes into a link: a link is pasted into chats, READMEs and browser
histories. For VS Code each ``env`` value becomes ``${input:VAR}`` with a password prompt
in ``inputs``, so VS Code asks for it at install and keeps it in its secret storage. Cursor
links have no such prompt, so the variable is left out and a warning says how to supply it.
"""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

from .clienttable import ClientConfigError, ServerEntry, check_name, entry_object

__all__ = ["LINK_CLIENTS", "install_link"]

#: Clients ``config link`` makes links for.
LINK_CLIENTS = ("vscode", "cursor")


def install_link(client: str, name: str, entry: ServerEntry) -> tuple[str, list[str]]:
    """The install URL for ``entry`` and warnings to show (what the link leaves out).

    Raises:
        ClientConfigError: a client without install links, or a name it refuses.
    """
    check_name(client, name)
    warnings: list[str] = []
    compact = {"separators": (",", ":"), "ensure_ascii": False}
    if client == "vscode":
        obj = {"name": name, **entry_object("vscode", ServerEntry(entry.command, entry.args))}
        if entry.env:
            obj["env"] = {variable: "${input:" + variable + "}" for variable in entry.env}
            obj["inputs"] = [
                {"type": "promptString", "id": variable, "description": f"{variable} for {name}", "password": True}
                for variable in entry.env
            ]
            warnings.append(
                f"VS Code will ask for {', '.join(entry.env)} when it installs the server; the link holds no value"
            )
        return "vscode:mcp/install?" + quote(json.dumps(obj, **compact), safe=""), warnings  # type: ignore[arg-type]
    if client == "cursor":
        config = entry_object("cursor", ServerEntry(entry.command, entry.args))
        if entry.env:
            variables = ", ".join(entry.env)
            warnings.append(
                f"the link carries no value for {variables}: start Cursor with it set in its environment, "
                f'or add it to the entry\'s "env" in ~/.cursor/mcp.json after installing (or use `config install`)'
            )
        encoded = base64.b64encode(json.dumps(config, **compact).encode("utf-8")).decode("ascii")  # type: ignore[arg-type]
        return (
            f"cursor://anysphere.cursor-deeplink/mcp/install?name={quote(name, safe='')}&config={quote(encoded, safe='')}",
            warnings,
        )
    raise ClientConfigError(f"{client} takes no install link; links exist for {', '.join(LINK_CLIENTS)}")
