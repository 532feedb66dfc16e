"""Lazy launch: which requests a cached catalog answers while the app is down, and what it holds.

Pure: imports only the standard library, the era mappings (``bridge/core/legacymap.py``, ``modernmap.py``) and the list members (``bridge/core/quirks.py``). The driver (``bridge/serve/driver.py``) asks this
module; the catalog file itself is ``bridge/app/servedcatalog.py`` (docs/behaviour.md,
"Lazy launch"; docs/discovery.md, "The catalog").

AI clients start their servers far more often than users call tools: at every start, for
``claude mcp list``, for an era probe. With ``--launch`` each start would start the user's
desktop app. Under the ``on-call`` launch policy, when the app is down (a request's
connection was refused, the moment the recovery policy would start it) and the bridge has a
catalog of what the app last served, these requests are answered from it instead:

| request                                   | answered from the catalog when                                 |
|-------------------------------------------|----------------------------------------------------------------|
| ``initialize``                            | the catalog knows what the app answers the version asked for    |
|                                           | (:func:`catalog_result`: negotiated as the app would)            |
| ``server/discover`` (2026-07-28)          | the catalog holds a ``server/discover`` result (or, for an app  |
|                                           | marked ``refusesDiscover``, the refusal: :func:`discover_refusal`) |
| ``tools/list``, ``prompts/list``,         | the catalog holds that list, and the request asks for no         |
| ``resources/list``,                       | ``cursor`` (only a whole list is kept: one the app served in one |
| ``resources/templates/list``              | page, or whose pages ``--merge-list-pages`` merged into one)     |
| ``ping``                                  | the catalog exists (``{}``)                                     |
| a list whose capability the app does not  | the app refused it (its JSON-RPC error, kept in ``refusedLists``) |
| declare (``resources/list`` of an app     | while its cached ``initialize`` (or ``server/discover``) result   |
| that serves tools only)                   | declares no such capability: that error again                   |

Anything else needs the app: the first such request starts it (single-flight across
bridges, ``bridge/app/launcher.py``), the client's own ``initialize`` is replayed to open the
real MCP session, and the request is forwarded. The lists the client was served are then
listed again; each that differs is announced with its ``notifications/*/list_changed``.

A catalog entry is a JSON object (no token, no header, nothing but what the app served):
``{"format": 1, "app": <name>, "endpoint": <URL or discovery file path>, "savedAtSeconds":
<Unix time>, "initialize": <result> | null, "discover": <result> | null, "lists": {<method>:
<result>}}``, and optionally ``"initializeByVersion": {<version asked>: <result>}``,
``"refusedLists": {<method>: {"code": <int>, "message": <str>}}`` (the app's error for a list
whose capability it does not declare: Codex asks ``resources/list`` at every start),
``"refusesInitialize": true`` (the app serves 2026-07-28 only: a 2025-era client is answered
from ``discover``, translated, ``bridge/serve/modernapp.py``) and ``"refusesDiscover": true |
<the app's error>`` (the app serves the 2025 era only).
"""

from __future__ import annotations

from typing import Any

from .era import SERVER_INFO_META_KEY
from .legacymap import honored_filter, legacy_result, listen_acknowledged, modern_result
from .methods import CATALOG_METHODS, LIST_CAPABILITY, LIST_CHANGED, LIST_ITEMS
from .modernmap import HANDSHAKE_VERSIONS

__all__ = [
    "CATALOG_FORMAT",
    "answers_from_catalog",
    "catalog_result",
    "listen_acknowledgment",
    "catalog_answer",
    "list_refusal",
    "record_refusal",
    "why_not_answered",
    "refuses",
    "discover_refusal",
    "mark",
    "REFUSAL_MARKS",
    "record",
    "changed_list_notifications",
    "app_version",
    "valid_entry",
]

#: The ``format`` of the entries this version writes and reads.
CATALOG_FORMAT = 1


