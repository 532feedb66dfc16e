"""The listener check (``bridge/app/listener.py``): who listens on the app's port.

Three levels: the pure ``/proc/net/tcp`` parser on sample text; the check against real
sockets on 127.0.0.1 (held by this process, a child, a stranger's pid, another uid); and
the pool's hook, which must close a refused connection before a single byte is written.
Where a case needs another user, a listener (or the check itself) runs under a second uid
that a root test run can switch to; other runs skip those cases with that reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bridge
from bridge.app.listener import ACCEPT_WAIT_SECONDS, ListenerCheck
from bridge.app.procnet import LISTEN, TcpEntry, find_listeners, parse_proc_net_tcp
from bridge.app.sockdiag import parse_inet_diag
from bridge.core.errors import AppUnreachableError, BridgeError, ListenerUnverifiedError
from bridge.transport import pool as http11  # the own pool (was ``bridge/http11.py``)

linux = pytest.mark.linux_only("reads /proc")
as_root = pytest.mark.skipif(
    sys.platform == "win32" or os.geteuid() != 0, reason="needs root to run a process under a second uid"
)
#: The second user of these tests: a uid with no account (the kernel needs none to run a process).
OTHER_UID = 54_321

# Real lines of /proc/net/tcp and tcp6 (x86-64, little-endian), cut to the columns used.
TCP_SAMPLE = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 524 1 0000000020e7a5ab 100 0 0 10 0
   1: 0100007F:81A6 0100007F:874B 01 00000000:00000000 03:00000017 00000000  1000        0 0 3 000000001350645c
   2: 0100007F:874B 0100007F:81A6 01 00000000:00000000 03:00000017 00000000  1000        0 4711 3 000000001350645c
   3: garbage
"""
TCP6_SAMPLE = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:CBDB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 25175 1 00000000530a7831 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:C75E 01 00000000:00000000 00:00000000 00000000     0        0 0 1 000000001312c798 20 0 0 10 -1
"""


def test_ipv4_lines_parse_into_addresses_state_uid_and_inode() -> None:
    entries = parse_proc_net_tcp(TCP_SAMPLE, byteorder="little")
    assert len(entries) == 3  # the garbage line is skipped
    assert entries[0] == TcpEntry(
        local=(ipaddress.ip_address("0.0.0.0"), 2024), remote=(ipaddress.ip_address("0.0.0.0"), 0), state=LISTEN, uid=0, inode=524
    )
    assert entries[1].local == (ipaddress.ip_address("127.0.0.1"), 0x81A6)
    assert (entries[1].uid, entries[1].inode, entries[2].inode) == (1000, 0, 4711)


def test_ipv6_lines_parse_and_ipv4_mapped_addresses_read_as_ipv4() -> None:
    entries = parse_proc_net_tcp(TCP6_SAMPLE, byteorder="little")
    assert entries[0].local == (ipaddress.ip_address("::1"), 0xCBDB)
    assert (entries[0].state, entries[0].uid, entries[0].inode) == (LISTEN, 1001, 25175)
    assert entries[1].local == (ipaddress.ip_address("127.0.0.1"), 8080)


def test_a_big_endian_kernel_prints_the_words_the_other_way_round() -> None:
    line = "   0: 7F000001:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  7 0 99 1\n"
    (entry,) = parse_proc_net_tcp("header\n" + line, byteorder="big")
    assert entry.local == (ipaddress.ip_address("127.0.0.1"), 8080)


def test_the_exact_address_wins_over_wildcards_and_ipv4_connections_may_reach_a_dual_stack_listener() -> None:
    v4 = ipaddress.ip_address("127.0.0.1")

    def listening(address: str, uid: int) -> TcpEntry:
        return TcpEntry((ipaddress.ip_address(address), 80), (ipaddress.ip_address("0.0.0.0"), 0), LISTEN, uid, uid + 1)

    exact, anywhere, dual = listening("127.0.0.1", 1), listening("0.0.0.0", 2), listening("::", 3)
    assert find_listeners([anywhere, exact, dual], v4, 80) == [exact]
    assert find_listeners([anywhere, dual], v4, 80) == [anywhere, dual]
    assert find_listeners([anywhere], ipaddress.ip_address("::1"), 80) == []  # IPv4 wildcard: not for ::1
    assert find_listeners([exact], v4, 81) == []


# -- real sockets --------------------------------------------------------------------------


@pytest.fixture
def listening_socket() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server
    server.close()


@contextlib.contextmanager
def connect(port: int, server: socket.socket | None = None) -> Iterator[socket.socket]:
    """A connection to 127.0.0.1:``port``; given the listening ``server`` (in this
    process), the connection is accepted too, as a real app does (the psutil backend checks
    the accepted side)."""
    client = socket.create_connection(("127.0.0.1", port), timeout=5)
    accepted = server.accept()[0] if server is not None else None
    try:
        yield client
    finally:
        client.close()
        if accepted is not None:
            accepted.close()


def check(expected_pid: int | None = None, **options: object) -> ListenerCheck:
    return ListenerCheck(lambda port: expected_pid, app_name="TestApp", **options)  # type: ignore[arg-type]


@pytest.fixture
def other_process() -> Iterator[subprocess.Popen[bytes]]:
    """A live process of this user that holds no socket (a pid reused by something else)."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def start_listener(code_prefix: str = "", **popen: object) -> tuple[subprocess.Popen[bytes], int]:
    """A child that listens on 127.0.0.1 and prints its port; ``popen`` may set ``user``."""
    code = code_prefix + textwrap.dedent(
        """
        import socket, sys, time
        s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
        print(s.getsockname()[1], flush=True)
        while True:
            c, _ = s.accept(); data = c.recv(65536); print(len(data), flush=True); c.close()
        """
    )
    process = subprocess.Popen(["/usr/bin/python3" if popen else sys.executable, "-c", code], stdout=subprocess.PIPE, **popen)  # type: ignore[call-overload]
    assert process.stdout is not None
    return process, int(process.stdout.readline())


