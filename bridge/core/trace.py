"""The trace: what the bridge does with each JSON-RPC message, one debug log line each.

Pure: standard library only. ``bridge/serve/dispatch.py`` writes the lines to the
``bridge.trace`` logger at ``DEBUG`` (``--log-level debug``; docs/usage.md, "What the bridge
does, line by line"). A line says the direction, the kind (request, notification, response,
reply), the method, the JSON-RPC id, the size in bytes and, for a reply, the time since its
request started and who answered it:

    client→app request tools/call id 3 (120 bytes)
    app→client notification notifications/progress (85 bytes)
    bridge→client reply to tools/call id 3 (2345 bytes) after 12.3 ms, answered by the app

Who answered (:data:`ANSWERERS`): ``app`` (its own reply, a JSON-RPC error included),
``catalog`` (lazy launch, ``bridge/core/lazylaunch.py``) or ``bridge`` (an error of the
bridge's own: ``timeout``, ``shutting_down``, an invalid line…). Never params, results,
headers or tokens: a line holds only what this module is given, and it is given none.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["ANSWERERS", "DIRECTIONS", "LOGGER_NAME", "MAX_METHOD_CHARS", "message_line"]

#: The logger the trace goes to (a child of ``bridge``: ``--log-level debug`` shows it).
LOGGER_NAME = "bridge.trace"
#: Who sends a message to whom.
DIRECTIONS = ("client→app", "app→client", "bridge→client", "bridge→app")
#: Who answered a request.
ANSWERERS = ("app", "catalog", "bridge")
#: A method name longer than this (characters) is cut: a client chooses it.
MAX_METHOD_CHARS = 80


def message_line(
    direction: str,
    kind: str,
    *,
    method: Any = None,
    request_id: Any = None,
    has_id: bool = False,
    size_bytes: int,
    elapsed_seconds: float | None = None,
    answered_by: str | None = None,
) -> str:
    """One trace line (see the module docstring).

    Args:
        direction: one of :data:`DIRECTIONS`.
        kind: ``request``, ``notification``, ``response`` or ``reply`` (a reply to a
            client's request).
        method: the JSON-RPC method (cut to :data:`MAX_METHOD_CHARS`), or ``None``.
        request_id: the JSON-RPC id (shown as JSON: ``3`` and ``"3"`` differ), shown when
            ``has_id``.
        size_bytes: the message's size on the wire, its line end excluded.
        elapsed_seconds: for a reply, the time since its request started.
        answered_by: for a reply, one of :data:`ANSWERERS`.

    Raises:
        ValueError: an unknown ``direction`` or ``answered_by``.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"not a trace direction: {direction}")
    if answered_by is not None and answered_by not in ANSWERERS:
        raise ValueError(f"not an answerer: {answered_by}")
    parts = [direction, kind + (" to" if kind == "reply" and method is not None else "")]
    if method is not None:
        name = method if isinstance(method, str) else json.dumps(method)
        parts.append(name if len(name) <= MAX_METHOD_CHARS else name[:MAX_METHOD_CHARS] + "…")
    if has_id:
        parts.append("id " + _id_text(request_id))
    line = " ".join(parts) + f" ({size_bytes} bytes)"
    if elapsed_seconds is not None:
        line += f" after {elapsed_seconds * 1000:.1f} ms"
    if answered_by is not None:
        line += f", answered by the {answered_by}"
    return line


def _id_text(request_id: Any) -> str:
    text = json.dumps(request_id, ensure_ascii=True)
    return text if len(text) <= MAX_METHOD_CHARS else text[:MAX_METHOD_CHARS] + "…"
