"""Lazy launch: which requests a cached catalog answers while the app is down, and what it holds.

Pure: imports only the standard library. The driver (``bridge/serve/driver.py``) asks this
module; the catalog file itself is ``bridge/app/servedcatalog.py`` (docs/behaviour.md,
"Lazy launch"; docs/discovery.md, "The catalog").

AI clients start their servers far more often than users call tools: at every start, for
``claude mcp list``, for an era probe. With ``--launch`` each start would start the user's
desktop app. Under the ``on-call`` launch policy, when the app is down (a request's
connection was refused, the moment the recovery policy would start it) and the bridge has a
catalog of what the app last served, these requests are answered from it instead:

| request                                   | answered from the catalog when                                 |
|-------------------------------------------|----------------------------------------------------------------|
| ``initialize``                            | the catalog's ``protocolVersion`` is the one the client asks for |
| ``server/discover`` (2026-07-28)          | the catalog holds a ``server/discover`` result                  |
| ``tools/list``, ``prompts/list``,         | the catalog holds that list, and the request asks for no         |
| ``resources/list``,                       | ``cursor`` (only a whole list is kept: one the app served in one |
| ``resources/templates/list``              | page, or whose pages ``--merge-list-pages`` merged into one)     |
| ``ping``                                  | the catalog exists (``{}``)                                     |

Anything else needs the app: the first such request starts it (single-flight across
bridges, ``bridge/app/launcher.py``), the client's own ``initialize`` is replayed to open the
real MCP session, and the request is forwarded. The lists the client was served are then
listed again; each that differs is announced with its ``notifications/*/list_changed``.

A catalog entry is a JSON object (no token, no header, nothing but what the app served):
``{"format": 1, "app": <name>, "endpoint": <URL or discovery file path>, "savedAtSeconds":
<Unix time>, "initialize": <result> | null, "discover": <result> | null, "lists": {<method>:
<result>}}``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CATALOG_FORMAT",
    "CATALOG_METHODS",
    "LIST_METHODS",
    "answers_from_catalog",
    "catalog_result",
    "record",
    "changed_list_notifications",
    "app_version",
    "valid_entry",
]

#: The ``format`` of the entries this version writes and reads.
CATALOG_FORMAT = 1
#: The lists a catalog keeps, each with the notification that says it changed (MCP
#: server/tools, server/prompts, server/resources: "List Changed Notification"; resource
#: templates have none of their own: the resources one covers them).
LIST_METHODS: dict[str, str] = {
    "tools/list": "notifications/tools/list_changed",
    "prompts/list": "notifications/prompts/list_changed",
    "resources/list": "notifications/resources/list_changed",
    "resources/templates/list": "notifications/resources/list_changed",
}
#: The capability each list belongs to (in the ``initialize`` result's ``capabilities``).
_CAPABILITY = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources", "resources/templates/list": "resources"}
#: Every method a catalog may answer.
CATALOG_METHODS = frozenset({"initialize", "server/discover", "ping", *LIST_METHODS})


def answers_from_catalog(policy: str, method: str) -> bool:
    """Whether a request for ``method``, finding the app down, may be answered from a catalog
    instead of starting the app, under launch ``policy`` (``on-call``, ``on-start``, ``never``).
    ``never`` answers from it too: the app is not started anyway, and a client's start-up
    still sees the tools it will get once the user starts the app."""
    return policy != "on-start" and method in CATALOG_METHODS


def catalog_result(method: str, params: Any, entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """The result the catalog ``entry`` gives a ``method`` request with ``params``, or
    ``None`` when it cannot answer it (then the app is needed). A new object each time."""
    if entry is None or method not in CATALOG_METHODS:
        return None
    if method == "ping":
        return {}
    if method == "initialize":
        result = entry.get("initialize")
        asked = params.get("protocolVersion") if isinstance(params, dict) else None
        if isinstance(result, dict) and asked is not None and result.get("protocolVersion") == asked:
            return dict(result)
        return None
    if method == "server/discover":
        result = entry.get("discover")
        return dict(result) if isinstance(result, dict) else None
    if isinstance(params, dict) and params.get("cursor") is not None:
        return None
    result = entry.get("lists", {}).get(method)
    return dict(result) if isinstance(result, dict) else None


#: Where a 2026-07-28 ``server/discover`` result names the server: in its ``_meta``.
_SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"


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
    return meta.get(_SERVER_INFO_META) if isinstance(meta, dict) else None


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
    if method in LIST_METHODS and (
        (isinstance(params, dict) and params.get("cursor") is not None) or result.get("nextCursor") is not None
    ):
        return None
    fresh: dict[str, Any] = {"format": CATALOG_FORMAT, "app": app, "endpoint": endpoint, "initialize": None, "discover": None, "lists": {}}
    base = entry if entry is not None and entry.get("app") == app and entry.get("endpoint") == endpoint else fresh
    key = {"initialize": "initialize", "server/discover": "discover"}.get(method)
    if key is not None:
        known = [_server_info(base.get(k)) for k in ("initialize", "discover") if isinstance(base.get(k), dict)]
        if known and any(info != _server_info(result) for info in known):
            base = fresh  # another version of the app: nothing of the old one holds
        if base.get(key) == result:
            return None
        updated = {**base, key: result, "savedAtSeconds": now_seconds}
    else:
        lists: dict[str, Any] = dict(base.get("lists") or {})
        if lists.get(method) == result:
            return None
        lists[method] = result
        updated = {**base, "lists": lists, "savedAtSeconds": now_seconds}
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
        if method not in LIST_METHODS or method not in old_lists or _items(method, old_lists[method]) == _items(method, result):
            continue
        notification = LIST_METHODS[method]
        if _CAPABILITY[method] in capabilities and notification not in owed:
            owed.append(notification)
    return owed


#: The member of each list result that holds the list itself.
_ITEMS = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources", "resources/templates/list": "resourceTemplates"}


def _items(method: str, result: Any) -> Any:
    """The list in a list ``result``: what a ``list_changed`` is about. The era's own members
    around it (2026-07-28's ``resultType``, ``cacheScope``, ``ttlMs``, ``_meta``) differ between a
    2026-07-28 client's listing and a legacy one's of the same list."""
    return result.get(_ITEMS[method]) if isinstance(result, dict) else result


def valid_entry(entry: Any, *, app: str, endpoint: str) -> bool:
    """Whether ``entry`` (parsed JSON) is a catalog this version reads, for ``app`` at ``endpoint``."""
    return (
        isinstance(entry, dict)
        and entry.get("format") == CATALOG_FORMAT
        and entry.get("app") == app
        and entry.get("endpoint") == endpoint
        and isinstance(entry.get("lists", {}), dict)
        and isinstance(entry.get("savedAtSeconds", 0), (int, float))
    )
