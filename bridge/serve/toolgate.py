"""The tool gate: the one layer in front of the request stack that applies the tool filter
(``--allow-tool``, ``--deny-tool``, ``--read-only``; the rules are ``bridge/core/toolfilter.py``).

It wraps the forwarding of each request as ``heartbeat.py`` does (``Dispatcher._forward``),
and never calls back up: below it, the era translations, lazy launch, page merging and the
driver see the app's whole list, so the catalog keeps it whole; above it, the client sees
only what passes. So every reply path is filtered on its way out, whichever produced it:
the app's live reply, the catalog's, merged pages, a translated one, in either era.

- ``tools/list``: the reply's ``result.tools`` keeps the tools that pass
  (:func:`~bridge.core.toolfilter.filter_tools_result`); the line is re-encoded only when a
  tool was hidden. A reply that answers a listed request from outside its own exchange (the
  app's response on another stream, ``Dispatcher.relay``) passes :meth:`ToolGate.relayed`.
- ``tools/call`` of a hidden tool: answered here with -32602, reason ``tool_filtered``
  (``ToolFilteredError``); nothing is sent to the app. Under ``--read-only`` a tool whose
  annotations this gate has not seen in a list it passed is refused too (fail closed).
- Notifications (``notifications/tools/list_changed``) do not pass here: they reach the
  client as before, and its next ``tools/list`` is filtered.
- A complete list (no ``nextCursor``) that had tools and keeps none is logged once each
  time it becomes empty: a warning, or ``info`` when ``--deny-tool`` alone hid them
  (:func:`~bridge.core.toolfilter.hidden_on_purpose`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.errors import ToolFilteredError
from ..core.jsonrpc import Request, encode_message, error_line
from ..core.ledger import id_key
from ..core.toolfilter import (
    DENY_OPTION,
    READ_ONLY_OPTION,
    ToolFilter,
    filter_tools_result,
    hidden_on_purpose,
    is_read_only,
)
from ..streamable.upstream import Emit

__all__ = ["ToolGate"]

log = logging.getLogger("bridge")

#: How much of a tool name a message repeats (a client may send any string).
_NAME_SHOWN_CHARS = 200

Send = Callable[[Request, Emit], Awaitable[bytes]]


class ToolGate:
    """The tool filter of one bridge run, in front of ``send``.

    Args:
        rules: the filter (:attr:`ToolFilter.active`: the caller builds a gate only then).
        send: ``async (request, emit) -> line``: the request stack below (``Driver.request``).
        app_name: how the app is named in log lines.
    """

    def __init__(self, rules: ToolFilter, send: Send, *, app_name: str) -> None:
        self._rules = rules
        self._send = send
        self._app = app_name
        # The tools/list requests in flight: id → whether it asks for the first page (no cursor).
        self._listing: dict[tuple[type, Any], bool] = {}
        # Tool name → annotated readOnlyHint: true, as the last whole list (and the pages
        # after it) said: bounded by the app's list, which --max-message-bytes bounds.
        self._read_only: dict[str, bool] = {}
        self._emptied = False  # the last complete list was left empty (logged once)

    async def request(self, request: Request, emit: Emit) -> bytes:
        """Forward ``request`` through the filter; return its stdout line.

        Raises:
            UpstreamError: as ``send`` raises it.
        """
        if request.method == "tools/call":
            refusal = self._refusal(request)
            if refusal is not None:
                return refusal
            return await self._send(request, emit)
        if request.method != "tools/list":
            return await self._send(request, emit)
        key = id_key(request.id)
        whole = not (isinstance(request.params, dict) and request.params.get("cursor") is not None)
        self._listing[key] = whole
        try:
            line = await self._send(request, emit)
        finally:
            self._listing.pop(key, None)
        return self._filtered(line, whole=whole)

    def relayed(self, line: bytes, message: Any) -> bytes:
        """A message from the app outside a request's own exchange (``Dispatcher.relay``):
        a response to a ``tools/list`` in flight here is filtered; anything else is returned
        as it is."""
        if not self._listing or type(message) is not dict or "method" in message or "id" not in message:
            return line
        request_id = message["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)) or id_key(request_id) not in self._listing:
            return line
        return self._filtered(line, whole=self._listing[id_key(request_id)])

    def _refusal(self, request: Request) -> bytes | None:
        """The error line for a ``tools/call`` of a hidden tool, or ``None`` (it may go)."""
        params = request.params
        name = params.get("name") if isinstance(params, dict) else None
        if not isinstance(name, str):
            return None  # not a call the filter can judge: the app answers it (-32602)
        option = self._rules.hides_name(name)
        known = self._read_only.get(name)
        if option is None and self._rules.read_only and not known:
            option = READ_ONLY_OPTION
        if option is None:
            return None
        shown = name if len(name) <= _NAME_SHOWN_CHARS else name[:_NAME_SHOWN_CHARS] + "…"
        if option == READ_ONLY_OPTION and known is None:
            why = "only tools the app lists as readOnlyHint: true are allowed, and it was in no tools/list this bridge served"
        elif option == READ_ONLY_OPTION:
            why = "only tools the app annotates readOnlyHint: true are allowed"
        else:
            why = "its name matches a glob given there" if option == DENY_OPTION else "its name matches none of the globs given there"
        log.info("tools/call %r: %r is hidden by %s; not sent to %s", request.id, shown, option, self._app)
        message = f"The tool {shown!r} is not available to this client: the bridge's {option} option hides it ({why})."
        return error_line(request.id, ToolFilteredError(message, option))

    def _filtered(self, line: bytes, *, whole: bool) -> bytes:
        """A ``tools/list`` reply line with the hidden tools left out (``line`` itself when
        none is, or when it is no result). ``whole``: the request asked for the first page,
        so a reply without ``nextCursor`` is the app's whole list."""
        if b'"tools"' not in line:
            return line  # an error reply, or no list at all
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError):
            return line
        result = reply.get("result") if isinstance(reply, dict) else None
        if not isinstance(result, dict):
            return line
        tools = result.get("tools")
        listed = {tool["name"]: is_read_only(tool) for tool in tools if isinstance(tool, dict) and isinstance(tool.get("name"), str)} if isinstance(tools, list) else {}
        filtered, hidden = filter_tools_result(result, self._rules)
        if whole and result.get("nextCursor") is None:  # the app's whole list: it replaces what was known
            self._read_only = listed
            self._log_if_emptied(filtered, hidden)
        else:  # one page of it
            self._read_only.update(listed)
        if not hidden:
            return line
        log.debug("tools/list: %d of %s's tools hidden by the tool filter", len(hidden), self._app)
        return encode_message({**reply, "result": filtered})

    def _log_if_emptied(self, filtered: Any, hidden: list[Any]) -> None:
        emptied = bool(hidden) and not filtered.get("tools")
        if emptied and not self._emptied:
            level = logging.INFO if hidden_on_purpose(hidden) else logging.WARNING
            log.log(
                level,
                "tools/list: the tool filter (%s) hides all %d of %s's tools: the client sees none "
                "(`mcp-app-bridge check` with the same options shows what each option hides)",
                ", ".join(self._rules.options),
                len(hidden),
                self._app,
            )
        self._emptied = emptied
