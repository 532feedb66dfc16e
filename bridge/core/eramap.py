"""Era translation, the pure part: a 2026-07-28 client with an app that speaks only a
legacy revision (2025-11-25 and earlier: ``initialize`` and an MCP session).

Pure: imports only the standard library. ``bridge/serve/eras.py`` performs it.

The client probes with ``server/discover``. An app of the legacy era refuses it: with
-32601 (Method not found), with the "missing session" error a stateful server gives any
request without a session id, or with an HTTP 4xx. Any refusal but -32022 (Unsupported
protocol version, which names modern versions: the app is modern) is that verdict
(:func:`is_legacy_refusal`), as the official Python SDK's ``auto`` client decides it.
The bridge then opens a legacy session itself (:func:`initialize_params`), answers the probe
from the ``initialize`` result (:func:`discover_result`), and sends the client's later
requests within that session, without the era's ``_meta`` keys (:func:`legacy_params`).

What maps (2026-07-28 → legacy):

| 2026-07-28                                     | legacy                                         |
|------------------------------------------------|------------------------------------------------|
| ``server/discover``                            | ``initialize`` (once), its result              |
| ``_meta`` clientInfo, clientCapabilities       | ``initialize``'s ``clientInfo``, ``capabilities`` |
| ``_meta`` protocolVersion, logLevel            | dropped (the session's version applies)        |
| result ``_meta`` serverInfo                    | ``initialize``'s ``serverInfo``                |
| result ``resultType``                          | ``"complete"`` (a legacy result always is)     |
| list and read results' ``ttlMs``, ``cacheScope`` | ``0`` and ``"private"`` (legacy says nothing of caching) |
| any other request                              | the same request, within the session           |
| ``subscriptions/listen``                       | none yet: a JSON-RPC error names what is missing |
"""

from __future__ import annotations

from typing import Any

from .era import PROTOCOL_VERSION_META_KEY

__all__ = [
    "LEGACY_PROTOCOL_VERSION",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "METHOD_NOT_FOUND",
    "CLIENT_INFO_META_KEY",
    "CLIENT_CAPABILITIES_META_KEY",
    "SERVER_INFO_META_KEY",
    "is_legacy_refusal",
    "initialize_params",
    "discover_result",
    "legacy_params",
    "modern_result",
    "untranslated",
]

#: The revision the bridge asks a legacy app for (the app may answer an older one).
LEGACY_PROTOCOL_VERSION = "2025-11-25"
#: 2026-07-28: the app supports none of the versions asked for (its ``data.supported`` names them).
UNSUPPORTED_PROTOCOL_VERSION = -32022
#: JSON-RPC 2.0: the method does not exist / is not available.
METHOD_NOT_FOUND = -32601
#: 2026-07-28 request ``_meta`` keys (per request, where a session once kept them).
CLIENT_INFO_META_KEY = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_META_KEY = "io.modelcontextprotocol/clientCapabilities"
_LOG_LEVEL_META_KEY = "io.modelcontextprotocol/logLevel"
#: 2026-07-28 result ``_meta`` key: the server's ``Implementation``.
SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"
_ERA_META_KEYS = frozenset({PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY, _LOG_LEVEL_META_KEY})

#: 2026-07-28 methods with no legacy equivalent the bridge maps yet, and what is missing.
_UNTRANSLATED = {
    "subscriptions/listen": (
        "the bridge does not yet turn the legacy session's GET stream and resources/subscribe "
        "into a subscriptions/listen stream"
    ),
}


def is_legacy_refusal(reply: Any) -> bool:
    """Whether a reply to ``server/discover`` says the app is of the legacy era: a JSON-RPC
    error other than -32022 (``reply``: the parsed reply)."""
    if not isinstance(reply, dict):
        return False
    error = reply.get("error")
    return isinstance(error, dict) and error.get("code") != UNSUPPORTED_PROTOCOL_VERSION


def _meta_of(params: Any) -> dict[str, Any]:
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else {}


def initialize_params(discover_params: Any, bridge_version: str) -> dict[str, Any]:
    """The ``initialize`` params that open a legacy session for a 2026-07-28 client, from
    its ``server/discover`` params: its ``_meta`` clientInfo and clientCapabilities (the
    bridge's own name and no capabilities when it sent none)."""
    meta = _meta_of(discover_params)
    info = meta.get(CLIENT_INFO_META_KEY)
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY)
    return {
        "protocolVersion": LEGACY_PROTOCOL_VERSION,
        "capabilities": capabilities if isinstance(capabilities, dict) else {},
        "clientInfo": info if isinstance(info, dict) else {"name": "mcp-app-bridge", "version": bridge_version},
    }


#: 2026-07-28 results that carry caching advice (``ttlMs``, ``cacheScope``): the lists,
#: ``resources/read`` and ``server/discover``.
_CACHEABLE = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read", "server/discover"})


def modern_result(method: str, result: dict[str, Any]) -> dict[str, Any]:
    """A legacy app's result to ``method`` as a 2026-07-28 result must be: ``resultType``
    ``"complete"``, and for a cacheable result ``ttlMs`` 0 and ``cacheScope`` ``"private"``
    (do not cache: the legacy app gave no advice), each only where the app set none."""
    added: dict[str, Any] = {"resultType": "complete"}
    if method in _CACHEABLE:
        added.update(ttlMs=0, cacheScope="private")
    return {**added, **result}


def discover_result(initialize_result: dict[str, Any], version: str) -> dict[str, Any]:
    """The ``server/discover`` result for a client asking for ``version``, from a legacy
    app's ``initialize`` result: its capabilities, instructions and serverInfo (in ``_meta``)."""
    result: dict[str, Any] = modern_result("server/discover", {
        "supportedVersions": [version],
        "capabilities": initialize_result.get("capabilities") or {},
    })
    if isinstance(initialize_result.get("instructions"), str):
        result["instructions"] = initialize_result["instructions"]
    if isinstance(initialize_result.get("serverInfo"), dict):
        result["_meta"] = {SERVER_INFO_META_KEY: initialize_result["serverInfo"]}
    return result


def legacy_params(params: Any) -> Any:
    """A 2026-07-28 request's params as the legacy session's request carries them: without
    the era's ``_meta`` keys (``_meta`` dropped when nothing else is left in it, such as a
    ``progressToken``)."""
    if not isinstance(params, dict) or not isinstance(params.get("_meta"), dict):
        return params
    meta = {key: value for key, value in params["_meta"].items() if key not in _ERA_META_KEYS}
    rest = {key: value for key, value in params.items() if key != "_meta"}
    return {**rest, "_meta": meta} if meta else rest


def untranslated(method: str, app_version: str | None) -> dict[str, Any] | None:
    """The JSON-RPC ``error`` for a 2026-07-28 method that has no legacy equivalent yet
    (naming what is missing), or ``None`` when the method is sent within the session."""
    missing = _UNTRANSLATED.get(method)
    if missing is None:
        return None
    message = (
        f"{method} has no equivalent in the app's protocol version {app_version or 'before 2026-07-28'} "
        f"(it speaks only the initialize/session era): {missing}."
    )
    return {"code": METHOD_NOT_FOUND, "message": message, "data": {"source": "bridge", "missing": method}}