def answers_from_catalog(policy: str, method: str) -> bool:
    """Whether a request for ``method``, finding the app down, may be answered from a catalog
    instead of starting the app, under launch ``policy`` (``on-call``, ``on-start``, ``never``).
    ``never`` answers from it too: the app is not started anyway, and a client's start-up
    still sees the tools it will get once the user starts the app."""
    return policy != "on-start" and method in CATALOG_METHODS


def catalog_result(method: str, params: Any, entry: dict[str, Any] | None, *, modern: bool | None = None) -> dict[str, Any] | None:
    """The result the catalog ``entry`` gives a ``method`` request with ``params``, or
    ``None`` when it cannot answer it (then the app is needed; :func:`why_not_answered`
    says why). A new object each time.

    ``modern``: the era of the request (``True``: 2026-07-28, ``False``: 2025-era, ``None``:
    as cached). A list cached from the other era's session is given in the request's era,
    by the mappings the live translation uses (``bridge/core/legacymap.py``): a 2026-07-28
    client gets the ``resultType``, ``ttlMs`` and ``cacheScope`` its schema requires, a
    2025-era client gets none of them."""
    if entry is None or method not in CATALOG_METHODS:
        return None
    if method == "ping":
        return {}
    if method == "initialize":
        asked = params.get("protocolVersion") if isinstance(params, dict) else None
        return _negotiated_initialize(entry, asked)
    if method == "server/discover":
        result = entry.get("discover")
        return dict(result) if isinstance(result, dict) else None
    if isinstance(params, dict) and params.get("cursor") is not None:
        return None
    result = entry.get("lists", {}).get(method)
    if not isinstance(result, dict):
        return None
    if modern is True:
        return modern_result(method, result)
    if modern is False:
        return legacy_result(result)
    return dict(result)


def catalog_answer(method: str, params: Any, entry: dict[str, Any] | None, *, modern: bool | None = None) -> dict[str, Any] | None:
    """The reply members the catalog ``entry`` gives a ``method`` request with ``params``:
    ``{"result": …}`` (:func:`catalog_result`), ``{"error": …}`` for a list the app does not
    serve (:func:`list_refusal`), or ``None`` when the app is needed. A new object each time."""
    result = catalog_result(method, params, entry, modern=modern)
    if result is not None:
        return {"result": result}
    error = list_refusal(entry, method)
    return {"error": error} if error is not None else None


#: The longest error message kept from the app (characters): the catalog holds no more.
MAX_REFUSAL_MESSAGE_CHARS = 1000