@linux
@pytest.mark.parametrize("backend", ["proc", "proc-text", "psutil"])
def test_this_users_listener_held_by_the_named_pid_passes(listening_socket: socket.socket, backend: str) -> None:
    if backend == "psutil":
        pytest.importorskip("psutil")
    port = listening_socket.getsockname()[1]
    with connect(port, listening_socket) as client:
        check(os.getpid(), backend=backend).verify_socket(client)
        check(None, backend=backend).verify_socket(client)
    check(os.getpid(), backend=backend).verify_address("127.0.0.1", port)
    check(os.getpid(), backend=backend).verify_address("localhost", port)  # nothing on ::1: fine


@pytest.mark.process
@linux
@pytest.mark.parametrize("backend", ["proc", "proc-text", "psutil"])
def test_a_listener_not_held_by_the_named_pid_is_refused_with_both_pids_in_the_message(
    listening_socket: socket.socket, other_process: subprocess.Popen[bytes], backend: str
) -> None:
    if backend == "psutil":
        pytest.importorskip("psutil")
    port = listening_socket.getsockname()[1]
    with connect(port, listening_socket) as client, pytest.raises(ListenerUnverifiedError) as caught:
        check(other_process.pid, backend=backend).verify_socket(client)
    message = caught.value.message
    assert f"held by pid {os.getpid()}" in message and f"not by pid {other_process.pid}" in message, message
    assert f"127.0.0.1:{port}" in message and "no credential" in message
    assert caught.value.reason == "listener_unverified" and not caught.value.recoverable


@pytest.mark.process
@linux
def test_a_listener_held_by_a_child_of_the_named_pid_passes() -> None:
    """An app may serve from a worker process: the discovery file names the parent."""
    child, port = start_listener()
    try:
        with connect(port) as client:
            check(os.getpid()).verify_socket(client)  # this test process is the child's parent
            with pytest.raises(ListenerUnverifiedError, match=f"held by pid {child.pid}"):
                check(child.pid + 10_000_000).verify_socket(client)  # a pid that is nobody's parent
    finally:
        child.kill()
        child.wait()


