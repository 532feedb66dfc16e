"""Era translation, the pure part: a 2026-07-28 client with an app that speaks only a
legacy revision (2025-11-25 and earlier: ``initialize`` and an MCP session).

Pure: imports only the standard library. ``bridge/serve/legacyapp.py`` performs it.

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
| ``_meta`` protocolVersion                      | dropped (the session's version applies)        |
| ``_meta`` logLevel                             | ``logging/setLevel`` when it changes; the request's ``notifications/message`` below it dropped (:func:`log_level_of`, :func:`log_admitted`) |
| result ``_meta`` serverInfo                    | ``initialize``'s ``serverInfo``                |
| result ``resultType``                          | ``"complete"`` (a legacy result always is)     |
| list and read results' ``ttlMs``, ``cacheScope`` | ``0`` and ``"private"`` (legacy says nothing of caching) |
| ``subscriptions/listen``                       | the session's GET stream, ``resources/subscribe`` per URI; its ``notifications/*/list_changed`` and ``notifications/resources/updated`` stamped with the listen id (:func:`honored_filter`, :func:`listen_event`) |
| ``input_required`` result, ``inputResponses``, ``requestState`` | the app's ``elicitation/create``, ``sampling/createMessage``, ``roots/list`` requests and the responses to them (:func:`input_required_result`, :func:`retry_of`) |
| cancellation (the exchange closed)             | ``notifications/cancelled`` with the legacy request id (:func:`cancelled_notification`) |
| any other request                              | the same request, within the session           |
"""

from __future__ import annotations

from typing import Any

from .era import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    SUBSCRIPTION_ID_META_KEY,
)
from .errors import METHOD_NOT_FOUND
from .methods import CACHEABLE_METHODS, LISTS_THAT_CHANGE

__all__ = [
    "LEGACY_PROTOCOL_VERSION",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "is_legacy_refusal",
    "initialize_params",
    "discover_result",
    "legacy_params",
    "modern_result",
    "legacy_result",
    "MODERN_RESULT_MEMBERS",
    "INPUT_REQUEST_METHODS",
    "INPUT_CAPABILITIES",
    "MAX_INPUT_REQUESTS",
    "input_request_problem",
    "capabilities_of",
    "log_level_of",
    "log_admitted",
    "input_required_result",
    "retry_of",
    "without_retry",
    "unmapped_server_request",
    "cancelled_notification",
    "honored_filter",
    "listen_acknowledged",
    "listen_event",
    "listen_lost",
]

#: The revision the bridge asks a legacy app for (the app may answer an older one).
LEGACY_PROTOCOL_VERSION = "2025-11-25"
#: 2026-07-28: the app supports none of the versions asked for (its ``data.supported`` names them).
UNSUPPORTED_PROTOCOL_VERSION = -32022
_ERA_META_KEYS = frozenset({PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY})

#: The server→client requests a 2026-07-28 ``input_required`` result carries (its ``InputRequest``).
INPUT_REQUEST_METHODS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
#: The client capability each of them needs (MCP client features: a server sends these
#: only to a client that declared the capability; MCP 2025-11-25 client/elicitation,
#: client/sampling, client/roots).
INPUT_CAPABILITIES = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
#: The most questions (requests for input) one round may put to the client; the app's
#: further ones in that round are refused.
MAX_INPUT_REQUESTS = 16
#: Each one's params members the schema requires, with their JSON type.
_INPUT_REQUIRED_PARAMS: dict[str, tuple[tuple[str, type | tuple[type, ...]], ...]] = {
    "elicitation/create": (("message", str),),
    "sampling/createMessage": (("messages", list), ("maxTokens", int)),
    "roots/list": (),
}
#: RFC 5424 severities, the order of MCP's ``LoggingLevel``.
_LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_LISTS = tuple((f"{name}ListChanged", name) for name in LISTS_THAT_CHANGE)
_LIST_CHANGED = {f"notifications/{name}/list_changed": key for key, name in _LISTS}


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


