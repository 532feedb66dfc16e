"""Era translation, the pure part: a 2025-era client (``initialize``, an MCP session) with an
app that serves only MCP 2026-07-28 (stateless: ``server/discover``, per-request ``_meta``).

Pure: imports only the standard library. ``bridge/serve/modernapp.py`` performs it.

The client's ``initialize`` is answered from the app's ``server/discover`` (2026-07-28
schema, ``DiscoverRequest``), and every later request is sent as a 2026-07-28 request
(basic/index, "Per-request protocol fields"): its ``params._meta`` carries the protocol
version, the client's info and capabilities from its ``initialize``, and the log level it
set with ``logging/setLevel``.

What maps (legacy → 2026-07-28):

| legacy (≤ 2025-11-25)                       | 2026-07-28                                            |
|---------------------------------------------|-------------------------------------------------------|
| ``initialize``                              | ``server/discover`` (its result: :func:`initialize_result`) |
| ``initialize``'s clientInfo, capabilities   | every request's ``_meta`` (:func:`modern_params`)     |
| ``notifications/initialized``               | nothing (no session)                                  |
| ``logging/setLevel``                        | ``_meta`` ``io.modelcontextprotocol/logLevel`` on later requests; answered ``{}`` |
| ``ping``                                    | ``server/discover`` (2026-07-28 has no ``ping``); answered ``{}`` |
| ``resources/subscribe``, ``unsubscribe``    | ``subscriptions/listen`` ``resourceSubscriptions`` (:func:`listen_filter`) |
| GET stream's ``*/list_changed``, ``resources/updated`` | ``subscriptions/listen`` notifications (:func:`legacy_notification`) |
| server requests (elicitation, sampling, roots) on the request's stream | an ``input_required`` result (:func:`input_requests`), retried with ``inputResponses`` and ``requestState`` (:func:`retry_params`) |
| ``notifications/cancelled``                 | the request's HTTP exchange closed                    |
| ``tasks/*``, task-augmented requests        | none: a JSON-RPC error names what is missing (:func:`untranslated`) |

Result members only 2026-07-28 defines (``resultType``, ``ttlMs``, ``cacheScope``) are left
in the results a legacy client gets: the 2025-11-25 schema's ``Result`` allows additional
properties, so a conforming client ignores them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .era import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    SUBSCRIPTION_ID_META_KEY,
)
from .errors import METHOD_NOT_FOUND
from .legacymap import (
    MAX_INPUT_REQUESTS,
    input_request_problem,
)

__all__ = [
    "MODERN_PROTOCOL_VERSION",
    "HANDSHAKE_VERSIONS",
    "InputRound",
    "ClientContext",
    "discover_params",
    "speaks_modern",
    "initialize_result",
    "modern_params",
    "input_requests",
    "input_round_problem",
    "retry_params",
    "listen_filter",
    "legacy_notification",
    "untranslated",
]

#: The 2026-07-28 revision the bridge speaks to the app.
MODERN_PROTOCOL_VERSION = "2026-07-28"
#: The revisions of the ``initialize`` era a client may ask for (the answer keeps its choice).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
#: 2026-07-28 result types (``resultType``).
INPUT_REQUIRED = "input_required"
_LIST_CHANGED = {
    "tools": "toolsListChanged",
    "prompts": "promptsListChanged",
    "resources": "resourcesListChanged",
}
_RELAYED = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
        "notifications/message",
    }
)


class ClientContext(NamedTuple):
    """What a legacy client said once, in ``initialize``, and 2026-07-28 wants per request.

    Attributes:
        info: its ``clientInfo`` (``None`` when it sent none).
        capabilities: its ``capabilities`` (``{}`` when it sent none).
        log_level: the level it set with ``logging/setLevel``, or ``None`` (no log messages).
    """

    info: Any = None
    capabilities: Any = {}
    log_level: str | None = None

    @classmethod
    def from_initialize(cls, params: Any) -> ClientContext:
        """From an ``initialize`` request's params."""
        params = params if isinstance(params, dict) else {}
        capabilities = params.get("capabilities")
        return cls(params.get("clientInfo"), capabilities if isinstance(capabilities, dict) else {})

    def meta(self) -> dict[str, Any]:
        """The 2026-07-28 ``_meta`` keys of a request from this client."""
        meta: dict[str, Any] = {PROTOCOL_VERSION_META_KEY: MODERN_PROTOCOL_VERSION, CLIENT_CAPABILITIES_META_KEY: self.capabilities}
        if isinstance(self.info, dict):
            meta[CLIENT_INFO_META_KEY] = self.info
        if self.log_level is not None:
            meta[LOG_LEVEL_META_KEY] = self.log_level
        return meta