@pytest.mark.process
@linux
@as_root
@pytest.mark.parametrize("backend", ["proc", "proc-text", "psutil"])
def test_another_users_listener_is_refused_and_the_message_says_whose_it_is(backend: str) -> None:
    if backend == "psutil":
        pytest.importorskip("psutil")
    squatter, port = start_listener(user=OTHER_UID, group=OTHER_UID)
    try:
        with connect(port) as client, pytest.raises(ListenerUnverifiedError) as caught:
            check(None, backend=backend).verify_socket(client)
        expected = f"pid {squatter.pid}" if backend == "psutil" else f"uid {OTHER_UID}"
        assert expected in caught.value.message and "not to the user running the bridge" in caught.value.message
        assert "--no-verify-listener" in caught.value.message
        with pytest.raises(ListenerUnverifiedError, match="not to the user running the bridge"):
            check(None, backend=backend).verify_address("127.0.0.1", port)
        assert squatter.stdout is not None
        assert squatter.stdout.readline() == b"0\n"  # it saw the connection close, and not one byte
    finally:
        squatter.kill()
        squatter.wait()


@pytest.mark.process
@linux
@as_root
@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="needs a Python that the second user may run")
def test_run_as_a_second_user_the_bridge_refuses_roots_listener(listening_socket: socket.socket) -> None:
    """The same check from a bridge that is not root: it may not read root's /proc/PID/fd.
    (The package is copied where that user may read it; the check needs the standard library only.)"""
    port = listening_socket.getsockname()[1]
    shared = Path(tempfile.mkdtemp(prefix="bridge-second-user-"))
    shared.chmod(0o755)
    shutil.copytree(Path(bridge.__file__).parent, shared / "bridge", ignore=shutil.ignore_patterns("__pycache__"))
    for path in [shared / "bridge", *(shared / "bridge").iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    code = textwrap.dedent(
        f"""
        import socket, sys
        from bridge.app.listener import ListenerCheck
        from bridge.core.errors import ListenerUnverifiedError
        c = socket.create_connection(("127.0.0.1", {port}))
        try:
            ListenerCheck(lambda port: {os.getpid()}).verify_socket(c)
        except ListenerUnverifiedError as e:
            print(e.message)
        else:
            print("PASSED")
        """
    )
    try:
        result = subprocess.run(
            ["/usr/bin/python3", "-c", code], user=OTHER_UID, group=OTHER_UID, capture_output=True, timeout=30,
            cwd="/", env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(shared), "PYTHONDONTWRITEBYTECODE": "1"},
        )
    finally:
        shutil.rmtree(shared)
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert "belongs to uid 0" in out and f"(uid {OTHER_UID})" in out, out


@linux
def test_nothing_listening_is_reported_as_such_before_a_connection() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening
        with pytest.raises(ListenerUnverifiedError) as caught:
            check(None).verify_address("127.0.0.1", port)
    assert caught.value.nothing_listens


def test_a_sock_diag_answer_parses_into_the_same_entries() -> None:
    import struct

    sockid = struct.pack(">HH16s16s", 8765, 0, bytes([127, 0, 0, 1]).ljust(16, b"\0"), bytes(16)) + bytes(12)
    body = bytes([2, LISTEN, 0, 0]) + sockid + struct.pack("=IIIII", 0, 0, 128, 1000, 4242)
    message = struct.pack("=IHHII", 16 + len(body), 20, 2, 1, 0) + body
    entries, done = parse_inet_diag(message + struct.pack("=IHHII", 20, 2, 0, 1, 0) + b"\xfe\xff\xff\xff")
    assert done and entries == [
        TcpEntry((ipaddress.ip_address("127.0.0.1"), 8765), (ipaddress.ip_address("0.0.0.0"), 0), LISTEN, 1000, 4242)
    ]
    assert parse_inet_diag(message) == (entries, False)