def listen_acknowledgment(listen_id: Any, params: Any, entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``notifications/subscriptions/acknowledged`` (MCP 2026-07-28, "Subscriptions") the
    catalog ``entry`` gives a ``subscriptions/listen`` request ``listen_id`` with ``params``
    while the app is down: the lists the app's cached ``server/discover`` declares, of those
    the listen asks for (:func:`~bridge.core.legacymap.honored_filter`). ``None`` when the
    catalog holds no ``server/discover`` result, or the listen asks for resource
    subscriptions (only the app can accept those): then the stream waits for the app.

    Claude Code opens a listen at every start and waits for its acknowledgment before it
    goes on: unacknowledged, ``claude mcp list`` took 27 s with the app down."""
    if entry is None:
        return None
    discover = entry.get("discover")
    capabilities = discover.get("capabilities") if isinstance(discover, dict) else None
    if not isinstance(capabilities, dict):
        return None
    wanted = params.get("notifications") if isinstance(params, dict) else None
    if not isinstance(wanted, dict):
        wanted = {}
    if wanted.get("resourceSubscriptions"):
        return None
    return listen_acknowledged(listen_id, honored_filter(wanted, capabilities, []))


def _declared_capabilities(entry: dict[str, Any]) -> set[str] | None:
    """The capabilities the app's cached ``initialize`` and ``server/discover`` results
    declare (their ``capabilities`` members), or ``None`` when the catalog holds neither."""
    declared: set[str] | None = None
    by_version = entry.get("initializeByVersion")
    results = [entry.get("initialize"), entry.get("discover"), *(by_version.values() if isinstance(by_version, dict) else ())]
    for result in results:
        capabilities = result.get("capabilities") if isinstance(result, dict) else None
        if isinstance(capabilities, dict):
            declared = (declared or set()) | {name for name in capabilities if isinstance(name, str)}
    return declared


def list_refusal(entry: dict[str, Any] | None, method: str) -> dict[str, Any] | None:
    """The JSON-RPC ``error`` the catalog ``entry`` gives a list request (``method``, one of
    :data:`LIST_CHANGED`) whose capability the app does not declare: the app's own error
    as it last gave it (``refusedLists``, :func:`record_refusal`; ``{"code": int,
    "message": str}``), or ``None`` (not a list, no handshake result cached, the capability
    is declared, or the app never refused it: then the app is asked).

    MCP server/tools, server/resources, server/prompts ("Capabilities"): a server that
    serves a list declares its capability; a client may ask anyway (Codex asks
    ``resources/list`` and ``resources/templates/list`` at every start), and an app that
    does not serve it answers an error, usually ``-32601`` (JSON-RPC 2.0 section 5.1,
    "Method not found"). An app may serve a list it does not declare: only its own refusal
    is repeated, never guessed."""
    if entry is None or method not in LIST_CHANGED:
        return None
    declared = _declared_capabilities(entry)
    capability = LIST_CAPABILITY[method]
    if declared is None or capability in declared:
        return None
    refused = entry.get("refusedLists")
    error = refused.get(method) if isinstance(refused, dict) else None
    if not isinstance(error, dict) or not _well_formed_error(error):
        return None
    return {"code": error["code"], "message": error["message"]}


def _well_formed_error(error: Any) -> bool:
    return (
        isinstance(error, dict)
        and isinstance(error.get("code"), int)
        and not isinstance(error.get("code"), bool)
        and isinstance(error.get("message"), str)
    )


def record_refusal(
    entry: dict[str, Any] | None, method: str, error: Any, *, app: str, endpoint: str, now_seconds: float
) -> dict[str, Any] | None:
    """The catalog entry after the app answered a list request (``method``) with the JSON-RPC
    ``error``, or ``None`` when nothing changes. Kept only when the catalog holds the app's
    handshake result for this ``app`` and ``endpoint`` and it does not declare the list's
    capability (an app that declares it failed for another reason: that is not kept); only
    ``code`` and ``message`` (cut to :data:`MAX_REFUSAL_MESSAGE_CHARS`) are kept. A later
    result for that list (:func:`record`) or another app version drops it."""
    if entry is None or method not in LIST_CHANGED or not _well_formed_error(error):
        return None
    if entry.get("app") != app or entry.get("endpoint") != endpoint:
        return None
    declared = _declared_capabilities(entry)
    if declared is None or LIST_CAPABILITY[method] in declared:
        return None
    kept = {"code": error["code"], "message": error["message"][:MAX_REFUSAL_MESSAGE_CHARS]}
    refused = entry.get("refusedLists")
    refused = dict(refused) if isinstance(refused, dict) else {}
    if refused.get(method) == kept:
        return None
    refused[method] = kept
    return {**entry, "refusedLists": refused, "savedAtSeconds": now_seconds}


#: Server capabilities added after 2024-11-05, with the revision that added them (each
#: revision's schema, ``ServerCapabilities``); the others (``experimental``, ``logging``,
#: ``prompts``, ``resources``, ``tools``) are in every 2025-era revision.
_CAPABILITY_SINCE = {"completions": "2025-03-26", "tasks": "2025-11-25"}
_CAPABILITIES_OF_ALL = frozenset({"experimental", "logging", "prompts", "resources", "tools"})
#: At most this many ``initialize`` results are kept, one per version a client asked for.
MAX_INITIALIZE_VERSIONS = 8


def _negotiated_initialize(entry: dict[str, Any], asked: Any) -> dict[str, Any] | None:
    """The ``initialize`` result the app would give a client asking for ``asked``, as far as
    the catalog knows it (MCP basic/lifecycle, "Version Negotiation": a server that supports
    the version asked answers with it, else with the latest it supports):

    1. the result the app gave a client asking for that very version;
    2. a version newer than the app's latest, known because the app once answered an older
       version than a client asked for: that answer (the app's latest);
    3. an older 2025-era version than the one cached: the cached result with the version
       asked, if each of its capabilities exists in that version (else ``None``).

    ``None`` otherwise: the app is needed to answer."""
    return _negotiation(entry, asked)[0]


def _negotiation(entry: dict[str, Any], asked: Any) -> tuple[dict[str, Any] | None, str]:
    """(:func:`_negotiated_initialize`'s result, why ``None``)."""
    latest = entry.get("initialize")
    if not isinstance(latest, dict) or not isinstance(latest.get("protocolVersion"), str):
        return None, "the catalog holds no initialize result"
    if not isinstance(asked, str):
        return None, "the client names no protocolVersion"
    by_version = entry.get("initializeByVersion")
    by_version = by_version if isinstance(by_version, dict) else {}
    exact = by_version.get(asked)
    if isinstance(exact, dict):
        return dict(exact), ""
    if latest.get("protocolVersion") == asked and not by_version:
        return dict(latest), ""  # (a catalog written before initializeByVersion)
    served = [str(r["protocolVersion"]) for r in [latest, *by_version.values()] if isinstance(r, dict) and isinstance(r.get("protocolVersion"), str)]
    newest = max(served)
    downgraded = [
        result for version, result in by_version.items()
        if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str) and result["protocolVersion"] < version
    ]
    if downgraded:
        app_latest = max(downgraded, key=lambda result: str(result["protocolVersion"]))
        if asked > str(app_latest["protocolVersion"]):
            return dict(app_latest), ""
    if asked not in HANDSHAKE_VERSIONS:
        return None, f"the client asks for protocol version {asked}, which the bridge does not know"
    if asked > newest:
        return None, f"the client asks for protocol version {asked}; the app last answered {newest}, and whether it speaks {asked} is not known"
    base = max(
        (r for r in [latest, *by_version.values()] if isinstance(r, dict) and isinstance(r.get("protocolVersion"), str)),
        key=lambda result: str(result["protocolVersion"]),
    )
    capabilities = base.get("capabilities")
    invalid = sorted(
        name for name in (capabilities if isinstance(capabilities, dict) else {})
        if name not in _CAPABILITIES_OF_ALL and asked < _CAPABILITY_SINCE.get(name, "9999")
    )
    if invalid:
        return None, f"the app's capabilities {', '.join(invalid)} do not exist in protocol version {asked}"
    return {**base, "protocolVersion": asked}, ""


def why_not_answered(method: str, params: Any, entry: dict[str, Any] | None) -> str:
    """Why :func:`catalog_result` gives ``None`` for this request (for the log)."""
    if entry is None:
        return "there is no catalog"
    if method == "initialize":
        asked = params.get("protocolVersion") if isinstance(params, dict) else None
        return _negotiation(entry, asked)[1] or "it answers"
    if method == "server/discover":
        return "the catalog holds no server/discover result"
    if isinstance(params, dict) and params.get("cursor") is not None:
        return "the request asks for a cursor (only first pages are kept)"
    if method in LIST_CHANGED and _declared_capabilities(entry) is None:
        return f"the catalog holds no {method} result, and no initialize or server/discover result that says whether the app serves it"
    return f"the catalog holds no {method} result"


#: The catalog's marks of what the app refused (``refusesInitialize``: it serves 2026-07-28
#: only; ``refusesDiscover``: it serves the 2025 era only), each with the method refused.
REFUSAL_MARKS = {"refusesInitialize": "initialize", "refusesDiscover": "server/discover"}


def refuses(entry: dict[str, Any] | None, method: str) -> bool:
    """Whether the catalog ``entry`` records that the app refused ``method`` (``initialize``
    or ``server/discover``) and served the other era instead."""
    return entry is not None and any(entry.get(mark) and refused == method for mark, refused in REFUSAL_MARKS.items())


def discover_refusal(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """The JSON-RPC ``error`` the catalog gives a ``server/discover`` for an app it records
    as legacy-only (``refusesDiscover``; the app's own refusal when it was one), or ``None``.
    A client that probes falls back to ``initialize`` on it, as with the app itself."""
    if entry is None or not entry.get("refusesDiscover") or isinstance(entry.get("discover"), dict):
        return None
    error = entry.get("refusesDiscover")
    if isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str):
        return dict(error)
    return {"code": -32601, "message": "Method not found: the app serves MCP 2025-11-25 or older (server/discover refused)"}


def mark(
    entry: dict[str, Any] | None, key: str, value: Any, *, app: str, endpoint: str, now_seconds: float
) -> dict[str, Any] | None:
    """The catalog entry after the app proved to refuse one era's handshake (``key``, one of
    :data:`REFUSAL_MARKS`; ``value``: ``True`` or the app's JSON-RPC error), or ``None`` when
    nothing changes. An entry of another app or endpoint is started afresh. The mark goes
    when the app serves the method it refused (:func:`record`), and with a new app version."""
    if key not in REFUSAL_MARKS:
        raise ValueError(f"not a refusal mark: {key}")
    base = entry if entry is not None and entry.get("app") == app and entry.get("endpoint") == endpoint else _fresh(app, endpoint)
    if base.get(key) == value:
        return None
    return {**base, key: value, "savedAtSeconds": now_seconds}


def _fresh(app: str, endpoint: str) -> dict[str, Any]:
    return {"format": CATALOG_FORMAT, "app": app, "endpoint": endpoint, "initialize": None, "discover": None, "lists": {}}




def app_version(entry: dict[str, Any] | None) -> str | None:
    """The app's ``serverInfo.version`` as the catalog ``entry`` has it, or ``None``."""
    for key in ("initialize", "discover"):
        info = _server_info(entry.get(key) if entry is not None else None)
        if isinstance(info, dict) and isinstance(info.get("version"), str):
            return str(info["version"])
    return None


def _server_info(result: Any) -> Any:
    """The ``serverInfo`` of an ``initialize`` result, or of a ``server/discover`` result
    (2026-07-28: ``_meta["io.modelcontextprotocol/serverInfo"]``); ``None`` without one."""
    if not isinstance(result, dict):
        return None
    if "serverInfo" in result:
        return result["serverInfo"]
    meta = result.get("_meta")
    return meta.get(SERVER_INFO_META_KEY) if isinstance(meta, dict) else None


def record(
    entry: dict[str, Any] | None, method: str, params: Any, result: Any, *, app: str, endpoint: str, now_seconds: float
) -> dict[str, Any] | None:
    """The catalog entry after the app served ``result`` for a ``method`` request with
    ``params``: a new object, or ``None`` when nothing changes (nothing to write).

    An ``initialize`` or ``server/discover`` result from another app (its ``serverInfo``
    differs: another version) starts a new entry: lists from another version are dropped. A
    list is kept only when it is whole (no ``cursor`` asked, no ``nextCursor`` given): served
    in one page, or merged from all its pages (``--merge-list-pages``: the driver records
    the merged reply; a merge a bound stopped keeps a ``nextCursor`` and is not kept).
    ``ping`` and anything else change nothing."""
    if method not in CATALOG_METHODS or method == "ping" or not isinstance(result, dict):
        return None
    if method in LIST_CHANGED and (
        (isinstance(params, dict) and params.get("cursor") is not None) or result.get("nextCursor") is not None
    ):
        return None
    fresh = _fresh(app, endpoint)
    base = entry if entry is not None and entry.get("app") == app and entry.get("endpoint") == endpoint else fresh
    key = {"initialize": "initialize", "server/discover": "discover"}.get(method)
    if key is not None:
        known = [_server_info(base.get(k)) for k in ("initialize", "discover") if isinstance(base.get(k), dict)]
        if known and any(info != _server_info(result) for info in known):
            base = fresh  # another version of the app: nothing of the old one holds
        stale_mark = "refusesInitialize" if key == "initialize" else "refusesDiscover"  # it answered after all
        by_version: dict[str, Any] = dict(base.get("initializeByVersion") or {})
        asked = params.get("protocolVersion") if isinstance(params, dict) else None
        if key == "initialize" and isinstance(asked, str) and (asked in by_version or len(by_version) < MAX_INITIALIZE_VERSIONS):
            by_version[asked] = result
        if base.get(key) == result and base.get("initializeByVersion", {}) == by_version and stale_mark not in base:
            return None
        updated = {k: v for k, v in base.items() if k != stale_mark}
        updated.update({key: result, "savedAtSeconds": now_seconds})
        if by_version:
            updated["initializeByVersion"] = by_version
    else:
        lists: dict[str, Any] = dict(base.get("lists") or {})
        refused = base.get("refusedLists")
        refused = {key: value for key, value in refused.items() if key != method} if isinstance(refused, dict) else {}
        if lists.get(method) == result and refused == base.get("refusedLists", {}):
            return None
        lists[method] = result
        updated = {**base, "lists": lists, "savedAtSeconds": now_seconds}
        updated.pop("refusedLists", None)
        if refused:
            updated["refusedLists"] = refused  # the app serves this list now
    return updated


def changed_list_notifications(cached: dict[str, Any], served: dict[str, Any]) -> list[str]:
    """The ``notifications/*/list_changed`` methods owed after the app, once started, served
    the lists in ``served`` (method → result) where the client got ``cached``'s: one per
    list that differs, each method once, only for a capability the cached ``initialize``
    (or ``server/discover``) result declared. Sent whether or not that capability says
    ``listChanged``: it is the only way a client can learn its first list was stale, and a
    client that does not expect it ignores a notification (MCP basic: notifications need
    no reply)."""
    capabilities: dict[str, Any] = {}
    for key in ("initialize", "discover"):
        result = cached.get(key)
        if isinstance(result, dict) and isinstance(result.get("capabilities"), dict):
            capabilities.update(result["capabilities"])
    owed: list[str] = []
    old_lists = cached.get("lists") or {}
    for method, result in served.items():
        if method not in LIST_CHANGED or method not in old_lists or _items(method, old_lists[method]) == _items(method, result):
            continue
        notification = LIST_CHANGED[method]
        if LIST_CAPABILITY[method] in capabilities and notification not in owed:
            owed.append(notification)
    return owed


def _items(method: str, result: Any) -> Any:
    """The list in a list ``result``: what a ``list_changed`` is about. The era's own members
    around it (2026-07-28's ``resultType``, ``cacheScope``, ``ttlMs``, ``_meta``) differ between a
    2026-07-28 client's listing and a legacy one's of the same list."""
    return result.get(LIST_ITEMS[method]) if isinstance(result, dict) else result


def valid_entry(entry: Any, *, app: str, endpoint: str) -> bool:
    """Whether ``entry`` (parsed JSON) is a catalog this version reads, for ``app`` at
    ``endpoint``: every member this module reads has its type (see the module: results are
    objects or ``null``, ``lists`` and ``initializeByVersion`` objects of objects, the marks
    ``true`` or, for ``refusesDiscover``, the app's error object). Anything else (another
    version's file, a hand edit) is no catalog, whatever the types inside it."""
    if not (
        isinstance(entry, dict)
        and entry.get("format") == CATALOG_FORMAT
        and entry.get("app") == app
        and entry.get("endpoint") == endpoint
    ):
        return False
    saved = entry.get("savedAtSeconds", 0)
    if isinstance(saved, bool) or not isinstance(saved, (int, float)) or saved != saved:
        return False
    if any(not isinstance(entry.get(key), (dict, type(None))) for key in ("initialize", "discover")):
        return False
    for key in ("lists", "initializeByVersion"):
        members = entry.get(key, {})
        if not isinstance(members, dict) or not all(isinstance(value, dict) for value in members.values()):
            return False
    if len(entry.get("initializeByVersion", {})) > MAX_INITIALIZE_VERSIONS:
        return False
    marks = entry.get("refusesInitialize", True), entry.get("refusesDiscover", True)
    return isinstance(marks[0], bool) and isinstance(marks[1], (bool, dict))
