"""Recovery with respx: token refresh on 401, ensure_running on connection refused, and
the session rebuilt after an app restart (docs/discovery.md; punkpeye/mcp-remote#91 for the
refresh that must not loop)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from support.helpers import NOTIF_INIT, URL, CountingSource, RunBridge, init, json_response, request_line
from support.mcp_app import McpApp

from bridge.app.tokencommand import CommandTokenSource
from bridge.app.tokens import TokenContext

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("wire")]




def reason(message: dict[str, Any]) -> str:
    return str(message["error"]["data"]["reason"])


# -- 401: refresh once --------------------------------------------------------------------------


async def test_401_refreshes_the_token_once_and_the_retry_succeeds(run_bridge: RunBridge) -> None:
    app = McpApp(token="new")
    source = CountingSource("old", "new")
    async with run_bridge(app, token_source=source) as h:
        h.stdin.feed(init(0))
        (reply,) = await h.stdout.wait_for(1)
        assert "result" in reply
    assert source.fetches == 2
    assert [r.headers["authorization"] for r in h.posts()[:2]] == ["Bearer old", "Bearer new"]


async def test_second_401_gives_auth_rejected_after_exactly_one_refresh(run_bridge: RunBridge) -> None:
    app = McpApp(token="never-issued", stateless=True)
    source = CountingSource("t1", "t2", "t3")
    async with run_bridge(app, token_source=source) as h:
        h.stdin.feed(request_line(14, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["id"] == 14 and reason(reply) == "auth_rejected"
    assert source.fetches == 2 and len(h.posts()) == 2
    assert "t1" not in reply["error"]["message"] and "t2" not in reply["error"]["message"]


async def test_five_concurrent_401s_cause_one_refresh_and_all_succeed(run_bridge: RunBridge) -> None:
    app = McpApp(token="new", stateless=True)
    source = CountingSource("old", "new", delay_seconds=0.05)
    async with run_bridge(app, token_source=source) as h:
        h.stdin.feed(b"".join(request_line(i, "ping") for i in range(5)))
        messages = await h.stdout.wait_for(5)
    assert sorted(m["id"] for m in messages) == list(range(5)) and all("result" in m for m in messages)
    assert source.fetches == 2  # the first fetch, then one refresh shared by all five


async def test_403_is_an_error_without_refresh(run_bridge: RunBridge) -> None:
    source = CountingSource("t1", "t2")

    def forbidden(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, headers={"www-authenticate": 'Bearer error="insufficient_scope"'})

    async with run_bridge(forbidden, token_source=source) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    assert reason(reply) == "http_status" and reply["error"]["data"]["httpStatus"] == 403
    assert source.fetches == 1


async def test_401_without_any_token_source_says_how_to_configure_one(run_bridge: RunBridge) -> None:
    async with run_bridge(McpApp(token="x", stateless=True)) as h:
        h.stdin.feed(request_line(1))
        (reply,) = await h.stdout.wait_for(1)
    assert reason(reply) == "auth_rejected" and "--token-env" in reply["error"]["message"]


@pytest.mark.parametrize("failure", ["raises", "hangs"])
async def test_token_provider_that_fails_or_hangs_gives_an_error_reply_and_the_bridge_serves_on(failure: str, run_bridge: RunBridge) -> None:
    calls = 0

    async def provider(base_url: str) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            if failure == "raises":
                raise RuntimeError("keychain locked")
            await anyio.sleep(30)
        return "good"

    async with run_bridge(McpApp(token="good", stateless=True), token_source=provider, token_timeout_seconds=0.3) as h:
        h.stdin.feed(request_line(1))
        (first,) = await h.stdout.wait_for(1)
        assert first["id"] == 1 and reason(first) == "auth_rejected"
        assert "provider" in first["error"]["message"]
        h.stdin.feed(request_line(2))  # the next request fetches again and works
        assert (await h.stdout.wait_for(2))[1] == {"jsonrpc": "2.0", "id": 2, "result": {"instance": 1}}


@pytest.mark.process
async def test_token_command_output_is_the_token_and_a_failing_command_is_an_error(tmp_path: Path) -> None:

    context = TokenContext(base_url=URL)
    good = CommandTokenSource([sys.executable, "-c", "print('tok-from-command')"])
    assert await good.fetch(context) == "tok-from-command"
    from bridge.app.tokens import TokenSourceError

    with pytest.raises(TokenSourceError, match="exited with status 3"):
        await CommandTokenSource([sys.executable, "-c", "import sys; print('secret'); sys.exit(3)"]).fetch(context)
    with pytest.raises(TokenSourceError, match="did not finish"):
        await CommandTokenSource([sys.executable, "-c", "import time; time.sleep(10)"], timeout_seconds=0.5).fetch(context)


async def test_auth_route_exchanges_the_secret_for_a_token_and_is_asked_again_on_401(tmp_path: Path, run_bridge: RunBridge) -> None:
    from bridge.app.tokens import AuthRouteTokenSource

    secret = tmp_path / "secret"
    secret.write_text("s3cret-value\n")
    secret.chmod(0o600)
    app = McpApp(token="issued-1", stateless=True)
    issued: list[str] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/auth/token":
            assert json.loads(request.content) == {"secret": "s3cret-value"}
            issued.append(app.token or "")
            return json_response({"token": app.token})
        return await app(request)

    source = AuthRouteTokenSource("/auth/token", secret)  # resolved against the endpoint
    async with run_bridge(handle, token_source=source) as h:
        h.stdin.feed(request_line(1))
        await h.stdout.wait_for(1)
        app.token = "issued-2"  # rotated
        h.stdin.feed(request_line(2))
        messages = await h.stdout.wait_for(2)
    assert all("result" in m for m in messages)
    assert issued == ["issued-1", "issued-2"]


# -- connection refused: ensure_running once -------------------------------------------------


class Starter:
    """A library ensure_running that brings the fake app up (or not)."""

    def __init__(self, app: McpApp, *, works: bool = True) -> None:
        self.app = app
        self.works = works
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.works:
            self.app.up = True

    async def probe(self, url: str) -> bool:
        return self.app.up


@pytest.mark.httpx_only
async def test_connection_refused_starts_the_app_once_and_the_retry_succeeds(run_bridge: RunBridge) -> None:
    app = McpApp(stateless=True)
    app.up = False
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(request_line(7, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    assert reply == {"jsonrpc": "2.0", "id": 7, "result": {"instance": 1}}
    assert starter.calls == 1
    assert len(h.posts()) == 2


@pytest.mark.httpx_only
async def test_app_still_refusing_after_ensure_running_gives_app_unreachable_after_two_posts(run_bridge: RunBridge) -> None:
    app = McpApp()
    app.up = False

    async def says_up(url: str) -> bool:
        return True  # e.g. another process holds the port, but the app refuses

    starter = Starter(app, works=False)
    async with run_bridge(app, ensure_running=starter, app_probe=says_up) as h:
        h.stdin.feed(request_line(7, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
        h.stdin.feed(b'{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}\n' + request_line(8))
        await h.stdout.wait_for(2)
        await anyio.sleep(0.05)
    assert reply["id"] == 7 and reason(reply) == "app_unreachable"
    assert len(h.stdout.lines) == 2  # nothing for the notification


@pytest.mark.httpx_only
async def test_app_that_never_comes_up_gives_app_launch_failed_within_the_launch_timeout(run_bridge: RunBridge) -> None:
    app = McpApp()
    app.up = False
    starter = Starter(app, works=False)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe, launch_timeout_seconds=0.5) as h:
        started = anyio.current_time()
        h.stdin.feed(request_line(0, "initialize", {"protocolVersion": "2025-06-18"}))
        (reply,) = await h.stdout.wait_for(1, timeout_seconds=3)
        assert anyio.current_time() - started < 2
    assert reason(reply) == "app_launch_failed" and "did not accept connections" in reply["error"]["message"]
    assert starter.calls == 1


@pytest.mark.httpx_only
async def test_no_launcher_configured_says_the_app_is_not_running(run_bridge: RunBridge) -> None:
    app = McpApp()
    app.up = False
    async with run_bridge(app) as h:
        h.stdin.feed(request_line(1))
        (reply,) = await h.stdout.wait_for(1)
    assert reason(reply) == "app_unreachable" and "not running" in reply["error"]["message"]


@pytest.mark.httpx_only
async def test_concurrent_refusals_share_one_ensure_running(run_bridge: RunBridge) -> None:
    app = McpApp(stateless=True)
    app.up = False
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(b"".join(request_line(i) for i in range(6)))
        messages = await h.stdout.wait_for(6)
    assert all("result" in m for m in messages) and starter.calls == 1


@pytest.mark.httpx_only
async def test_ensure_running_that_raises_gives_app_launch_failed(run_bridge: RunBridge) -> None:
    app = McpApp()
    app.up = False

    def broken() -> None:
        raise FileNotFoundError("no such app")

    async with run_bridge(app, ensure_running=broken) as h:
        h.stdin.feed(request_line(1))
        (reply,) = await h.stdout.wait_for(1)
    assert reason(reply) == "app_launch_failed"


@pytest.mark.httpx_only
async def test_no_retry_after_a_read_timeout_on_tools_call(run_bridge: RunBridge) -> None:
    app = McpApp()
    attempts = 0

    async def handle(request: httpx.Request) -> httpx.Response:
        nonlocal attempts
        if request.method == "POST" and json.loads(request.content).get("method") == "tools/call":
            attempts += 1
            raise httpx.ReadTimeout("timed out")
        return await app(request)

    starter = Starter(app)
    async with run_bridge(handle, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(init(0) + NOTIF_INIT + request_line(5, "tools/call", {"name": "slow"}))
        messages = await h.stdout.wait_for(2)
    assert reason(messages[1]) == "timeout" and attempts == 1 and starter.calls == 0


# -- the session rebuilt after an app restart -------------------------------------------------


@pytest.mark.parametrize("status", [404, 400])
async def test_lost_session_is_rebuilt_and_the_replayed_initialize_never_reaches_stdout(
    status: int, run_bridge: RunBridge, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    app = McpApp()
    app.unknown_session_status = status
    async with run_bridge(app) as h:
        h.stdin.feed(init(0) + NOTIF_INIT)
        await h.stdout.wait_for(1)
        with anyio.fail_after(5):  # the notification reached the app before it restarts
            while "notifications/initialized" not in [b.get("method") for b in app.bodies]:
                await anyio.sleep(0.005)
        app.restart()
        h.stdin.feed(request_line(12, "tools/list"))
        messages = await h.stdout.wait_for(2)
        await anyio.sleep(0.05)
    assert messages[1] == {"jsonrpc": "2.0", "id": 12, "result": {"instance": 2}}
    assert len(h.stdout.lines) == 2  # no replayed initialize result, nothing else
    replay = [b for b in app.bodies if b.get("method") == "initialize"][1]
    assert replay["id"] != 0 and replay["params"] == json.loads(init(0))["params"]
    methods = [b.get("method") for b in app.bodies]
    assert methods[-3:] == ["initialize", "notifications/initialized", "tools/list"]
    assert h.bridge.driver.rebuilds == 1
    # a normal event: logged, but at INFO, so the default level (warning) stays quiet
    (rebuilt,) = [record for record in caplog.records if "session was rebuilt" in record.getMessage()]
    assert rebuilt.levelno == logging.INFO


async def test_session_400_heuristic_can_be_switched_off(run_bridge: RunBridge) -> None:
    app = McpApp()
    app.unknown_session_status = 400
    async with run_bridge(app, session_400_heuristic=False) as h:
        h.stdin.feed(init(0) + NOTIF_INIT)
        await h.stdout.wait_for(1)
        app.restart()
        h.stdin.feed(request_line(12, "tools/list"))
        messages = await h.stdout.wait_for(2)
    assert messages[1]["error"]["message"] == "Bad Request: No valid session ID provided"  # passed through
    assert h.bridge.driver.rebuilds == 0


async def test_concurrent_failures_share_one_rebuild_and_list_changed_follows(run_bridge: RunBridge) -> None:
    app = McpApp(capabilities={"tools": {"listChanged": True}, "prompts": {}})
    async with run_bridge(app) as h:
        h.stdin.feed(init(0) + NOTIF_INIT)
        await h.stdout.wait_for(1)
        app.restart()
        h.stdin.feed(b"".join(request_line(i, "tools/list") for i in range(1, 6)))
        messages = await h.stdout.wait_for(7)
    replies = [m for m in messages[1:] if "id" in m]
    assert sorted(m["id"] for m in replies) == [1, 2, 3, 4, 5] and all("result" in m for m in replies)
    notices = [m for m in messages if m.get("method")]
    assert notices == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]  # tools only: prompts did not advertise it
    assert [b.get("method") for b in app.bodies].count("initialize") == 2
    assert h.bridge.driver.rebuilds == 1


async def test_rebuild_failing_gives_session_lost_and_the_next_request_tries_again(run_bridge: RunBridge) -> None:
    app = McpApp()
    refuse_initialize = True

    async def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and json.loads(request.content).get("method") == "initialize" and app.instance == 2 and refuse_initialize:
            return httpx.Response(500)
        return await app(request)

    async with run_bridge(handle) as h:
        h.stdin.feed(init(0) + NOTIF_INIT)
        await h.stdout.wait_for(1)
        app.restart()
        h.stdin.feed(request_line(12, "tools/list"))
        failed = (await h.stdout.wait_for(2))[1]
        assert failed["id"] == 12 and reason(failed) == "session_lost"
        refuse_initialize = False
        h.stdin.feed(request_line(13, "tools/list"))
        assert (await h.stdout.wait_for(3))[2] == {"jsonrpc": "2.0", "id": 13, "result": {"instance": 2}}


async def test_retry_that_is_lost_again_gives_session_lost_without_a_second_rebuild(run_bridge: RunBridge) -> None:
    app = McpApp()

    async def handle(request: httpx.Request) -> httpx.Response:
        response = await app(request)
        if request.method == "POST" and json.loads(request.content).get("method") == "initialize" and app.instance == 2:
            app.sessions.clear()  # the new session dies at once
        return response

    async with run_bridge(handle) as h:
        h.stdin.feed(init(0) + NOTIF_INIT)
        await h.stdout.wait_for(1)
        with anyio.fail_after(5):  # the handshake's notification reached the first instance
            while "notifications/initialized" not in [b.get("method") for b in app.bodies]:
                await anyio.sleep(0.01)
        app.restart()
        h.stdin.feed(request_line(12, "tools/list"))
        reply = (await h.stdout.wait_for(2))[1]
    assert reason(reply) == "session_lost"
    assert [b.get("method") for b in app.bodies].count("initialize") == 2


@pytest.mark.httpx_only
async def test_restart_with_downtime_and_a_rotated_token_is_recovered_in_one_request(run_bridge: RunBridge) -> None:
    """The app goes down, comes back on a new instance with a new token: relaunch, then
    rebuild (whose initialize is refreshed after a 401), then the request — one reply."""
    app = McpApp(token="t1")
    source = CountingSource("t1", "t2")
    starter = Starter(app)
    async with run_bridge(app, token_source=source, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(init(0) + NOTIF_INIT)
        await h.stdout.wait_for(1)
        app.up = False
        app.restart(token="t2")
        h.stdin.feed(request_line(20, "tools/list"))
        messages = await h.stdout.wait_for(2)
    assert messages[1] == {"jsonrpc": "2.0", "id": 20, "result": {"instance": 2}}
    assert starter.calls == 1 and source.fetches == 2


async def test_live_pid_in_the_discovery_file_is_waited_for_instead_of_launching_again(tmp_path: Path, run_bridge: RunBridge) -> None:
    """The app is starting (its pid lives) but does not listen yet: no second instance."""
    import os

    from bridge.app.discovery import write_discovery_file

    discovery = tmp_path / "mcp-endpoint.json"
    write_discovery_file(discovery, url=URL, pid=os.getpid())
    app = McpApp(stateless=True)
    app.up = False
    starter = Starter(app)
    async with run_bridge(
        app, url=None, discovery_file=discovery, ensure_running=starter, app_probe=starter.probe, launch_timeout_seconds=0.5
    ) as h:
        h.stdin.feed(request_line(1))
        (reply,) = await h.stdout.wait_for(1, timeout_seconds=3)
    assert reason(reply) == "app_launch_failed" and starter.calls == 0


async def test_launch_lock_is_released_whichever_thread_took_it(tmp_path: Path) -> None:
    """The cross-process lock is taken in a worker thread and released in the loop's
    thread; a lock tied to its thread would stay held and block the next launch."""
    import time

    from bridge.app.discovery import Endpoint
    from bridge.app.launcher import Launcher

    app = McpApp(stateless=True)
    starter = Starter(app)
    launcher = Launcher(Endpoint(url=URL), ensure_running=starter, timeout_seconds=2, lock_path=tmp_path / "launch.lock", probe=starter.probe)
    for busy in range(3):
        app.up = False
        async with anyio.create_task_group() as tg:
            for _ in range(busy):  # occupy the threads used before, so this round takes a new one
                tg.start_soon(anyio.to_thread.run_sync, time.sleep, 0.3)
            await anyio.sleep(0.05)
            with anyio.fail_after(1.5):
                await launcher.ensure_running()
    assert starter.calls == 3


@pytest.mark.httpx_only
async def test_401_when_no_token_was_sent_says_a_token_source_is_needed(tmp_path: Path, run_bridge: RunBridge) -> None:
    from bridge.app.discovery import write_discovery_file

    discovery = tmp_path / "mcp-endpoint.json"
    write_discovery_file(discovery, url=URL)  # no token in it
    async with run_bridge(McpApp(token="x", stateless=True), url=None, discovery_file=discovery) as h:
        h.stdin.feed(request_line(1))
        (reply,) = await h.stdout.wait_for(1)
    assert reason(reply) == "auth_rejected" and "the discovery file gave none" in reply["error"]["message"]


@pytest.mark.httpx_only
async def test_requests_queued_behind_a_failed_launch_share_its_failure(run_bridge: RunBridge) -> None:
    """One app launch for many waiting requests, also when it fails (docs/discovery.md, "Starting the app")."""
    app = McpApp(stateless=True)
    app.up = False
    starter = Starter(app, works=False)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe, launch_timeout_seconds=0.5) as h:
        started = anyio.current_time()
        h.stdin.feed(b"".join(request_line(i) for i in range(4)))
        messages = await h.stdout.wait_for(4, timeout_seconds=3)
        assert anyio.current_time() - started < 1.5  # one launch timeout, not four
    assert {reason(m) for m in messages} == {"app_launch_failed"} and starter.calls == 1


async def test_requests_queued_behind_a_failed_token_fetch_share_its_failure(run_bridge: RunBridge) -> None:
    from bridge.app.tokens import TokenSourceError

    class Failing:
        description = "failing source"
        fetches = 0

        async def fetch(self, context: TokenContext) -> str | None:
            Failing.fetches += 1
            await anyio.sleep(0.2)
            raise TokenSourceError("the keychain is locked")

    async with run_bridge(McpApp(stateless=True), token_source=Failing()) as h:
        h.stdin.feed(b"".join(request_line(i) for i in range(4)))
        messages = await h.stdout.wait_for(4, timeout_seconds=3)
    assert {reason(m) for m in messages} == {"auth_rejected"} and Failing.fetches == 1
    assert all("keychain is locked" in m["error"]["message"] for m in messages)


async def test_a_400_that_merely_mentions_a_session_parameter_is_passed_through(run_bridge: RunBridge) -> None:
    """The session-loss heuristic wants "session" *and* a sign it is unknown."""
    error = {"code": -32602, "message": "session_name required"}
    app = McpApp()

    async def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and json.loads(request.content).get("method") == "tools/call":
            return json_response({"jsonrpc": "2.0", "id": None, "error": error}, status=400)
        return await app(request)

    async with run_bridge(handle) as h:
        h.stdin.feed(init(0) + NOTIF_INIT + request_line(5, "tools/call", {"name": "x"}))
        messages = await h.stdout.wait_for(2)
    assert messages[1] == {"jsonrpc": "2.0", "id": 5, "error": error} and h.bridge.driver.rebuilds == 0


async def test_the_auth_route_client_builds_its_transport_only_when_a_source_posts() -> None:
    """A run whose token source never talks HTTP builds no transport (and imports no
    httpx); a context without one says so instead of sending anywhere."""
    from bridge.app.tokens import TokenSourceError
    from bridge.transport import AuthRouteClient

    client = AuthRouteClient(timeout_seconds=1)
    context = TokenContext(base_url=URL, post_json=client.post_json)
    assert context.base_url == URL and client._transport is None  # (the laziness is the point)
    await client.aclose()
    with pytest.raises(TokenSourceError, match="no HTTP exchange"):
        await TokenContext(base_url=URL).post_json(URL, {})

