"""The page-merge rules of ``--merge-list-pages`` (``bridge/core/quirks.py``, ``ListMerge``),
without I/O: what starts a merge, when it stops, and that a merged reply never passes the
byte cap it was given."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.core.jsonrpc import encode_message
from bridge.core.lazylaunch import record
from bridge.core.quirks import MAX_LIST_PAGES, ListMerge


def page(names: list[str], cursor: Any = None, member: str = "tools", request_id: Any = 1) -> dict[str, Any]:
    result: dict[str, Any] = {member: [{"name": name} for name in names]}
    if cursor is not None:
        result["nextCursor"] = cursor
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def test_nothing_to_merge_without_a_string_cursor_or_a_list() -> None:
    assert ListMerge.start("tools/list", page(["a"]), max_message_bytes=4096) is None
    assert ListMerge.start("tools/list", page(["a"], cursor=7), max_message_bytes=4096) is None
    assert ListMerge.start("tools/call", page(["a"], cursor="c"), max_message_bytes=4096) is None
    assert ListMerge.start("tools/list", {"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "x"}}, max_message_bytes=4096) is None
    assert ListMerge.start("prompts/list", page(["a"], cursor="c"), max_message_bytes=4096) is None  # no "prompts" member


def test_the_next_page_s_params_keep_the_client_s_but_its_progress_token() -> None:
    merge = ListMerge.start("tools/list", page(["a"], cursor="c1"), max_message_bytes=4096)
    assert merge is not None
    params = {"_meta": {"progressToken": 3, "io.modelcontextprotocol/protocolVersion": "2026-07-28"}, "other": 1}
    assert merge.page_params(params) == {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}, "other": 1, "cursor": "c1"}
    assert params["_meta"] == {"progressToken": 3, "io.modelcontextprotocol/protocolVersion": "2026-07-28"}  # (not changed)
    assert merge.page_params(None) == {"cursor": "c1"}


def test_a_complete_merge_is_one_reply_the_catalog_keeps() -> None:
    merge = ListMerge.start("resources/templates/list", page(["a"], "c1", "resourceTemplates", "x"), max_message_bytes=4096)
    assert merge is not None
    merge.add(page(["b"], "c2", "resourceTemplates", "mcp-app-bridge-page-1"))
    merge.add(page(["c"], None, "resourceTemplates", "mcp-app-bridge-page-2"))
    reply = merge.reply()
    assert merge.stopped is None and merge.next_cursor is None and merge.pages == 3
    assert reply == {"jsonrpc": "2.0", "id": "x", "result": {"resourceTemplates": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}}
    kept = record(None, "resources/templates/list", None, reply["result"], app="A", endpoint="e", now_seconds=1.0)
    assert kept is not None and kept["lists"]["resources/templates/list"] == reply["result"]


def test_a_page_that_is_no_list_stops_it_and_keeps_its_cursor() -> None:
    merge = ListMerge.start("tools/list", page(["a"], "c1"), max_message_bytes=4096)
    assert merge is not None
    merge.add({"jsonrpc": "2.0", "id": "p", "error": {"code": -32602, "message": "bad cursor"}})
    assert merge.stopped == "the app answered page 2 with error -32602"
    assert merge.reply()["result"] == {"tools": [{"name": "a"}], "nextCursor": "c1"}


def test_it_stops_at_max_list_pages() -> None:
    merge = ListMerge.start("tools/list", page(["t0"], "c1"), max_message_bytes=1 << 20)
    assert merge is not None
    while merge.stopped is None and merge.next_cursor is not None:
        merge.add(page([f"t{merge.pages}"], f"c{merge.pages + 1}"))
    assert merge.pages == MAX_LIST_PAGES and merge.next_cursor == f"c{MAX_LIST_PAGES}"
    assert len(merge.reply()["result"]["tools"]) == MAX_LIST_PAGES


names = st.text(alphabet=st.sampled_from("aé€😀\u2028\u2029\"\\\n"), min_size=0, max_size=40)


@settings(max_examples=200, deadline=None)
@given(pages=st.lists(st.lists(names, max_size=6), min_size=2, max_size=12), cap=st.integers(1024, 2048), cursor_size=st.integers(1, 60))
def test_the_merged_reply_never_passes_the_cap(pages: list[list[str]], cap: int, cursor_size: int) -> None:
    first = page(pages[0], "c" * cursor_size)
    if len(encode_message(first)) > cap:
        return  # (the app's own first page: not the merge's to cut)
    merge = ListMerge.start("tools/list", first, max_message_bytes=cap)
    assert merge is not None
    for index, names_on_page in enumerate(pages[1:], start=2):
        if merge.stopped is not None:
            break
        merge.add(page(names_on_page, ("d" * cursor_size + str(index)) if index < len(pages) else None))
    assert len(encode_message(merge.reply())) <= cap
