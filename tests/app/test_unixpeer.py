"""The peer check of a Unix-socket connection (bridge/app/unixpeer.py): same user, the
discovery file's pid (or a child of it), that pid's start time; and Endpoint telling which
discovery file describes which socket."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from bridge.app.discovery import (
    Discovery,
    DiscoveryError,
    Endpoint,
    process_start_time,
    read_discovery_file,
    write_discovery_file,
)
from bridge.app.unixpeer import UnixPeerCheck
from bridge.core.errors import ListenerUnverifiedError
from bridge.core.unixurl import unix_url
from bridge.system.peercred import PeerCredentials, PeerCredentialsUnavailable

ME = 1000


class Named:
    """A stand-in socket: only ``getpeername``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def getpeername(self) -> str:
        return self.path


def check(peer: PeerCredentials | Exception, discovery: Discovery | None, proc_root: str = "/proc") -> UnixPeerCheck:
    def credentials(sock: Any) -> PeerCredentials:
        if isinstance(peer, Exception):
            raise peer
        return peer

    return UnixPeerCheck(lambda path: discovery, app_name="MyApp", credentials=credentials, euid=ME, proc_root=proc_root)


def test_the_apps_own_process_passes() -> None:
    started = process_start_time(os.getpid())
    discovery = Discovery(url="http+unix://%2Fr%2Fa.sock/mcp", pid=os.getpid(), pid_start_time=started)
    check(PeerCredentials(pid=os.getpid(), uid=ME), discovery).verify_socket(Named("/r/a.sock"))
    check(PeerCredentials(pid=12345, uid=ME), None).verify_socket(Named("/r/a.sock"))  # no pid named: the user is enough


def test_another_user_is_refused_with_both_uids() -> None:
    with pytest.raises(ListenerUnverifiedError, match=r"MyApp could not be verified at the Unix socket /r/a.sock: .*\(pid 7, uid 0\) belongs to another user.*\(uid 1000\)"):
        check(PeerCredentials(pid=7, uid=0), None).verify_socket(Named("/r/a.sock"))


def test_a_process_that_is_not_the_named_pid_is_refused() -> None:
    discovery = Discovery(url="http+unix://%2Fr%2Fa.sock/mcp", pid=os.getpid())
    with pytest.raises(ListenerUnverifiedError, match=f"served by pid 999999, not by pid {os.getpid()}"):
        check(PeerCredentials(pid=999_999, uid=ME), discovery).verify_socket(Named("/r/a.sock"))


def test_a_reused_pid_is_refused_by_its_start_time() -> None:
    discovery = Discovery(url="http+unix://%2Fr%2Fa.sock/mcp", pid=os.getpid(), pid_start_time=1.0)
    with pytest.raises(ListenerUnverifiedError, match="started at another time"):
        check(PeerCredentials(pid=os.getpid(), uid=ME), discovery).verify_socket(Named("/r/a.sock"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the ancestry comes from /proc")
def test_a_child_of_the_named_pid_passes_on_linux(tmp_path: Path) -> None:
    for pid, parent in ((300, 200), (200, 100), (100, 1)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (python) S {parent} 0 0\n")
    discovery = Discovery(url="http+unix://%2Fr%2Fa.sock/mcp", pid=os.getpid())
    named = Discovery(url=discovery.url, pid=100)
    # 300 descends from 100: the ancestry the check walks
    assert check(PeerCredentials(pid=300, uid=ME), named, str(tmp_path))._ancestors(300) == [200, 100, 1]
    with pytest.raises(ListenerUnverifiedError, match="served by pid 300"):
        check(PeerCredentials(pid=300, uid=ME), discovery, str(tmp_path)).verify_socket(Named("/r/a.sock"))


def test_an_os_that_will_not_say_is_a_refusal() -> None:
    with pytest.raises(ListenerUnverifiedError, match="not implemented on plan9.*--no-verify-listener"):
        check(PeerCredentialsUnavailable("peer credentials of a local socket are not implemented on plan9"), None).verify_socket(Named("/r/a.sock"))
    discovery = Discovery(url="http+unix://%2Fr%2Fa.sock/mcp", pid=42)
    with pytest.raises(ListenerUnverifiedError, match="does not tell the serving process's pid"):
        check(PeerCredentials(pid=None, uid=ME), discovery).verify_socket(Named("/r/a.sock"))


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX") or sys.platform == "win32", reason="a real Unix socket")
def test_the_real_peer_of_a_socket_this_process_serves_is_this_process(tmp_path: Path) -> None:
    if sys.platform == "win32":  # (for mypy --platform win32: the rest is POSIX code)
        pytest.skip("a real Unix socket")
    path = str(tmp_path / "a.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    client = socket.socket(socket.AF_UNIX)
    try:
        client.connect(path)
        discovery = Discovery(url=unix_url(path), pid=os.getpid(), pid_start_time=process_start_time(os.getpid()))
        UnixPeerCheck(lambda where: discovery if where == path else None).verify_socket(client)
        other = Discovery(url=unix_url(path), pid=999_999)  # not this process, nor an ancestor
        with pytest.raises(ListenerUnverifiedError, match=f"served by pid {os.getpid()}"):
            UnixPeerCheck(lambda where: other).verify_socket(client)
    finally:
        client.close()
        server.close()


def test_the_discovery_file_may_name_a_socket_and_endpoint_maps_it(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    path = folder / "mcp-endpoint.json"
    url = unix_url("/run/user/1000/demo/mcp.sock", "/mcp")
    write_discovery_file(path, url=url, token="t")
    assert read_discovery_file(path).url == url
    endpoint = Endpoint(discovery_file=path)
    assert endpoint.url() == url
    described = endpoint.discovery_for_socket("/run/user/1000/demo/mcp.sock")
    assert described is not None and described.pid == os.getpid()
    assert endpoint.discovery_for_socket("/elsewhere.sock") is None
    path.write_text(json.dumps({"url": "http+unix://relative.sock/mcp", "pid": os.getpid()}))
    path.chmod(0o600)
    with pytest.raises(DiscoveryError, match="must be absolute"):
        read_discovery_file(path)
    with pytest.raises(DiscoveryError, match="must be absolute"):
        write_discovery_file(path, url="http+unix://relative.sock/mcp")


def test_a_restart_on_the_same_socket_is_seen_by_reading_the_file_again() -> None:
    """The discovery file as first read names the old pid; the peer is the restarted app:
    the check reads the file again once (``refresh``) before refusing."""
    old = Discovery(url="http+unix://%2Fr%2Fa.sock/mcp", pid=999_999)
    new = Discovery(url=old.url, pid=os.getpid(), pid_start_time=process_start_time(os.getpid()))
    current = [old]
    refreshed: list[bool] = []

    def refresh() -> None:
        refreshed.append(True)
        current[0] = new

    peer = PeerCredentials(pid=os.getpid(), uid=ME)
    UnixPeerCheck(lambda path: current[0], credentials=lambda sock: peer, euid=ME, refresh=refresh).verify_socket(Named("/r/a.sock"))
    assert refreshed == [True]
    with pytest.raises(ListenerUnverifiedError, match="served by pid"):
        UnixPeerCheck(lambda path: old, credentials=lambda sock: peer, euid=ME, refresh=lambda: None).verify_socket(Named("/r/a.sock"))
