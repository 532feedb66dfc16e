"""The reply ledger (bridge/core/ledger.py), purely: exactly one reply per request id, whatever
path the app's lines take, and nothing invalid on its way to stdout."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.core.errors import ShuttingDownError
from bridge.core.jsonrpc import encode_message, error_line, message_problem
from bridge.core.ledger import ANSWERED, CANCELLED, Ledger, Slot


def opened(ledger: Ledger, request_id: Any, held_bytes: int = 0) -> Slot:
    """Open one request (not a batch) and return its slot."""
    pending = ledger.open([request_id], batch=False, held_bytes=held_bytes).pending
    assert pending is not None
    return pending.slots[0]


def reply(request_id: Any, result: Any = None) -> tuple[bytes, dict[str, Any]]:
    message = {"jsonrpc": "2.0", "id": request_id, "result": {} if result is None else result}
    return encode_message(message), message


def test_a_request_is_answered_once_and_a_second_answer_is_dropped() -> None:
    ledger = Ledger()
    slot = opened(ledger, 1, held_bytes=100)
    assert ledger.open_requests == 1 and ledger.held_bytes == 100
    first = ledger.answer(slot, reply(1)[0])
    assert first.line == reply(1)[0] and first.dropped is None
    again = ledger.answer(slot, reply(1, {"again": True})[0])
    assert again.line is None and "already answered" in (again.dropped or "")
    assert ledger.open_requests == 0 and ledger.held_bytes == 0 and not ledger


def test_a_response_relayed_for_an_open_request_answers_it_and_its_own_reply_is_dropped() -> None:
    """B's response on A's stream (or the GET stream): the first valid answer wins."""
    ledger = Ledger()
    a = opened(ledger, "A")
    b = opened(ledger, "B")
    line, message = reply("B", {"via": "A"})
    relayed = ledger.relay(line, message)
    assert relayed.line == line and relayed.answered is b and b.state == ANSWERED
    assert ledger.answer(b, reply("B")[0]).line is None  # B's own stream, later: dropped
    again = ledger.relay(line, message)  # and once more on A's stream: dropped
    assert again.line is None and again.dropped is not None
    assert ledger.answer(a, reply("A")[0]).line == reply("A")[0]


def test_a_response_for_an_id_that_was_never_open_is_dropped() -> None:
    outcome = Ledger().relay(*reply(7))
    assert outcome.line is None and "no open request" in (outcome.dropped or "")


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "hello": 1},
        {"jsonrpc": "2.0", "result": {}},
        {"jsonrpc": "2.0", "id": None, "result": {}},
        {"jsonrpc": "2.0", "id": 1, "error": "bad"},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": "1", "message": "x"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": True, "message": "x"}},
        {"jsonrpc": "2.0", "id": 1.5, "result": {}},
        {"jsonrpc": "1.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "method": 5},
        {"jsonrpc": "2.0", "method": "x", "params": "no"},
        {"jsonrpc": "2.0", "method": "x", "id": None},
        {"jsonrpc": "2.0", "method": "x", "id": 1, "result": {}},
        [1],
        "text",
    ],
)
def test_anything_that_is_not_json_rpc_is_dropped_even_when_an_open_request_has_its_id(message: Any) -> None:
    ledger = Ledger()
    slot = opened(ledger, 1)
    outcome = ledger.relay(encode_message(message), message)
    assert outcome.line is None and "not a JSON-RPC 2.0 message" in (outcome.dropped or "")
    assert slot.state == "open"


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
        {"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/message", "params": []},
    ],
)
def test_requests_and_notifications_from_the_app_pass(message: Any) -> None:
    line = encode_message(message)
    assert Ledger().relay(line, message).line is line


def test_a_batch_is_answered_by_one_array_once_every_request_is_in() -> None:
    ledger = Ledger()
    invalid = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}\n'
    pending = ledger.open([1, 2, 3], batch=True, held_bytes=10, extra=[invalid]).pending
    assert pending is not None
    one, two, three = pending.slots
    assert ledger.answer(two, reply(2)[0]).line is None
    assert ledger.relay(*reply(1)).line is None  # fills the batch's slot, writes nothing yet
    assert ledger.cancel(3).answered is three and three.state == CANCELLED
    # ...which completed it: the array holds 1 and 2 (in order), the invalid item, not 3.
    assert ledger.held_bytes == 0 and ledger.open_requests == 0
    assert ledger.answer(one, reply(1)[0]).dropped is not None


def test_cancelling_the_last_open_item_returns_the_batch_line() -> None:
    ledger = Ledger()
    pending = ledger.open([1, 2], batch=True).pending
    assert pending is not None
    ledger.answer(pending.slots[0], reply(1)[0])
    outcome = ledger.cancel(2)
    assert json.loads(outcome.line or b"") == [{"jsonrpc": "2.0", "id": 1, "result": {}}]


def test_a_cancelled_request_gets_no_reply_at_all() -> None:
    ledger = Ledger()
    slot = opened(ledger, 5)
    cancelled = ledger.cancel(5)
    assert cancelled.answered is slot and cancelled.line is None
    assert ledger.answer(slot, reply(5)[0]).line is None  # a late reply from the app
    assert ledger.relay(*reply(5)).line is None
    assert ledger.close_all(ShuttingDownError("bye")) == []
    assert ledger.cancel(5).answered is None  # the race: a second cancel finds nothing


def test_an_id_already_open_is_refused_and_the_open_request_keeps_it() -> None:
    ledger = Ledger()
    first = ledger.open([1], batch=False).pending
    second = ledger.open([1], batch=False)
    assert second.pending is None and second.line is not None
    refusal = json.loads(second.line)
    assert refusal["id"] == 1 and refusal["error"]["code"] == -32600
    assert ledger.slot(1) is first.slots[0]  # type: ignore[union-attr]
    batch = ledger.open([1, 2, 2], batch=True)
    assert batch.pending is not None and [s.id for s in batch.pending.slots] == [2]
    assert len(batch.pending.extra) == 2  # id 1 (open already) and the second 2


def test_ids_of_different_types_are_different_ids() -> None:
    ledger = Ledger()
    number = ledger.open([1], batch=False).pending
    text = ledger.open(["1"], batch=False).pending
    assert number is not None and text is not None
    assert ledger.relay(*reply("1")).answered is text.slots[0]
    assert number.slots[0].state == "open"


def test_a_batch_of_only_refused_items_is_answered_at_once() -> None:
    ledger = Ledger()
    ledger.open([1], batch=False)
    opened = ledger.open([1], batch=True)
    assert opened.pending is None and json.loads(opened.line or b"")[0]["id"] == 1


def test_close_all_answers_every_open_request_with_the_error() -> None:
    ledger = Ledger()
    ledger.open([1], batch=False)
    batch = ledger.open(["a", "b"], batch=True).pending
    assert batch is not None
    ledger.answer(batch.slots[0], reply("a")[0])
    lines = ledger.close_all(ShuttingDownError("The bridge is shutting down."))
    replies = [json.loads(line) for line in lines]
    assert replies[0]["id"] == 1 and replies[0]["error"]["data"]["reason"] == "shutting_down"
    assert [item["id"] for item in replies[1]] == ["a", "b"] and "error" in replies[1][1]
    assert not ledger and ledger.held_bytes == 0


ids = st.one_of(st.integers(-3, 12), st.sampled_from(["1", "a", "", "b"]))
steps = st.lists(
    st.tuples(st.sampled_from(["open", "batch", "answer", "relay", "cancel", "junk"]), st.lists(ids, min_size=1, max_size=3)),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_whatever_happens_each_opened_request_is_written_at_most_once_and_close_all_finishes_it(
    script: list[tuple[str, list[Any]]],
) -> None:
    """Model check: over any sequence of opens, answers, relays, cancels and junk, every
    written line is valid JSON-RPC, every request id opened is written at most once per
    opening, and after ``close_all`` each opened (and not cancelled) one was written once."""
    ledger = Ledger()
    written: list[Any] = []
    opened: list[tuple[Any, Any]] = []  # (id, slot)
    attempts: dict[Any, int] = {}  # (type, id): how many requests were read with it

    def write(line: bytes | None) -> None:
        if line is not None:
            value = json.loads(line)
            for item in value if isinstance(value, list) else [value]:
                assert message_problem(item) is None
            written.append(value)

    for action, request_ids in script:
        if action in ("open", "batch"):
            request_ids = request_ids[:1] if action == "open" else request_ids
            for request_id in request_ids:
                attempts[(type(request_id), request_id)] = attempts.get((type(request_id), request_id), 0) + 1
            result = ledger.open(request_ids, batch=action == "batch")
            write(result.line)
            if result.pending is not None:
                opened += [(slot.id, slot) for slot in result.pending.slots]
        elif action == "answer":
            for request_id in request_ids:
                slot = ledger.slot(request_id)
                if slot is not None:
                    write(ledger.answer(slot, reply(request_id)[0]).line)
        elif action == "relay":
            for request_id in request_ids:
                write(ledger.relay(*reply(request_id)).line)
        elif action == "cancel":
            write(ledger.cancel(request_ids[0]).line)
        else:
            message = {"jsonrpc": "2.0", "id": request_ids[0], "result": 1, "error": {"code": 1, "message": ""}}
            write(ledger.relay(encode_message(message), message).line)
    for line in ledger.close_all(ShuttingDownError("bye")):
        write(line)
    assert not ledger and ledger.held_bytes == 0
    items = [item for value in written for item in (value if isinstance(value, list) else [value])]
    replies: dict[Any, int] = {}
    for item in items:
        replies[(type(item["id"]), item["id"])] = replies.get((type(item["id"]), item["id"]), 0) + 1
    for request_id, slot in opened:
        assert slot.state in (ANSWERED, CANCELLED)
        if slot.state == ANSWERED:
            assert replies.get((type(request_id), request_id), 0) >= 1
    for key, count in replies.items():
        assert count <= attempts.get(key, 0)  # one line per request read, at most


def test_a_lasting_request_owes_a_reply_but_is_no_work_in_flight() -> None:
    """``subscriptions/listen`` stays open for as long as the client listens: the shutdown
    must not wait for it (``working``), yet it is answered like any other."""
    ledger = Ledger()
    listen = ledger.open(["listen"], batch=False, lasting=[True]).pending
    batch = ledger.open([1, 2], batch=True, lasting=[False, True]).pending
    assert listen is not None and batch is not None
    assert (ledger.open_requests, ledger.working) == (3, 1)
    assert ledger.answer(batch.slots[0], error_line(1, ShuttingDownError("bye"))).line is None
    assert (ledger.open_requests, ledger.working) == (2, 0)
    lines = ledger.close_all(ShuttingDownError("bye"))
    assert len(lines) == 2 and (ledger.open_requests, ledger.working) == (0, 0)
