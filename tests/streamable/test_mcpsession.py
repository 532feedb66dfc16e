"""The MCP session object: what an initialize result gives, snapshot/restore, and the gate."""

from __future__ import annotations

import anyio
import pytest

from bridge.streamable.mcpsession import McpSession

RESULT = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": True}}}


def test_an_initialize_result_opens_a_session_of_the_next_generation() -> None:
    session = McpSession()
    assert (session.id, session.protocol_version, session.capabilities, session.generation) == (None, None, {}, 0)
    assert session.adopt(RESULT, {"mcp-session-id": "abc123"})
    assert (session.id, session.protocol_version, session.generation) == ("abc123", "2025-06-18", 1)
    assert session.capabilities == {"tools": {"listChanged": True}}


def test_an_error_reply_keeps_the_old_session() -> None:
    session = McpSession()
    session.adopt(RESULT, {"mcp-session-id": "abc123"})
    assert not session.adopt(None, {"mcp-session-id": "other"})
    assert (session.id, session.generation) == ("abc123", 1)


@pytest.mark.parametrize("bad", ["", "a b", "ä", "x\r\ny"])
def test_values_unsafe_to_send_back_as_a_header_are_dropped(bad: str) -> None:
    session = McpSession()
    assert session.adopt({"protocolVersion": bad, "capabilities": []}, {"mcp-session-id": bad})
    assert (session.id, session.protocol_version, session.capabilities, session.generation) == (None, None, {}, 1)


def test_restore_puts_the_old_session_back_but_the_generation_only_grows() -> None:
    session = McpSession()
    session.adopt(RESULT, {"mcp-session-id": "old"})
    before = session.snapshot()
    session.adopt({"protocolVersion": "2099-01-01"}, {"mcp-session-id": "new"})
    session.restore(before)
    assert (session.id, session.protocol_version, session.capabilities) == ("old", "2025-06-18", RESULT["capabilities"])
    assert session.generation == 2  # a failure of generation 1 cannot match again


def test_forget_sends_no_id_from_then_on() -> None:
    session = McpSession()
    session.adopt(RESULT, {"mcp-session-id": "abc123"})
    session.forget()
    assert session.id is None and session.protocol_version == "2025-06-18"




@pytest.mark.anyio
async def test_the_gate_holds_waiters_until_the_rebuild_ends_however_it_ends() -> None:
    session = McpSession()
    passed: list[str] = []

    async def waiter(name: str) -> None:
        await session.wait_ready()
        passed.append(name)

    async with anyio.create_task_group() as group:
        with pytest.raises(RuntimeError):
            with session.rebuilding():
                group.start_soon(waiter, "held")
                for _ in range(10):
                    await anyio.sleep(0)
                assert passed == [] and not session.ready
                raise RuntimeError("the replay failed")
    assert session.ready and passed == ["held"]
    await waiter("at once")
    assert passed == ["held", "at once"]
