"""MCP 2026-07-28 ("modern", stateless) request headers, and the tool annotations they use.

Pure: imports only the standard library.

The bridge follows the client (SPEC-CHECKLIST item 74, DESIGN.md §2.12): a request whose
``params._meta["io.modelcontextprotocol/protocolVersion"]`` names a version is a modern
request, sent with the headers that revision requires (items 52, 68, 69):

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
``tools/list`` result the client sees (item 69): an annotation is valid only on a property
reached from the schema's root through ``properties`` alone, as a non-empty RFC 9110 token,
on a ``string``/``integer``/``boolean`` property, and unique (ignoring case) in the schema.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from typing import Any

from .config import HTTP_TOKEN

__all__ = [
    "PROTOCOL_VERSION_META_KEY",
    "HEADER_MISMATCH",
    "modern_version",
    "encode_header_value",
    "invalid_header_annotation",
    "header_annotations",
    "request_headers",
    "filter_tools",
]

#: The ``_meta`` key that names a request's protocol version in the modern era.
PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
#: 2026-07-28: the headers and the body disagree (the client should re-list and retry).
HEADER_MISMATCH = -32020

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


def modern_version(params: Any) -> str | None:
    """The protocol version a request's ``_meta`` names, or ``None`` for a legacy request."""
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
    return version if isinstance(version, str) and version else None


def encode_header_value(value: str) -> str:
    """Return ``value`` as an HTTP header value, base64-wrapped when it is not plain ASCII."""
    if _PLAIN.match(value) and value == value.strip() and not _WRAPPED.match(value):
        return value
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
