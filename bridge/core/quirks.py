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
- **A list reply with ``nextCursor``, for a client that drops pages** (opt-in,
  ``--merge-list-pages``). Some clients read only the first page of a list and never send
  its ``cursor`` (MCP server/utilities/pagination), so the tools of the later pages are
  never seen: Gemini CLI 0.61.0 (measured: docs/clients.md, "Lists in pages"), Codex
  0.140.0 (openai/codex#28858; 0.169.0 follows the cursors), Claude Desktop
  (anthropics/claude-code#66537), GitHub Copilot CLI 1.0.68 (github/copilot-cli#4006). The driver asks the app for the next pages
  under private ids and :class:`ListMerge` joins them into one reply without
  ``nextCursor``, within :data:`MAX_LIST_PAGES` pages and the byte cap; a merge a bound
  stopped keeps the ``nextCursor`` of the first page not merged, so the client may resume.
"""

from __future__ import annotations

import json
from typing import Any

from .methods import LIST_ITEMS

__all__ = ["MAX_LIST_PAGES", "ListMerge", "smoothed_request"]

#: The most pages of one list merged into one reply (``--merge-list-pages``), the first
#: page included; the bridge's own relisting after a header mismatch reads as many
#: (``bridge/core/policy.py``'s table of retries).
MAX_LIST_PAGES = 50


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


def _encoded_bytes(value: Any) -> int:
    """Bytes of ``value`` in a compact UTF-8 JSON line, as ``encode_message`` writes it
    (without the line end; counted here, not by calling it: ``jsonrpc`` imports this module)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: written escaped, as ASCII
        return len(json.dumps(value, ensure_ascii=True, separators=(",", ":")))
    return size + 3 * (text.count("\u2028") + text.count("\u2029"))  # (written as \u2028: 6 bytes, not 3)


class ListMerge:
    """The pages of one list, merged into the reply to the client's request
    (``--merge-list-pages``; the driver asks the app for each page, this class decides).

    Build one with :meth:`start` from the first page's reply. Then, while
    :attr:`next_cursor` is not ``None`` and :attr:`stopped` is, the driver asks the app for
    the page of that cursor and hands its reply to :meth:`add`, or calls :meth:`stop` when
    it could not get it (failed, timed out). :meth:`reply` is the reply to send.

    Attributes:
        method: the list method (a key of :data:`~bridge.core.methods.LIST_ITEMS`).
        pages: how many pages are merged (the first included).
        next_cursor: the cursor of the first page not merged (a string), or ``None``
            when the list is complete.
        stopped: why merging stopped before the list was complete (a log line's reason,
            never a value of the app's), or ``None``.
    """

    __slots__ = ("method", "pages", "next_cursor", "stopped", "_first", "_items", "_bytes", "_max_bytes", "_seen")

    def __init__(self, method: str, first: dict[str, Any], items: list[Any], cursor: str, *, max_message_bytes: int) -> None:
        self.method = method
        self.pages = 1
        self.next_cursor: str | None = cursor
        self.stopped: str | None = None
        self._first = first
        self._items = items
        self._max_bytes = max_message_bytes
        self._seen = {cursor}
        result = {key: value for key, value in first["result"].items() if key != "nextCursor"}
        # The reply's size without a nextCursor; each item merged adds its own bytes and a comma.
        self._bytes = _encoded_bytes({**first, "result": result}) + 1

    @classmethod
    def start(cls, method: str, first: Any, *, max_message_bytes: int) -> ListMerge | None:
        """A merge that begins with ``first`` (the app's parsed reply to the client's own
        request), or ``None`` when there is nothing to merge: ``method`` is not a list of
        :data:`~bridge.core.methods.LIST_ITEMS`, the reply is an error, or its result has no string
        ``nextCursor`` or no list. ``max_message_bytes``: the merged reply's cap (bytes,
        its line end included)."""
        member = LIST_ITEMS.get(method)
        result = first.get("result") if isinstance(first, dict) else None
        if member is None or not isinstance(result, dict):
            return None
        cursor, items = result.get("nextCursor"), result.get(member)
        if not isinstance(cursor, str) or not isinstance(items, list):
            return None
        return cls(method, first, list(items), cursor, max_message_bytes=max_message_bytes)

    def page_params(self, params: Any) -> dict[str, Any]:
        """The params of the request for the next page: the client's ``params`` with
        ``cursor`` set to :attr:`next_cursor`, and no ``_meta.progressToken`` (the
        client's token belongs to its own request; the app's progress for a private
        page would go backwards)."""
        page: dict[str, Any] = dict(params) if isinstance(params, dict) else {}
        meta = page.get("_meta")
        if isinstance(meta, dict) and "progressToken" in meta:
            page["_meta"] = {key: value for key, value in meta.items() if key != "progressToken"}
        page["cursor"] = self.next_cursor
        return page

    def add(self, reply: Any) -> None:
        """Merge the app's parsed ``reply`` to the page of :attr:`next_cursor`, or stop
        (:attr:`stopped` says why): the reply is an error or holds no list, the merged
        reply would pass the byte cap, the page repeats a cursor (merged, then stopped:
        the app would go round), or :data:`MAX_LIST_PAGES` pages are merged."""
        page = self.pages + 1
        member = LIST_ITEMS[self.method]
        result = reply.get("result") if isinstance(reply, dict) else None
        items = result.get(member) if isinstance(result, dict) else None
        if not isinstance(result, dict) or not isinstance(items, list):
            error = reply.get("error") if isinstance(reply, dict) else None
            code = error.get("code") if isinstance(error, dict) else None
            self.stop(f"the app answered page {page} with error {code}" if code is not None else f"page {page} holds no {member} list")
            return
        cursor = result.get("nextCursor")
        if cursor is not None and not isinstance(cursor, str):
            self.stop(f"page {page} has a nextCursor that is not a string")
            return
        added = sum(_encoded_bytes(item) + 1 for item in items)
        kept = _encoded_bytes(cursor) + len(',"nextCursor":') if cursor is not None else 0
        if self._bytes + added + kept > self._max_bytes:
            self.stop(f"page {page} would make the reply larger than {self._max_bytes} bytes (--max-message-bytes)")
            return
        self._items.extend(items)
        self._bytes += added
        self.pages = page
        self.next_cursor = cursor
        if cursor is None:
            return
        if cursor in self._seen:
            self.stop(f"page {page} returned a cursor the app had returned before")
        elif self.pages >= MAX_LIST_PAGES:
            self.stop(f"{MAX_LIST_PAGES} pages merged (the most the bridge reads)")
        self._seen.add(cursor)

    def stop(self, reason: str) -> None:
        """Stop merging: :meth:`reply` keeps :attr:`next_cursor` (``reason``: why, for the log)."""
        self.stopped = reason

    def reply(self) -> dict[str, Any]:
        """The reply to the client: the first page's, with the merged list, and
        ``nextCursor`` only when merging stopped before the list was complete."""
        result = {key: value for key, value in self._first["result"].items() if key != "nextCursor"}
        result[LIST_ITEMS[self.method]] = self._items
        if self.next_cursor is not None:
            result["nextCursor"] = self.next_cursor
        return {**self._first, "result": result}
