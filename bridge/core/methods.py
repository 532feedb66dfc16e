"""The facts the bridge knows about MCP methods, in one table: which era has the method,
which result member holds its paginated list, which server capability it belongs to and
which notification says that list changed, whether sending it twice is harmless, whether
a 2026-07-28 result carries caching advice, whether its result may be ``input_required``,
and whether lazy launch may answer it from the catalog.

Pure: imports only the standard library. Every module that asks one of these questions
asks this table (the recovery policy, list merging, lazy launch, the era mappings, the
driver); the sets it exports are views of it.

Sources: MCP 2025-11-25 server/tools, server/prompts, server/resources ("Listing …",
"List Changed Notification"), basic/utilities/ping; MCP 2026-07-28 basic/index
("Per-request protocol fields"), server/discover, multi-round-trip requests (SEP-2322),
``subscriptions/listen`` (SEP-2575).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "MethodFacts",
    "METHODS",
    "LIST_ITEMS",
    "LIST_CHANGED",
    "LIST_CAPABILITY",
    "LISTS_THAT_CHANGE",
    "CATALOG_METHODS",
    "CACHEABLE_METHODS",
    "INPUT_CAPABLE_METHODS",
    "IDEMPOTENT_METHODS",
    "list_member",
]

#: ``era`` values: the method exists in both eras, before 2026-07-28 only, or since.
BOTH, LEGACY_ONLY, MODERN_ONLY = "both", "2025", "2026-07-28"


class MethodFacts(NamedTuple):
    """What the bridge knows of one client→server method."""

    #: ``both``, ``2025`` (before 2026-07-28 only) or ``2026-07-28`` (since only).
    era: str = BOTH
    #: The result member that holds the method's paginated list (``None``: not a list).
    list_member: str | None = None
    #: The server capability the list belongs to (in ``capabilities``).
    capability: str | None = None
    #: The notification that says the list changed.
    list_changed: str | None = None
    #: Sending it twice changes nothing in the app (it only reads).
    idempotent: bool = False
    #: A 2026-07-28 result of it carries caching advice (``ttlMs``, ``cacheScope``).
    cacheable: bool = False
    #: Its 2026-07-28 result may be ``input_required`` (multi-round-trip requests).
    input_capable: bool = False
    #: Lazy launch may answer it from the catalog while the app is down.
    from_catalog: bool = False


def _list(member: str, capability: str, changed: str) -> MethodFacts:
    return MethodFacts(
        list_member=member,
        capability=capability,
        list_changed=f"notifications/{changed}/list_changed",
        idempotent=True,
        cacheable=True,
        from_catalog=True,
    )


#: The table. A method not in it is sent as it is; besides these, any ``*/list`` or
#: ``*/get`` is idempotent (:data:`IDEMPOTENT_METHODS` is what the table adds to that rule).
METHODS: dict[str, MethodFacts] = {
    "initialize": MethodFacts(era=LEGACY_ONLY, from_catalog=True),
    "server/discover": MethodFacts(era=MODERN_ONLY, idempotent=True, cacheable=True, from_catalog=True),
    "ping": MethodFacts(era=LEGACY_ONLY, idempotent=True, from_catalog=True),
    "tools/list": _list("tools", "tools", "tools"),
    "prompts/list": _list("prompts", "prompts", "prompts"),
    "resources/list": _list("resources", "resources", "resources"),
    # resource templates have no notification of their own: the resources one covers them
    "resources/templates/list": _list("resourceTemplates", "resources", "resources"),
    "resources/read": MethodFacts(idempotent=True, cacheable=True, input_capable=True),
    "tools/call": MethodFacts(input_capable=True),
    "prompts/get": MethodFacts(idempotent=True, input_capable=True),
    "completion/complete": MethodFacts(idempotent=True),
    "subscriptions/listen": MethodFacts(era=MODERN_ONLY),
}

#: The paginated lists, each with its result's member that holds the list.
LIST_ITEMS: dict[str, str] = {name: facts.list_member for name, facts in METHODS.items() if facts.list_member is not None}
#: The paginated lists, each with the notification that says it changed.
LIST_CHANGED: dict[str, str] = {name: facts.list_changed for name, facts in METHODS.items() if facts.list_changed is not None}
#: The paginated lists, each with the capability it belongs to.
LIST_CAPABILITY: dict[str, str] = {name: facts.capability for name, facts in METHODS.items() if facts.capability is not None}
#: The capabilities whose lists a client caches and may be told changed (``tools``,
#: ``prompts``, ``resources``), in that order.
LISTS_THAT_CHANGE: tuple[str, ...] = tuple(dict.fromkeys(LIST_CAPABILITY.values()))
#: Every method lazy launch may answer from the catalog.
CATALOG_METHODS = frozenset(name for name, facts in METHODS.items() if facts.from_catalog)
#: The methods whose 2026-07-28 results carry caching advice.
CACHEABLE_METHODS = frozenset(name for name, facts in METHODS.items() if facts.cacheable)
#: The requests whose 2026-07-28 result may be ``input_required``.
INPUT_CAPABLE_METHODS = frozenset(name for name, facts in METHODS.items() if facts.input_capable)
#: The idempotent methods that are neither a ``*/list`` nor a ``*/get``.
IDEMPOTENT_METHODS = frozenset(name for name, facts in METHODS.items() if facts.idempotent and not name.endswith(("/list", "/get")))


def list_member(method: str) -> str | None:
    """The result member that holds ``method``'s paginated list, or ``None`` (not a list)."""
    facts = METHODS.get(method)
    return facts.list_member if facts is not None else None