def discover_params(client: ClientContext) -> dict[str, Any]:
    """The ``server/discover`` params for a client (its ``_meta`` alone)."""
    return {"_meta": client.meta()}


def speaks_modern(reply: Any) -> dict[str, Any] | None:
    """The ``server/discover`` result when ``reply`` (parsed) is one that names
    2026-07-28 among its ``supportedVersions``, else ``None``."""
    result = reply.get("result") if isinstance(reply, dict) else None
    if not isinstance(result, dict):
        return None
    versions = result.get("supportedVersions")
    return result if isinstance(versions, list) and MODERN_PROTOCOL_VERSION in versions else None


def initialize_result(discover: dict[str, Any], asked_version: Any, app_name: str) -> dict[str, Any]:
    """The ``initialize`` result for a legacy client, from the app's ``server/discover``
    result: the version the client asked for when it is one of :data:`HANDSHAKE_VERSIONS`
    (else 2025-11-25), the app's capabilities and instructions, and its serverInfo from the
    result's ``_meta``, with ``app_name`` for a ``name`` and ``"unknown"`` for a ``version``
    it lacks (or that is not a string): the legacy schema's ``Implementation`` requires both."""
    version = asked_version if asked_version in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    meta = discover.get("_meta")
    info = meta.get(SERVER_INFO_META_KEY) if isinstance(meta, dict) else None
    capabilities = discover.get("capabilities")
    info = dict(info) if isinstance(info, dict) else {}
    for member, default in (("name", app_name), ("version", "unknown")):  # the two members Implementation requires
        if not isinstance(info.get(member), str):
            info[member] = default
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": capabilities if isinstance(capabilities, dict) else {},
        "serverInfo": info,
    }
    if isinstance(discover.get("instructions"), str):
        result["instructions"] = discover["instructions"]
    return result


def modern_params(params: Any, client: ClientContext) -> dict[str, Any]:
    """A legacy request's params as a 2026-07-28 request carries them: its own members and
    ``_meta`` keys (a ``progressToken``) kept, the era's keys added."""
    params = params if isinstance(params, dict) else {}
    own = params.get("_meta")
    return {**params, "_meta": {**(own if isinstance(own, dict) else {}), **client.meta()}}


class InputRound(NamedTuple):
    """One ``input_required`` result (2026-07-28, SEP-2322: multi round-trip requests):
    ``requests`` by the app's key, each ``{"method": …, "params": …}`` (elicitation,
    sampling or roots), and the opaque ``state`` to echo."""

    requests: dict[str, dict[str, Any]]
    state: Any


def input_requests(reply: Any) -> InputRound | None:
    """The :class:`InputRound` of a reply (parsed) whose result is ``input_required``, else
    ``None``."""
    result = reply.get("result") if isinstance(reply, dict) else None
    if not isinstance(result, dict) or result.get("resultType") != INPUT_REQUIRED:
        return None
    asked = result.get("inputRequests")
    requests = {
        key: value for key, value in (asked.items() if isinstance(asked, dict) else ()) if isinstance(value, dict) and isinstance(value.get("method"), str)
    }
    return InputRound(requests, result.get("requestState"))


