"""Known quirks of real clients, smoothed before a message is forwarded.

Pure: imports only the standard library.

Each quirk has its public bug report; docs/behaviour.md ("Quirks smoothed") lists them
with the same sources. The check costs one string comparison per request that has none:
every other message is forwarded byte for byte, as read.

- **``tools/call`` with ``"arguments": null``.** Clients whose JSON libraries write an
  absent field as ``null`` (common in Go, Java and C#) send it for a tool without
  arguments; the schema allows only an object or no member (MCP schema,
  ``CallToolRequestParams.arguments``), and servers built on the official TypeScript SDK
  answer -32603 (modelcontextprotocol/typescript-sdk#2012). The bridge sends ``{}``
  instead, re-encoding that one message.
"""

from __future__ import annotations

from typing import Any

__all__ = ["smoothed_request"]


def smoothed_request(message: dict[str, Any]) -> dict[str, Any] | None:
    """The request to send instead of ``message`` when a known client quirk is smoothed,
    else ``None`` (send it as it was read).

    Args:
        message: a JSON-RPC request object (already valid).

    Returns:
        a new object (``message`` is left as it was), or ``None``.
    """
    if message["method"] != "tools/call":
        return None
    params = message.get("params")
    if type(params) is dict and "arguments" in params and params["arguments"] is None:
        return {**message, "params": {**params, "arguments": {}}}
    return None