def modern_result(method: str, result: dict[str, Any]) -> dict[str, Any]:
    """A legacy app's result to ``method`` as a 2026-07-28 result must be: ``resultType``
    ``"complete"``, and for a cacheable result ``ttlMs`` 0 and ``cacheScope`` ``"private"``
    (do not cache: the legacy app gave no advice), each only where the app set none."""
    added: dict[str, Any] = {"resultType": "complete"}
    if method in CACHEABLE_METHODS:
        added.update(ttlMs=0, cacheScope="private")
    return {**added, **result}


#: The members a 2026-07-28 result carries that the 2025-era schemas do not define.
MODERN_RESULT_MEMBERS = ("resultType", "ttlMs", "cacheScope")


def legacy_result(result: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 result as a 2025-era client gets it from a legacy app: without
    :data:`MODERN_RESULT_MEMBERS` (the inverse of :func:`modern_result`). A new object."""
    return {key: value for key, value in result.items() if key not in MODERN_RESULT_MEMBERS}


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


def capabilities_of(params: Any) -> dict[str, Any]:
    """A 2026-07-28 request's client capabilities (``_meta``
    ``io.modelcontextprotocol/clientCapabilities``; ``{}`` when it sends none)."""
    capabilities = _meta_of(params).get(CLIENT_CAPABILITIES_META_KEY)
    return capabilities if isinstance(capabilities, dict) else {}


def input_request_problem(method: Any, params: Any, capabilities: Any) -> str | None:
    """Why a request for input from the app (``method``, ``params``) may not be put to a
    client that declared ``capabilities``, or ``None`` when it may: only
    :data:`INPUT_REQUEST_METHODS`, each only when the client declared its capability
    (:data:`INPUT_CAPABILITIES`), with the params members its schema requires
    (``ElicitRequestParams.message``; ``CreateMessageRequestParams.messages``,
    ``maxTokens``)."""
    if method not in INPUT_CAPABILITIES:
        shown = method if isinstance(method, str) else "a request without a method name"
        return f"{shown} is not a request for input (only {', '.join(sorted(INPUT_CAPABILITIES))} are)"
    capability = INPUT_CAPABILITIES[method]
    if not isinstance(capabilities, dict) or not isinstance(capabilities.get(capability), dict):
        return f"the client did not declare the {capability} capability {method} needs"
    if params is not None and not isinstance(params, dict):
        return f"its {method} has params that are not an object"
    for member, kind in _INPUT_REQUIRED_PARAMS[method]:
        value = (params or {}).get(member)
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"its {method} lacks params.{member} (or it is not of the schema's type)"
    return None


def log_level_of(params: Any) -> str | None:
    """A 2026-07-28 request's log level (``_meta`` ``io.modelcontextprotocol/logLevel``),
    or ``None`` when it names none (or one MCP does not define)."""
    level = _meta_of(params).get(LOG_LEVEL_META_KEY)
    return level if level in _LOG_LEVELS else None


def log_admitted(message: Any, level: str | None) -> bool:
    """Whether a message on a translated request's stream reaches a client that asked for
    ``level`` (2026-07-28: without a level, no ``notifications/message`` for that request;
    with one, only those at that severity or above). Any other message is admitted."""
    if not isinstance(message, dict) or message.get("method") != "notifications/message":
        return True
    if level is None:
        return False
    params = message.get("params")
    severity = params.get("level") if isinstance(params, dict) else None
    if severity not in _LOG_LEVELS:
        return True  # not ours to judge: the client's parser decides
    return _LOG_LEVELS.index(severity) >= _LOG_LEVELS.index(level)


def input_required_result(requests: dict[str, Any], state: str) -> dict[str, Any]:
    """The 2026-07-28 ``input_required`` result that asks the client for ``requests`` (a key
    → the app's server→client request, as it sent it) and to retry with ``state``: each
    ``InputRequest`` is the request's ``method`` and ``params``, without its JSON-RPC id."""
    asked: dict[str, Any] = {}
    for key, message in requests.items():
        item: dict[str, Any] = {"method": message["method"]}
        if message.get("params") is not None:
            item["params"] = message["params"]
        asked[key] = item
    return {"resultType": "input_required", "inputRequests": asked, "requestState": state}


def retry_of(params: Any) -> tuple[str, dict[str, Any]] | None:
    """A retried 2026-07-28 request's ``(requestState, inputResponses)`` (responses ``{}``
    when it sent none), or ``None`` for a first request."""
    if not isinstance(params, dict) or not isinstance(params.get("requestState"), str):
        return None
    responses = params.get("inputResponses")
    return params["requestState"], responses if isinstance(responses, dict) else {}


def without_retry(params: Any) -> Any:
    """``params`` without ``inputResponses`` and ``requestState`` (a legacy app knows neither)."""
    if not isinstance(params, dict) or not ({"inputResponses", "requestState"} & params.keys()):
        return params
    return {key: value for key, value in params.items() if key not in ("inputResponses", "requestState")}


def unmapped_server_request(method: str, why: str) -> dict[str, Any]:
    """The JSON-RPC ``error`` the bridge answers a legacy app's server→client request with
    when a 2026-07-28 client cannot be asked it (``why`` says what is missing)."""
    return {
        "code": METHOD_NOT_FOUND,
        "message": f"mcp-app-bridge cannot pass {method} to its client, which speaks MCP 2026-07-28: {why}.",
        "data": {"source": "bridge", "missing": method},
    }


def cancelled_notification(request_id: Any, reason: str) -> dict[str, Any]:
    """The legacy ``notifications/cancelled`` for the request of ``request_id`` (MCP
    2025-11-25, basic/utilities/cancellation)."""
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id, "reason": reason}}