def test_when_the_os_will_not_say_the_check_refuses(listening_socket: socket.socket, tmp_path: Path) -> None:
    port = listening_socket.getsockname()[1]
    (tmp_path / "net" / "tcp").mkdir(parents=True)  # not readable as a file
    with connect(port) as client, pytest.raises(ListenerUnverifiedError, match="is not readable") as caught:
        check(None, backend="proc", proc_root=str(tmp_path)).verify_socket(client)
    assert "--no-verify-listener" in caught.value.message  # the check cannot work here: the way out is named


@pytest.mark.parametrize("backend", ["proc", "psutil"])
def test_a_connection_accepted_into_a_listener_gone_since_is_the_app_going_away(
    listening_socket: socket.socket, tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An app restart: the kernel accepted the connection into the backlog, then the app
    closed its listener; the check sees no listener. That is the app going away
    (``app_unreachable``, recoverable: the request waits for the app), not "give
    --no-verify-listener", which is said only of a listener that is someone else's."""
    port = listening_socket.getsockname()[1]
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(TCP_SAMPLE.splitlines()[0] + "\n")  # no listener (any more)
    if backend == "psutil":
        psutil = pytest.importorskip("psutil")
        monkeypatch.setattr(psutil, "net_connections", lambda kind: [])
    with connect(port) as client, pytest.raises(AppUnreachableError) as caught:
        check(None, backend=backend, proc_root=str(tmp_path)).verify_socket(client)
    assert caught.value.recoverable and caught.value.reason == "app_unreachable"
    assert "no socket listens there now" in caught.value.message and "nothing was sent" in caught.value.message
    assert "--no-verify-listener" not in caught.value.message


# -- the pool's hook -------------------------------------------------------------------------




@pytest.mark.anyio
async def test_a_refused_connection_is_closed_before_one_byte_is_written_and_never_pooled() -> None:
    received: list[bytes] = []
    connections = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        data = await reader.read(65536)
        received.append(data)
        if data:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    verdicts = ["refuse", "pass"]
    seen: list[int] = []

    def verify(sock: socket.socket) -> None:
        seen.append(sock.getpeername()[1])
        if verdicts.pop(0) == "refuse":
            raise ListenerUnverifiedError("not the app")

    pool = http11.Http11Pool(max_connections=1, connect_timeout_seconds=5, pool_timeout_seconds=5, verify_connection=verify)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        with pytest.raises(ListenerUnverifiedError):
            await pool.request("POST", url, [("Authorization", "Bearer secret-token")], b"{}", read_timeout_seconds=5)
        response = await pool.request("POST", url, [], b"{}", read_timeout_seconds=5)  # the one slot is free again
        assert await response.aread() == b"ok"
        await response.aclose()
        for _ in range(200):
            if len(received) == 2:
                break
            await asyncio.sleep(0.01)
    finally:
        await pool.aclose()
        server.close()
        await server.wait_closed()
    assert seen == [port, port] and connections == 2
    assert received[0] == b""  # the refused connection carried nothing
    assert b"secret-token" not in b"".join(received)


def fake_proc(root: Path, port: int, *, app_flags: int) -> None:
    """A /proc where this user's socket listens on ``port`` (inode 777) and no process holds
    it, and pid 4242 (the app) has the given ``flags`` (field 9 of its stat)."""
    if sys.platform != "linux":  # its marker skips it first; this tells mypy --platform
        pytest.skip("a /proc of Linux")
    (root / "net").mkdir()
    listen = f"   0: 0100007F:{port:04X} 00000000:0000 0A 00000000:00000000 00:00000000 00000000 {os.geteuid():5d}        0 777 1 0\n"
    (root / "net" / "tcp").write_text(TCP_SAMPLE.splitlines()[0] + "\n" + listen)
    (root / "4242" / "fd").mkdir(parents=True)
    (root / "4242" / "stat").write_text(f"4242 (app) S 1 4242 4242 0 -1 {app_flags} 0 0 0 0\n")


@pytest.mark.parametrize("exiting", [True, False])
def test_a_named_pid_that_is_exiting_means_the_app_is_going_away_and_the_request_may_wait_for_it(
    listening_socket: socket.socket, tmp_path: Path, exiting: bool
) -> None:
    """Found by the soak: a connection made while the app shuts down reaches a listener that
    its exiting process (PF_EXITING, fds being closed) no longer holds, and no process does.
    That is "app unreachable" (recoverable: the request waits for the app, and its next
    connection is checked afresh), not a squatter. The same listener while the named pid is
    not exiting stays refused."""
    port = listening_socket.getsockname()[1]
    fake_proc(tmp_path, port, app_flags=0x4 if exiting else 0)
    expected: type[BridgeError] = AppUnreachableError if exiting else ListenerUnverifiedError
    with connect(port) as client, pytest.raises(expected) as caught:
        check(4242, backend="proc", proc_root=str(tmp_path)).verify_socket(client)
    assert "pid 4242" in caught.value.message and ("nothing was sent" if exiting else "no credential") in caught.value.message
    assert caught.value.recoverable is exiting  # type: ignore[attr-defined]


def test_a_connection_the_app_reset_at_once_is_app_unreachable_not_a_bridge_failure() -> None:
    """Found by the soak: getpeername() on a connection the app reset right away raised
    ENOTCONN out of the check, which the client saw as bridge_error."""
    with socket.socket() as unconnected, pytest.raises(AppUnreachableError) as caught:
        check(None, backend="proc").verify_socket(unconnected)
    assert caught.value.recoverable and "nothing was sent" in caught.value.message


# -- localhost: the connection the bytes go on is the one verified ---------------------------

_RECORDING_LISTENER = textwrap.dedent(
    """
    import socket, sys
    host, port = sys.argv[1], int(sys.argv[2])
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((host, port)); s.listen()
    print("LISTENING", flush=True)
    body = b'{"token": "from-' + host.encode() + b'"}'
    while True:
        c, _ = s.accept(); c.settimeout(2); data = b""
        try:
            while b"\\r\\n\\r\\n" not in data:
                more = c.recv(65536)
                if not more:
                    break
                data += more
            head, _, received = data.partition(b"\\r\\n\\r\\n")
            length = [int(line.split(b":")[1]) for line in head.split(b"\\r\\n") if line.lower().startswith(b"content-length:")]
            while length and len(received) < length[0]:
                more = c.recv(65536)
                if not more:
                    break
                received += more
                data += more
            if data:
                c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: "
                          + str(len(body)).encode() + b"\\r\\n\\r\\n" + body)
        except OSError:
            pass
        print(data.hex(), flush=True); c.close()
    """
)


def _recording_listener(host: str, port: int, **popen: object) -> subprocess.Popen[bytes]:
    process: subprocess.Popen[bytes] = subprocess.Popen(
        ["/usr/bin/python3" if popen else sys.executable, "-c", _RECORDING_LISTENER, host, str(port)],
        stdout=subprocess.PIPE, cwd="/", **popen,  # type: ignore[call-overload]
    )
    assert process.stdout is not None and process.stdout.readline() == b"LISTENING\n"
    return process


def _received(process: subprocess.Popen[bytes]) -> bytes:
    process.kill()
    out, _ = process.communicate(timeout=10)
    return b"".join(bytes.fromhex(line) for line in out.decode().split())


@pytest.mark.process
@linux
@as_root
def test_the_auth_client_sends_the_secret_only_on_a_verified_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """``localhost`` resolves to ::1 first (as on most desktops); another user listens on
    [::1]:PORT, this user's app on 127.0.0.1:PORT. The bridge's client for token
    sources (the auth route's ``post_json``) must not write to ::1: it connects, sees a stranger's
    listener, closes, and sends on the verified 127.0.0.1 connection."""
    from bridge.core.config import BridgeConfig
    from bridge.serve.parts import build_parts

    app = socket.socket()
    app.bind(("127.0.0.1", 0))
    port = app.getsockname()[1]
    app.close()
    ours = _recording_listener("127.0.0.1", port)
    stranger = _recording_listener("::1", port, user=OTHER_UID, group=OTHER_UID)
    real = socket.getaddrinfo

    def localhost_both(host: object, *args: object, **kwargs: object) -> list[Any]:
        if host in ("localhost", b"localhost"):
            return real("::1", *args, **kwargs) + real("127.0.0.1", *args, **kwargs)  # type: ignore[arg-type]
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", localhost_both)
    url = f"http://localhost:{port}/mcp"
    upstream = build_parts(BridgeConfig(url=url)).upstream  # as the bridge builds it

    async def post() -> object:
        try:
            status, body = await upstream.token_context().post_json(f"http://localhost:{port}/auth", {"secret": "s3cret-for-the-app"})
            assert status == 200
            return json.loads(body)
        finally:
            await upstream.aclose()

    try:
        answer = asyncio.run(post())
    finally:
        to_stranger, to_us = _received(stranger), _received(ours)
    assert b"s3cret" not in to_stranger and to_stranger == b"", to_stranger[:200]
    assert b"s3cret-for-the-app" in to_us
    assert answer == {"token": "from-127.0.0.1"}


@linux
def test_a_shorter_wait_for_the_accept_is_kept(listening_socket: socket.socket) -> None:
    """A caller with a deadline of its own (the running-app start's 1 s) passes a shorter
    wait: a connection nobody accepts is refused within it, not after ACCEPT_WAIT_SECONDS."""
    pytest.importorskip("psutil")
    import threading

    port = listening_socket.getsockname()[1]
    outcome: list[BaseException] = []

    def verify() -> None:
        with connect(port) as client:
            try:
                check(os.getpid(), backend="psutil").verify_socket(client, wait_seconds=0.05)
            except BaseException as exc:  # noqa: BLE001 (handed to the test's thread)
                outcome.append(exc)

    worker = threading.Thread(target=verify, daemon=True)
    worker.start()
    worker.join(timeout=ACCEPT_WAIT_SECONDS * 0.75)  # the full wait would still be going on
    assert not worker.is_alive(), "the check waited past the shorter bound"
    assert len(outcome) == 1 and isinstance(outcome[0], ListenerUnverifiedError)
    listening_socket.accept()[0].close()  # the connection, still queued


def test_psutil_checks_the_connections_own_server_side_and_waits_for_the_accept(
    listening_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The psutil backend (macOS, Windows) looks at the socket that accepted the
    connection, not only at who listens: a connection nobody of this user has accepted is
    refused after the wait; one accepted a moment later passes."""
    pytest.importorskip("psutil")
    import threading

    import bridge.app.listener as listener

    port = listening_socket.getsockname()[1]
    monkeypatch.setattr(listener, "ACCEPT_WAIT_SECONDS", 0.3)
    with connect(port) as client, pytest.raises(ListenerUnverifiedError, match="accepted the connection"):
        check(os.getpid(), backend="psutil").verify_socket(client)
    listening_socket.accept()[0].close()  # that first connection, still queued
    monkeypatch.setattr(listener, "ACCEPT_WAIT_SECONDS", 5.0)
    with connect(port) as client:
        accepted: list[socket.socket] = []
        timer = threading.Timer(0.2, lambda: accepted.append(listening_socket.accept()[0]))
        timer.start()
        try:
            asyncio.run(check(os.getpid(), backend="psutil").verify_connection(client))
        finally:
            timer.join()
            for sock in accepted:
                sock.close()
    assert accepted, "the check returned before the app accepted the connection"
