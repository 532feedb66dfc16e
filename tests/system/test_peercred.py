"""Peer credentials of a local socket (bridge/system/peercred.py): each OS's call with a
stand-in socket, and the real call on Linux."""

from __future__ import annotations

import os
import socket
import struct
import sys
from typing import Any

import pytest

from bridge.system.peercred import (
    LOCAL_PEERCRED,
    LOCAL_PEERPID,
    SOL_LOCAL,
    PeerCredentials,
    PeerCredentialsUnavailable,
    peer_credentials,
)


class FakeSocket:
    """Answers ``getsockopt`` from a table ``(level, option) -> bytes or OSError``, and
    records each call with its buffer length."""

    def __init__(self, answers: dict[tuple[int, int], Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[int, int, int]] = []

    def getsockopt(self, level: int, option: int, buflen: int) -> bytes:
        self.calls.append((level, option, buflen))
        answer = self.answers[(level, option)]
        if isinstance(answer, OSError):
            raise answer
        assert len(answer) <= buflen
        return bytes(answer)


LINUX_PEERCRED = (socket.SOL_SOCKET, getattr(socket, "SO_PEERCRED", 17))


def xucred(uid: int, *, version: int = 0) -> bytes:
    return struct.pack("=IIh", version, uid, 1).ljust(76, b"\0")


def test_linux_reads_struct_ucred() -> None:
    sock = FakeSocket({LINUX_PEERCRED: struct.pack("=iII", 4242, 1000, 1000)})
    assert peer_credentials(sock, platform="linux") == PeerCredentials(pid=4242, uid=1000)
    assert sock.calls == [(*LINUX_PEERCRED, 12)]


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (struct.pack("=iII", 0, 1000, 1000), "another pid namespace"),
        (b"\0" * 8, "8 bytes"),
        (OSError(95, "Operation not supported"), "Operation not supported"),
    ],
)
def test_linux_refuses_what_names_no_process(answer: Any, words: str) -> None:
    with pytest.raises(PeerCredentialsUnavailable, match=words):
        peer_credentials(FakeSocket({LINUX_PEERCRED: answer}), platform="linux")


def test_macos_reads_xucred_and_the_peer_pid() -> None:
    sock = FakeSocket({(SOL_LOCAL, LOCAL_PEERCRED): xucred(501), (SOL_LOCAL, LOCAL_PEERPID): struct.pack("=i", 777)})
    assert peer_credentials(sock, platform="darwin") == PeerCredentials(pid=777, uid=501)
    assert [call[:2] for call in sock.calls] == [(0, 1), (0, 2)]


def test_macos_refuses_an_unknown_xucred_version_and_a_missing_pid() -> None:
    with pytest.raises(PeerCredentialsUnavailable, match="version 3"):
        peer_credentials(FakeSocket({(SOL_LOCAL, LOCAL_PEERCRED): xucred(501, version=3)}), platform="darwin")
    no_pid = FakeSocket({(SOL_LOCAL, LOCAL_PEERCRED): xucred(501), (SOL_LOCAL, LOCAL_PEERPID): OSError(22, "Invalid argument")})
    with pytest.raises(PeerCredentialsUnavailable, match="Invalid argument"):
        peer_credentials(no_pid, platform="darwin")


def test_the_bsds_give_the_user_only() -> None:
    sock = FakeSocket({(SOL_LOCAL, LOCAL_PEERCRED): xucred(1001)})
    assert peer_credentials(sock, platform="freebsd14") == PeerCredentials(pid=None, uid=1001)


def test_an_os_without_the_call_is_a_refusal() -> None:
    with pytest.raises(PeerCredentialsUnavailable, match="not implemented on win32"):
        peer_credentials(FakeSocket({}), platform="win32")


@pytest.mark.skipif(not sys.platform.startswith(("linux", "darwin")), reason="a real Unix socket pair")
def test_the_real_call_names_this_process() -> None:
    if sys.platform == "win32":  # (for mypy --platform win32: the rest is POSIX code)
        pytest.skip("a real Unix socket pair")
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        if sys.platform.startswith("linux"):
            assert peer_credentials(left) == PeerCredentials(pid=os.getpid(), uid=os.geteuid())
        else:
            assert peer_credentials(left).uid == os.geteuid()
