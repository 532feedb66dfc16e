"""The protocol era of one request, legacy or 2026-07-28, and the rules that follow from it.

Pure: imports only the standard library.

The era is decided once per request, when the request is classified
(:attr:`bridge.core.jsonrpc.Request.era`, from :func:`era_of`). Every layer then asks that
:class:`Era` object instead of looking at ``_meta`` itself:

| question (who asks)                                   | legacy (≤ 2025-11-25)      | 2026-07-28 (stateless)       |
|-------------------------------------------------------|----------------------------|------------------------------|
| ``headers(...)``: the era's request headers (driver)  | none: the MCP session's    | per request (below)          |
| ``may_rebuild``: rebuild a lost session? (driver)     | yes                        | no: there is no session      |
| ``resumable``: resume a broken SSE stream? (upstream) | yes, with event ids        | no (stateless)               |
| ``cancel_by_closing`` (session)                       | no: POST the notification  | yes: close the exchange     |
| ``sends_timeout_cancellation`` (session)              | yes                        | no: the closed stream says it |
| ``relists_on_mismatch(method)`` (driver)              | never                      | ``tools/call``               |
| ``filters_tool_list(method)`` (driver)                | never                      | ``tools/list``               |
| ``endless(method)``: no read timeout (driver)         | never                      | ``subscriptions/listen``     |

Why an object and not a flag: the era was once parsed again in the session, the driver
and the upstream, and a mutable "the client is modern" flag was read across modules; a
value decided at classification cannot disagree with itself, and the table above is the
one place its consequences are written down.

The bridge follows the client (docs/behaviour.md, "Protocol eras"): a request whose
``params._meta["io.modelcontextprotocol/protocolVersion"]`` names a version is a modern
request, sent with the headers that revision requires (its basic/transports):

- ``MCP-Protocol-Version``: the version in the body's ``_meta``;
- ``Mcp-Method``: the JSON-RPC method;
- ``Mcp-Name``: ``params.name`` for ``tools/call`` and ``prompts/get``, ``params.uri`` for
  ``resources/read``;
- ``Mcp-Param-<Token>``: for ``tools/call``, each argument whose property in the tool's
  ``inputSchema`` carries ``"x-mcp-header": "<Token>"`` (strings as they are, integers in
  decimal, booleans as ``true``/``false``; a null or missing value sends no header);
- a value that is not plain, header-safe ASCII (control or non-ASCII characters, white
  space at either end, or something that already looks like the wrapper) is sent as
  ``=?base64?<base64 of its UTF-8>?=``.

A tool whose ``x-mcp-header`` annotations are invalid must be removed from the
``tools/list`` result the client sees (2026-07-28, ``x-mcp-header``): an annotation is valid only on a property
reached from the schema's root through ``properties`` alone, as a non-empty RFC 9110 token,
on a ``string``/``integer``/``boolean`` property, and unique (ignoring case) in the schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from .config import HTTP_TOKEN

__all__ = [
    "PROTOCOL_VERSION_META_KEY",
    "CLIENT_INFO_META_KEY",
    "CLIENT_CAPABILITIES_META_KEY",
    "LOG_LEVEL_META_KEY",
    "SUBSCRIPTION_ID_META_KEY",
    "SERVER_INFO_META_KEY",
    "HEADER_MISMATCH",
    "CANCEL_NOTICE_SECONDS",
    "Era",
    "LEGACY",
    "era_of",
    "is_header_mismatch",
    "encode_header_value",
    "invalid_header_annotation",
    "header_annotations",
    "request_headers",
    "filter_tools",
]

#: The ``_meta`` key that names a request's protocol version in the modern era.
PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
#: 2026-07-28 request ``_meta`` keys (per request, where a session once kept them).
CLIENT_INFO_META_KEY = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_META_KEY = "io.modelcontextprotocol/clientCapabilities"
#: 2026-07-28 request ``_meta`` key: the request's log level (absent: no log messages for it;
#: replaces ``logging/setLevel``).
LOG_LEVEL_META_KEY = "io.modelcontextprotocol/logLevel"
#: 2026-07-28: the ``_meta`` key on every frame of a ``subscriptions/listen`` stream (the
#: listen request's id).
SUBSCRIPTION_ID_META_KEY = "io.modelcontextprotocol/subscriptionId"
#: 2026-07-28 result ``_meta`` key: the server's ``Implementation``.
SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"
#: 2026-07-28: the headers and the body disagree (the client should re-list and retry).
HEADER_MISMATCH = -32020
#: Before 2026-07-28 (the era that POSTs ``notifications/cancelled``: :attr:`Era.cancel_by_closing`
#: false), how long that POST may take, in seconds: the client's cancellation
#: (``bridge/serve/dispatch.py``) and a translated request's (``bridge/serve/legacyapp.py``).
CANCEL_NOTICE_SECONDS = 1.0

_NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_TOKEN = HTTP_TOKEN
_PLAIN = re.compile(r"^[\x20-\x7e]*$")
_WRAPPED = re.compile(r"^=\?base64\?.*\?=$")
_ANNOTATION = "x-mcp-header"
_HEADER_TYPES = frozenset({"string", "integer", "boolean"})
# JSON Schema keywords whose values are schemas: crossing one leaves the `properties` chain.
_ONE_SCHEMA = frozenset(
    {"items", "contains", "additionalProperties", "propertyNames", "unevaluatedItems", "unevaluatedProperties",
     "not", "if", "then", "else", "contentSchema"}
)
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_MAPS = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})

#: A property path (the ``properties`` keys from the root) → its header token.
HeaderMap = dict[tuple[str, ...], str]


class Era(NamedTuple):
    """The rules of one request's era (see the module's table).

    Attributes:
        version: the protocol version the request's ``_meta`` names (2026-07-28 and
            later: stateless), or ``None`` for a legacy request (the MCP session's version
            applies).
    """

    version: str | None = None

    @property
    def stateless(self) -> bool:
        """Whether this is a 2026-07-28 request: no MCP session, headers per request."""
        return self.version is not None

    @property
    def may_rebuild(self) -> bool:
        """Whether a lost MCP session may be rebuilt for this request (there is none to
        rebuild in the stateless era: a 404 there is the app's answer)."""
        return self.version is None

    @property
    def resumable(self) -> bool:
        """Whether a broken SSE response stream may be resumed with ``Last-Event-ID``
        (MCP basic/transports, "Resumability": not in the stateless era)."""
        return self.version is None

    @property
    def cancel_by_closing(self) -> bool:
        """Whether the client's ``notifications/cancelled`` is carried out by closing the
        request's HTTP exchange, never POSTed (2026-07-28), rather than forwarded (earlier revisions)."""
        return self.version is not None

    @property
    def sends_timeout_cancellation(self) -> bool:
        """Whether the bridge, giving up on a request after its timeout, tells the app with
        ``notifications/cancelled``; in the stateless era the closed stream says it."""
        return self.version is None

    def relists_on_mismatch(self, method: str) -> bool:
        """Whether a header-mismatch reply (-32020) to ``method`` is recovered by listing
        the tools again and sending once more."""
        return self.version is not None and method == "tools/call"

    def filters_tool_list(self, method: str) -> bool:
        """Whether the reply to ``method`` is a tool list to filter."""
        return self.version is not None and method == "tools/list"

    def endless(self, method: str) -> bool:
        """Whether ``method``'s reply stream has no read timeout (``subscriptions/listen``
        stays open for as long as the client listens)."""
        return self.version is not None and method == "subscriptions/listen"

    def headers(self, method: str, params: Any, tools: Mapping[str, HeaderMap]) -> dict[str, str] | None:
        """The era's headers for one request: ``None`` for a legacy request (the MCP
        session's id and version go instead), else :func:`request_headers`."""
        if self.version is None:
            return None
        return request_headers(method, params, self.version, tools)


#: The era of every request that names no version in its ``_meta``.
LEGACY = Era()


def era_of(params: Any) -> Era:
    """The era a request's ``params`` ask for: a version named by
    ``_meta["io.modelcontextprotocol/protocolVersion"]`` (a non-empty string), else :data:`LEGACY`."""
    if not isinstance(params, dict):
        return LEGACY
    meta = params.get("_meta")
    version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
    return Era(version) if isinstance(version, str) and version else LEGACY


def is_header_mismatch(line: bytes) -> bool:
    """Whether a reply line is the error -32020 (read only when it may be: cheap test first)."""
    if b"-32020" not in line:
        return False
    reply = json.loads(line)
    error = reply.get("error") if isinstance(reply, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return isinstance(code, int) and code == HEADER_MISMATCH


def encode_header_value(value: str) -> str:
    """Return ``value`` as an HTTP header value, base64-wrapped when it is not plain ASCII."""
    if _PLAIN.match(value) and value == value.strip() and not _WRAPPED.match(value):
        return value
    import base64  # (only a value that is not plain ASCII: not on every start)

    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def _positions(schema: Any) -> Iterator[tuple[tuple[str, ...] | None, dict[str, Any]]]:
    """Every schema position with its ``properties`` path (``None`` once off that chain)."""
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield path, node
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, dict):
                stack.extend(((*path, name) if path is not None else None, sub) for name, sub in value.items())
            elif keyword in _ONE_SCHEMA:
                stack.append((None, value))
            elif keyword in _SCHEMA_LISTS and isinstance(value, list):
                stack.extend((None, sub) for sub in value)
            elif keyword in _SCHEMA_MAPS and isinstance(value, dict):
                stack.extend((None, sub) for sub in value.values())


def invalid_header_annotation(input_schema: Any) -> str | None:
    """Why the schema's ``x-mcp-header`` annotations are invalid, or ``None`` if they are fine."""
    seen: dict[str, str] = {}
    for path, node in _positions(input_schema):
        if _ANNOTATION not in node:
            continue
        if not path:
            return "an x-mcp-header annotation is not on a property reached through `properties` alone"
        where = ".".join(path)
        token = node[_ANNOTATION]
        if not isinstance(token, str) or not _TOKEN.match(token):
            return f"the x-mcp-header of {where!r} is not an HTTP header name"
        if node.get("type") not in _HEADER_TYPES:
            return f"the x-mcp-header of {where!r} is on a property that is not string, integer or boolean"
        if token.lower() in seen:
            return f"the x-mcp-header {token!r} of {where!r} repeats that of {seen[token.lower()]!r}"
        seen[token.lower()] = where
    return None


def header_annotations(input_schema: Any) -> HeaderMap:
    """The header token of each annotated property (call on a schema found valid)."""
    return {
        path: node[_ANNOTATION]
        for path, node in _positions(input_schema)
        if path and isinstance(node.get(_ANNOTATION), str)
    }


def _render(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int)):
        return str(value)
    return None  # null, numbers with a fraction, arrays, objects: no header


