"""Windows named pipes' two checks (``bridge/system/namedpipe.py``), with stand-ins for
``kernel32`` and ``advapi32`` that answer as Windows documents: the client's check of who
serves a pipe (its pid, its user's SID) and the server's first instance with a DACL for
the current user only. These run on every OS; no pipe is opened here (a real one is, on Windows:
tests/transport/test_pipe_windows.py)."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from bridge.system.namedpipe import (
    FILE_FLAG_FIRST_PIPE_INSTANCE,
    PIPE_REJECT_REMOTE_CLIENTS,
    PipeServer,
    PipeServerRefused,
    PipeUnavailable,
    check_pipe_server,
    create_pipe_instance,
    current_user_only_sddl,
    pipe_server_identity,
    process_user_sid,
)

ME = "S-1-5-21-1004336348-1177238915-682003330-1001"
OTHER = "S-1-5-21-1004336348-1177238915-682003330-1002"
PIPE = "\\\\.\\pipe\\mcp-app-bridge-myapp"
CURRENT_PROCESS = -1  # GetCurrentProcess's pseudo-handle


def _out(ref: Any, kind: Any) -> Any:
    return ctypes.cast(ref, ctypes.POINTER(kind)).contents


class FakeWindows:
    """``kernel32`` and ``advapi32`` in one: processes by pid with their users' SIDs, and
    pipe names already held. Records the handles it gave and the ones closed or freed."""

    def __init__(self, users: dict[int, str], *, my_pid: int = 10, server_pid: int = 0, held: set[str] | None = None) -> None:
        self.users, self.my_pid, self.server_pid = users, my_pid, server_pid
        self.held = held if held is not None else set()
        self.busy = False
        self.error = 0
        self.opened: list[int] = []
        self.closed: list[int | None] = []
        self.freed = 0
        self.created: list[tuple[str, int, int, str]] = []
        self._sids: list[Any] = []  # the SID buffers handed out (kept alive)
        self._descriptors: dict[int, str] = {}

    def last_error(self) -> int:
        return self.error

    # kernel32
    def GetNamedPipeServerProcessId(self, handle: int, out: Any) -> int:  # noqa: N802 (the Win32 name)
        _out(out, ctypes.c_ulong).value = self.server_pid
        return 1

    def GetCurrentProcess(self) -> int:  # noqa: N802
        return CURRENT_PROCESS

    def OpenProcess(self, access: int, inherit: bool, pid: int) -> int:  # noqa: N802
        if pid not in self.users:
            self.error = 87  # ERROR_INVALID_PARAMETER: no such process
            return 0
        self.opened.append(1000 + pid)
        return 1000 + pid

    def CloseHandle(self, handle: Any) -> int:  # noqa: N802
        self.closed.append(handle.value if isinstance(handle, ctypes.c_void_p) else handle)
        return 1

    def LocalFree(self, memory: Any) -> None:  # noqa: N802
        self.freed += 1
        self.error = 0  # a call that succeeds may reset the last error (Microsoft, GetLastError)

    def CreateNamedPipeW(self, name: str, open_mode: int, pipe_mode: int, instances: int, out_bytes: int,  # noqa: N802
                         in_bytes: int, timeout: int, attributes: Any) -> int:
        descriptor = ctypes.cast(attributes, ctypes.POINTER(ctypes.c_void_p * 2)).contents  # (nLength + pad, lpSecurityDescriptor)
        self.created.append((name, open_mode, pipe_mode, self._descriptors[int(descriptor[1] or 0)]))
        if open_mode & FILE_FLAG_FIRST_PIPE_INSTANCE and name in self.held:
            self.error = 5  # ERROR_ACCESS_DENIED
            return -1
        if self.busy:
            self.error = 231  # ERROR_PIPE_BUSY: every instance the name allows exists
            return -1
        return 4242

    # advapi32
    def OpenProcessToken(self, process: int, access: int, out: Any) -> int:  # noqa: N802
        pid = self.my_pid if process == CURRENT_PROCESS else process - 1000
        _out(out, ctypes.c_void_p).value = 5000 + pid
        return 1

    def GetTokenInformation(self, token: Any, kind: int, buffer: Any, size: Any, needed: Any) -> int:  # noqa: N802
        pointer_size = ctypes.sizeof(ctypes.c_void_p)
        if buffer is None:
            _out(needed, ctypes.c_ulong).value = 2 * pointer_size  # TOKEN_USER: Sid pointer, Attributes
            self.error = 122  # ERROR_INSUFFICIENT_BUFFER
            return 0
        sid = ctypes.create_unicode_buffer(self.users[token.value - 5000])
        self._sids.append(sid)
        ctypes.c_void_p.from_buffer(buffer).value = ctypes.addressof(sid)
        return 1

    def ConvertSidToStringSidW(self, sid: Any, out: Any) -> int:  # noqa: N802
        text = ctypes.create_unicode_buffer(ctypes.wstring_at(sid.value))  # LocalAlloc'd by Windows
        self._sids.append(text)
        _out(out, ctypes.c_void_p).value = ctypes.addressof(text)
        return 1

    def ConvertStringSecurityDescriptorToSecurityDescriptorW(self, sddl: str, revision: int, out: Any, size: Any) -> int:  # noqa: N802
        address = 7000 + len(self._descriptors)
        self._descriptors[address] = sddl
        _out(out, ctypes.c_void_p).value = address
        return 1


def test_the_pipes_server_is_named_by_its_pid_and_its_users_sid_and_the_handles_are_closed() -> None:
    windows = FakeWindows({10: ME, 77: ME}, server_pid=77)
    server = pipe_server_identity(windows, windows, 88)
    assert server == PipeServer(pid=77, sid=ME)
    assert process_user_sid(windows, windows, None) == ME
    assert windows.opened == [1077] and windows.closed == [5077, 1077, 5010], "each token and opened process closed (not the pseudo-handle)"
    assert windows.freed == 2, "each string SID freed with LocalFree"


def test_a_pipe_served_by_another_user_or_another_pid_gets_nothing() -> None:
    windows = FakeWindows({10: ME, 66: OTHER, 77: ME}, server_pid=66)
    squatter = pipe_server_identity(windows, windows, 88)
    with pytest.raises(PipeServerRefused, match="another user .*created the pipe name first"):
        check_pipe_server(squatter, own_sid=ME, expected_pid=None, pipe_name=PIPE)
    with pytest.raises(PipeServerRefused, match="served by pid 77, not by pid 78"):
        check_pipe_server(PipeServer(77, ME), own_sid=ME, expected_pid=78, pipe_name=PIPE)
    check_pipe_server(PipeServer(77, ME.lower().upper()), own_sid=ME, expected_pid=77, pipe_name=PIPE)
    check_pipe_server(PipeServer(77, ME), own_sid=ME, expected_pid=None, pipe_name=PIPE)


def test_a_server_that_cannot_be_asked_is_a_failure_not_a_pass() -> None:
    gone = FakeWindows({10: ME}, server_pid=66)  # the server process is not there to open
    with pytest.raises(PipeUnavailable, match=r"OpenProcess\(66\) failed \(error 87\)"):
        pipe_server_identity(gone, gone, 88, last_error=gone.last_error)
    nobody = FakeWindows({10: ME}, server_pid=0)
    with pytest.raises(PipeUnavailable, match="named no process"):
        pipe_server_identity(nobody, nobody, 88)


def test_the_dacl_admits_only_the_current_user() -> None:
    assert current_user_only_sddl(ME) == f"O:{ME}D:P(A;;GA;;;{ME})"
    for bad in ("", "WD", "S-1-5-21-1;(A;;GA;;;WD)", "Everyone"):
        with pytest.raises(ValueError, match="not a string SID"):
            current_user_only_sddl(bad)


def test_the_first_instance_refuses_a_name_held_already_and_carries_the_users_dacl() -> None:
    windows = FakeWindows({10: ME})
    handle = create_pipe_instance(windows, windows, PIPE, user_sid=ME, first=True, last_error=windows.last_error)
    assert handle == 4242
    ((name, open_mode, pipe_mode, sddl),) = windows.created
    assert name == PIPE and open_mode & FILE_FLAG_FIRST_PIPE_INSTANCE and pipe_mode & PIPE_REJECT_REMOTE_CLIENTS
    assert sddl == f"O:{ME}D:P(A;;GA;;;{ME})" and windows.freed == 1
    create_pipe_instance(windows, windows, PIPE, user_sid=ME, first=False)  # a further instance of its own
    assert not windows.created[-1][1] & FILE_FLAG_FIRST_PIPE_INSTANCE

    squatted = FakeWindows({10: ME}, held={PIPE})
    with pytest.raises(PipeServerRefused, match="held by another process already"):
        create_pipe_instance(squatted, squatted, PIPE, user_sid=ME, first=True, last_error=squatted.last_error)
    assert squatted.freed == 1, "the security descriptor is freed on failure too"


def test_create_pipe_instance_reads_the_last_error_before_localfree_can_reset_it() -> None:
    """The security descriptor is freed (LocalFree) after CreateNamedPipeW whatever happens;
    a LocalFree that succeeds may set the last error to 0. Read after it, a squatted name
    was an unexplained "error 0" instead of the squatter's refusal."""
    squatted = FakeWindows({10: ME}, held={PIPE})
    with pytest.raises(PipeServerRefused, match="held by another process already"):
        create_pipe_instance(squatted, squatted, PIPE, user_sid=ME, first=True, last_error=squatted.last_error)
    assert squatted.freed == 1 and squatted.error == 0, "LocalFree ran after the failure, and reset the error"
    busy = FakeWindows({10: ME})
    busy.busy = True
    with pytest.raises(PipeUnavailable, match=r"CreateNamedPipeW\(.*\) failed \(error 231\)"):
        create_pipe_instance(busy, busy, PIPE, user_sid=ME, first=False, last_error=busy.last_error)