def input_round_problem(reply: Any, capabilities: Any) -> str | None:
    """Why the ``input_required`` result in ``reply`` (parsed) may not be put to a legacy
    client that declared ``capabilities`` in its ``initialize``, or ``None`` when it may:
    ``inputRequests`` is an object of at most :data:`~bridge.core.legacymap.MAX_INPUT_REQUESTS`
    questions, each an object the client may be asked
    (:func:`~bridge.core.legacymap.input_request_problem`: elicitation, sampling or roots,
    each only with its capability, with the params its schema requires)."""
    result = reply.get("result") if isinstance(reply, dict) else None
    asked = result.get("inputRequests") if isinstance(result, dict) else None
    if asked is None:
        return None
    if not isinstance(asked, dict):
        return "its inputRequests is not an object"
    if len(asked) > MAX_INPUT_REQUESTS:
        return f"it asks {len(asked)} questions in one round; the bridge puts at most {MAX_INPUT_REQUESTS} to the client"
    for key, question in asked.items():
        problem = input_request_problem(question.get("method"), question.get("params"), capabilities) if isinstance(question, dict) else "it is not an object"
        if problem is not None:
            return f"question {str(key)[:64]!r}: {problem}"
    return None


def retry_params(params: Any, responses: dict[str, Any] | None, state: Any) -> dict[str, Any]:
    """The original request's params for its retry: ``inputResponses`` (the client's result
    for each key) and ``requestState`` echoed as the app sent it (both left out when absent)."""
    own = params if isinstance(params, dict) else {}
    retried: dict[str, Any] = {key: value for key, value in own.items() if key not in ("inputResponses", "requestState")}
    if responses:
        retried["inputResponses"] = responses
    if state is not None:
        retried["requestState"] = state
    return retried


def listen_filter(capabilities: Any, uris: list[str]) -> dict[str, Any]:
    """The ``subscriptions/listen`` ``notifications`` filter: each list whose capability
    says ``listChanged``, and the resources the client subscribed to. Empty: nothing to
    listen for."""
    capabilities = capabilities if isinstance(capabilities, dict) else {}
    wanted: dict[str, Any] = {}
    for name, key in _LIST_CHANGED.items():
        capability = capabilities.get(name)
        if isinstance(capability, dict) and capability.get("listChanged") is True:
            wanted[key] = True
    if uris:
        wanted["resourceSubscriptions"] = list(uris)
    return wanted


def legacy_notification(message: Any) -> dict[str, Any] | None:
    """A ``subscriptions/listen`` stream's notification as a legacy client gets it on the
    GET stream (without the stream's ``subscriptionId``), or ``None`` when it has no legacy
    form (the acknowledgement, anything else)."""
    if not isinstance(message, dict) or message.get("method") not in _RELAYED or "id" in message:
        return None
    params = message.get("params")
    if isinstance(params, dict) and isinstance(params.get("_meta"), dict):
        meta = {key: value for key, value in params["_meta"].items() if key != SUBSCRIPTION_ID_META_KEY}
        rest = {key: value for key, value in params.items() if key != "_meta"}
        params = {**rest, "_meta": meta} if meta else rest
    out = {"jsonrpc": "2.0", "method": message["method"]}
    if params:
        out["params"] = params
    return out


_NO_EQUIVALENT = {
    "tasks/get": "tasks",
    "tasks/result": "tasks",
    "tasks/list": "tasks",
    "tasks/cancel": "tasks",
}


def untranslated(method: str, params: Any) -> dict[str, Any] | None:
    """The JSON-RPC ``error`` for a legacy request that has no 2026-07-28 equivalent
    (naming what is missing), or ``None`` when it is translated."""
    missing = _NO_EQUIVALENT.get(method)
    if missing is None and isinstance(params, dict) and "task" in params:
        missing = "task-augmented requests"
    if missing is None:
        return None
    message = (
        f"{method} has no equivalent in MCP 2026-07-28, the only revision the app serves: "
        f"the bridge does not translate {missing} (2025-11-25) to it."
    )
    return {"code": METHOD_NOT_FOUND, "message": message, "data": {"source": "bridge", "missing": missing}}