def honored_filter(requested: Any, capabilities: dict[str, Any], subscribed: list[str]) -> dict[str, Any]:
    """The part of a ``subscriptions/listen`` filter the bridge delivers for a legacy app:
    a list's ``list_changed`` when the app's ``capabilities`` declare that list (whether
    it ever changes is the app's to say: the official SDK's server declares
    ``listChanged: false`` by default and still sends it), and the resource URIs the app accepted
    ``resources/subscribe`` for (``subscribed``). Kinds not honored are left out
    (2026-07-28: the acknowledgment names only what is)."""
    honored: dict[str, Any] = {}
    wanted = requested if isinstance(requested, dict) else {}
    for key, name in _LISTS:
        if wanted.get(key) is True and isinstance(capabilities.get(name), dict):
            honored[key] = True
    if subscribed:
        honored["resourceSubscriptions"] = list(subscribed)
    return honored


def listen_acknowledged(listen_id: Any, honored: dict[str, Any]) -> dict[str, Any]:
    """The ``notifications/subscriptions/acknowledged`` that opens a listen stream."""
    params = {"notifications": honored, "_meta": {SUBSCRIPTION_ID_META_KEY: listen_id}}
    return {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": params}


def listen_event(message: Any, listen_id: Any, honored: dict[str, Any]) -> dict[str, Any] | None:
    """A legacy app's change notification as the event of the listen stream ``listen_id``
    (its ``_meta`` stamped with that id), or ``None`` when ``honored`` does not cover it or
    it is no change notification. A ``notifications/resources/updated`` is covered when its
    URI is one subscribed to, or lies under one (a sub-resource, as 2026-07-28 allows)."""
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    method = message["method"]
    params = message.get("params")
    if not isinstance(params, dict):
        params = {}
    if method in _LIST_CHANGED:
        if honored.get(_LIST_CHANGED[method]) is not True:
            return None
        extra: dict[str, Any] = {}
    elif method == "notifications/resources/updated":
        uri = params.get("uri")
        subscribed = honored.get("resourceSubscriptions") or []
        if not isinstance(uri, str) or not any(uri == s or uri.startswith(s.rstrip("/") + "/") for s in subscribed):
            return None
        extra = {"uri": uri}
    else:
        return None
    meta = {**_meta_of(params), SUBSCRIPTION_ID_META_KEY: listen_id}
    return {"jsonrpc": "2.0", "method": method, "params": {**extra, "_meta": meta}}


def listen_lost(app_version: str | None) -> str:
    """The message of the error that ends a translated listen stream when the app's session
    or its GET stream is gone (the client listens again and reads again what it needs)."""
    return (
        f"the legacy app's event stream (its MCP session's GET stream, protocol version "
        f"{app_version or 'before 2026-07-28'}) ended or its session was lost; listen again"
    )
