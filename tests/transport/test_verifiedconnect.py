"""The one road to the app (``bridge/transport/verifiedconnect.py``), with a fake ``connect``
and ``verify``: which connection comes back, which are closed unused, and which failure is
reported. No socket is opened except where a test says so."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bridge.core.errors import AppUnreachableError, ListenerUnverifiedError
from bridge.transport.base import ConnectFailed, ConnectTimeout
from bridge.transport.verifiedconnect import connect_first_verified, pick_failure, resolve_addresses, verified_probe

pytestmark = pytest.mark.anyio

#: What the fake resolver gives for ``app.test``: the IPv6 loopback first, as most desktops do.
BOTH = ["::1", "127.0.0.1"]


class Conn:
    def __init__(self, address: str) -> None:
        self.address = address
        self.closed = False


class Road:
    """A fake network: ``outcomes[address]`` is ``"refused"``, ``"ok"``, ``"stranger"``,
    ``"going-away"``, ``"slow"`` (connect never returns) or ``"slow-verify"``."""

    def __init__(self, outcomes: dict[str, str] | None = None) -> None:
        self.outcomes = dict(outcomes or {})
        self.made: list[Conn] = []
        self.verified: list[str] = []

    async def connect(self, address: str) -> Conn:
        outcome = self.outcomes[address]
        if outcome == "refused":
            raise ConnectionRefusedError(111, "Connection refused")
        if outcome == "slow":
            await asyncio.sleep(3600)
        conn = Conn(address)
        self.made.append(conn)
        return conn

    async def verify(self, conn: Conn) -> None:
        self.verified.append(conn.address)
        outcome = self.outcomes[conn.address]
        if outcome == "stranger":
            raise ListenerUnverifiedError(f"the socket at {conn.address} belongs to uid 54321")
        if outcome == "going-away":
            raise AppUnreachableError(f"the app at {conn.address} is going away")
        if outcome == "slow-verify":
            await asyncio.sleep(3600)

    @staticmethod
    def close(conn: Conn) -> None:
        conn.closed = True

    def open_ones(self) -> list[str]:
        return [conn.address for conn in self.made if not conn.closed]


async def go(road: Road, host: str = "app.test", *, verify: bool = True, timeout_seconds: float | None = 5) -> tuple[Conn, str, tuple[str, ...]]:
    """``connect_first_verified(host, 8765)`` over ``road``."""
    return await connect_first_verified(
        host, 8765, connect=road.connect, verify=road.verify if verify else None, close=road.close,
        timeout_seconds=timeout_seconds,
    )


@pytest.fixture(autouse=True)
def app_test_resolves_to_both(monkeypatch: pytest.MonkeyPatch) -> None:
    """``app.test`` resolves to ``::1`` then ``127.0.0.1`` (as ``localhost`` does on most desktops)."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "app.test":
            return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in BOTH]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


async def test_the_first_verified_connection_is_returned_and_nothing_else_is_opened() -> None:
    road = Road({"::1": "ok", "127.0.0.1": "ok"})
    conn, address, skipped = await go(road)
    assert (conn.address, address, skipped) == ("::1", "::1", ())
    assert road.verified == ["::1"] and road.open_ones() == ["::1"]


async def test_every_address_refused_is_a_connection_failure_naming_the_os_reason() -> None:
    road = Road({"::1": "refused", "127.0.0.1": "refused"})
    with pytest.raises(ConnectFailed) as caught:
        await go(road)
    assert str(caught.value) == "connection to app.test:8765 failed: Connection refused"
    assert road.made == [] and road.verified == []


async def test_first_refused_second_verified() -> None:
    road = Road({"::1": "refused", "127.0.0.1": "ok"})
    conn, address, skipped = await go(road)
    assert (address, skipped) == ("127.0.0.1", ()) and not conn.closed and road.verified == ["127.0.0.1"]


async def test_first_unverified_is_closed_unused_and_the_second_is_returned() -> None:
    road = Road({"::1": "stranger", "127.0.0.1": "ok"})
    conn, address, skipped = await go(road)
    assert (address, skipped) == ("127.0.0.1", ("::1",))
    assert road.open_ones() == ["127.0.0.1"] and conn is road.made[1]


async def test_a_stranger_and_nothing_listening_elsewhere_is_not_running_so_the_app_may_be_started() -> None:
    """A squatter on [::1] must not keep the app from being started on 127.0.0.1: the
    failure reported is the connection's (app_unreachable), with the skipped address."""
    road = Road({"::1": "stranger", "127.0.0.1": "refused"})
    with pytest.raises(ConnectFailed) as caught:
        await go(road)
    assert "Connection refused" in str(caught.value) and "skipped ::1: its listener is not the app's" in str(caught.value)
    assert road.open_ones() == []