def _value_at(arguments: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(arguments, Mapping):
            return None
        arguments = arguments.get(key)
    return arguments


def request_headers(method: str, params: Any, version: str, tools: Mapping[str, HeaderMap]) -> dict[str, str]:
    """The modern-era headers for one request.

    Args:
        method: the JSON-RPC method.
        params: the request's params (already known to carry ``version`` in ``_meta``).
        version: the protocol version from ``_meta``.
        tools: each listed tool's header annotations (from earlier ``tools/list`` results).
    """
    headers = {"MCP-Protocol-Version": version, "Mcp-Method": method}
    key = _NAME_PARAM.get(method)
    if key is not None and isinstance(params, dict) and isinstance(params.get(key), str):
        headers["Mcp-Name"] = encode_header_value(params[key])
    if method == "tools/call" and isinstance(params, dict):
        name = params.get("name")
        annotations = tools.get(name, {}) if isinstance(name, str) else {}
        for path, token in annotations.items():
            rendered = _render(_value_at(params.get("arguments") or {}, path))
            if rendered is not None:
                headers[f"Mcp-Param-{token}"] = encode_header_value(rendered)
    return headers


def filter_tools(result: Any, tools: dict[str, HeaderMap]) -> tuple[Any, list[tuple[str, str]]]:
    """Remember the header annotations of each listed tool and drop invalid ones.

    Args:
        result: a ``tools/list`` result (``{"tools": [...], ...}``).
        tools: the cache to update, by tool name.

    Returns:
        ``(result, dropped)``: the same ``result`` object when nothing was dropped, else a
        copy without the dropped tools; ``dropped`` lists ``(tool name, reason)``.
    """
    if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
        return result, []
    kept: list[Any] = []
    dropped: list[tuple[str, str]] = []
    for tool in result["tools"]:
        name = tool.get("name") if isinstance(tool, dict) else None
        schema = tool.get("inputSchema") if isinstance(tool, dict) else None
        reason = invalid_header_annotation(schema)
        if reason is not None:
            dropped.append((str(name), reason))
            if isinstance(name, str):
                tools.pop(name, None)
            continue
        if isinstance(name, str):
            tools[name] = header_annotations(schema)
        kept.append(tool)
    if not dropped:
        return result, []
    return {**result, "tools": kept}, dropped