async def test_only_refusals_by_the_check_report_the_first_in_address_order() -> None:
    road = Road({"::1": "going-away", "127.0.0.1": "stranger"})
    with pytest.raises(AppUnreachableError, match="::1 is going away"):
        await go(road)
    assert road.open_ones() == [] and road.verified == ["::1", "127.0.0.1"]
    road = Road({"::1": "stranger", "127.0.0.1": "going-away"})
    with pytest.raises(ListenerUnverifiedError, match="uid 54321"):
        await go(road)


async def test_a_single_address_refused_by_the_check_raises_that_refusal() -> None:
    road = Road({"127.0.0.1": "stranger"})
    with pytest.raises(ListenerUnverifiedError):
        await go(road, "127.0.0.1")
    assert road.open_ones() == []


async def test_without_verify_the_first_connection_made_is_returned() -> None:
    road = Road({"::1": "stranger", "127.0.0.1": "ok"})
    _conn, address, skipped = await go(road, verify=False)
    assert (address, skipped) == ("::1", ()) and road.verified == []


@pytest.mark.parametrize("slow", ["slow", "slow-verify"])
async def test_one_bound_covers_the_whole_attempt_and_leaves_nothing_open(slow: str) -> None:
    road = Road({"::1": "refused", "127.0.0.1": slow})
    with pytest.raises(ConnectTimeout, match="app.test:8765 did not accept the connection in time"):
        await go(road, timeout_seconds=0.05)
    assert road.open_ones() == []


async def test_a_failure_of_verify_that_is_no_refusal_ends_the_attempt_after_closing() -> None:
    road = Road({"::1": "ok", "127.0.0.1": "ok"})

    def broken(conn: Conn) -> None:
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError):
        await connect_first_verified("app.test", 8765, connect=road.connect, verify=broken, close=road.close, timeout_seconds=5)
    assert road.open_ones() == [] and len(road.made) == 1


async def test_a_name_that_does_not_resolve_is_a_connection_failure() -> None:
    road = Road()
    with pytest.raises(ConnectFailed, match="does not resolve"):
        await connect_first_verified(
            "no-such-host.invalid", 80, connect=road.connect, verify=road.verify, close=road.close, timeout_seconds=5
        )


async def test_port_none_takes_the_host_as_one_address_unresolved_as_a_unix_socket_path_is() -> None:
    road = Road()
    road.outcomes["/run/app.sock"] = "ok"
    _conn, address, _skipped = await connect_first_verified(
        "/run/app.sock", None, connect=road.connect, verify=road.verify, close=road.close, timeout_seconds=5
    )
    assert address == "/run/app.sock" and road.verified == ["/run/app.sock"]
    road.outcomes["/run/app.sock"] = "refused"
    with pytest.raises(ConnectFailed, match="connection to /run/app.sock failed"):
        await connect_first_verified("/run/app.sock", None, connect=road.connect, verify=None, close=road.close, timeout_seconds=5)


def test_pick_failure_prefers_nothing_listening_over_a_refusal_by_the_check() -> None:
    stranger = ListenerUnverifiedError("x")
    assert pick_failure([stranger], nothing_listens_somewhere=True) is None
    assert pick_failure([], nothing_listens_somewhere=False) is None
    assert pick_failure([stranger, AppUnreachableError("y")], nothing_listens_somewhere=False) is stranger


async def test_ip_literals_are_not_resolved() -> None:
    assert await resolve_addresses("[::1]", 80) == ["::1"]
    assert await resolve_addresses("127.0.0.1", 80) == ["127.0.0.1"]


async def test_the_launchers_probe_goes_the_same_road_over_real_sockets() -> None:
    """Over real sockets: a listener whose check refuses does not count, one going away
    does (the app is there), nothing listening does not, and each probe's socket is closed."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    seen: list[socket.socket] = []

    def refusing(error: Exception) -> Callable[[socket.socket], Awaitable[None]]:
        async def verify(sock: socket.socket) -> None:
            seen.append(sock)
            raise error

        return verify

    url = f"http://127.0.0.1:{port}/mcp"
    try:
        assert await verified_probe(None)(url) is True
        assert await verified_probe(refusing(ListenerUnverifiedError("stranger")))(url) is False
        assert await verified_probe(refusing(AppUnreachableError("going away")))(url) is True
    finally:
        server.close()
    assert await verified_probe(None)(url) is False
    assert len(seen) == 2 and all(sock.fileno() == -1 for sock in seen)
