"""The bridge's Windows decisions (bridge/system/winapi.py), run on every OS with stand-ins for the
Win32 API: which standard handles a windowed app adopts, leaving the client's job object,
the parent watchdog's wait, and the pid check."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from typing import Any

import pytest

from bridge.system import winapi

INVALID = 2**64 - 1  # INVALID_HANDLE_VALUE as a 64-bit c_void_p


def test_a_windowed_app_adopts_every_handle_the_client_gave_it() -> None:
    handles = {-10: 0x44, -11: 0x48, -12: 0x4C}
    plan = winapi.std_handles_to_adopt(lambda fd: False, handles.get, INVALID)
    assert plan == [(0, 0x44), (1, 0x48), (2, 0x4C)]


def test_open_descriptors_are_kept_and_their_handles_never_asked_for() -> None:
    asked: list[int] = []

    def get_std_handle(std_id: int) -> int:
        asked.append(std_id)
        return 0x50

    plan = winapi.std_handles_to_adopt(lambda fd: fd != 2, get_std_handle, INVALID)
    assert plan == [(2, 0x50)]
    assert asked == [-12]


@pytest.mark.parametrize("missing", [None, 0, INVALID])
def test_no_handle_or_an_invalid_one_is_not_adopted(missing: int | None) -> None:
    """A double click: no pipes at all; claim_stdio then fails on fd 0 and says why."""
    handles = {-10: missing, -11: 0x48, -12: missing}
    assert winapi.std_handles_to_adopt(lambda fd: False, handles.get, INVALID) == [(1, 0x48)]


class RecordingPopen:
    def __init__(self, refuse: int = 0) -> None:
        self.calls: list[tuple[list[str], dict[str, Any]]] = []
        self.refuse = refuse

    def __call__(self, command: list[str], **options: Any) -> str:
        self.calls.append((command, options))
        if len(self.calls) <= self.refuse:
            raise PermissionError(5, "Access is denied")
        return "process"


def test_the_app_is_started_outside_the_clients_job_detached_in_its_own_group() -> None:
    popen = RecordingPopen()
    assert winapi.spawn_outside_job(popen, ["MyApp.exe"], {"close_fds": True}) == "process"
    ((command, options),) = popen.calls
    assert command == ["MyApp.exe"] and options["close_fds"] is True
    flags = options["creationflags"]
    assert flags & winapi.CREATE_BREAKAWAY_FROM_JOB
    assert flags & winapi.DETACHED_PROCESS and flags & winapi.CREATE_NEW_PROCESS_GROUP


def test_a_job_that_forbids_breaking_away_still_gets_the_app_started_inside_it() -> None:
    popen = RecordingPopen(refuse=1)
    assert winapi.spawn_outside_job(popen, ["MyApp.exe"], {}) == "process"
    first, second = (options["creationflags"] for _, options in popen.calls)
    assert first & winapi.CREATE_BREAKAWAY_FROM_JOB
    assert second == winapi.CREATE_NEW_PROCESS_GROUP | winapi.DETACHED_PROCESS


def test_a_start_that_fails_both_ways_raises() -> None:
    with pytest.raises(OSError):
        winapi.spawn_outside_job(RecordingPopen(refuse=2), ["MyApp.exe"], {})


class FakeKernel32:
    def __init__(self, handle: int, exit_code: int = winapi.STILL_ACTIVE, query_ok: bool = True) -> None:
        self.handle, self.exit_code, self.query_ok = handle, exit_code, query_ok
        self.calls: list[tuple[Any, ...]] = []

    def OpenProcess(self, access: int, inherit: bool, pid: int) -> int:  # noqa: N802 - Win32's name
        self.calls.append(("OpenProcess", access, inherit, pid))
        return self.handle

    def WaitForSingleObject(self, handle: int, milliseconds: int) -> int:  # noqa: N802
        self.calls.append(("WaitForSingleObject", handle, milliseconds))
        return 0

    def GetExitCodeProcess(self, handle: int, code: Any) -> int:  # noqa: N802
        self.calls.append(("GetExitCodeProcess", handle))
        code._obj.value = self.exit_code  # what a byref(c_ulong) points to
        return int(self.query_ok)

    def CloseHandle(self, handle: int) -> int:  # noqa: N802
        self.calls.append(("CloseHandle", handle))
        return 1


def test_the_watchdog_waits_on_the_parents_handle_then_closes_it_and_shuts_down() -> None:
    kernel32 = FakeKernel32(handle=0x7C)
    gone: list[str] = []
    wait = winapi.parent_waiter(kernel32, 4242, lambda: gone.append("gone"))
    assert wait is not None
    assert kernel32.calls == [("OpenProcess", winapi.SYNCHRONIZE, False, 4242)]
    assert gone == []  # nothing happens until the thread runs the wait
    wait()
    assert kernel32.calls[1:] == [("WaitForSingleObject", 0x7C, winapi.INFINITE), ("CloseHandle", 0x7C)]
    assert gone == ["gone"]


def test_a_parent_that_cannot_be_opened_is_not_watched() -> None:
    assert winapi.parent_waiter(FakeKernel32(handle=0), 4242, lambda: None) is None


@pytest.mark.parametrize(
    ("handle", "exit_code", "query_ok", "alive"),
    [(0x10, winapi.STILL_ACTIVE, True, True), (0x10, 0, True, False), (0x10, winapi.STILL_ACTIVE, False, False), (0, 0, True, False)],
)
def test_pid_is_alive_only_while_the_process_has_no_exit_code(handle: int, exit_code: int, query_ok: bool, alive: bool) -> None:
    kernel32 = FakeKernel32(handle, exit_code, query_ok)
    assert winapi.pid_is_alive(kernel32, 4242) is alive
    opened = [call for call in kernel32.calls if call[0] == "OpenProcess"]
    assert opened == [("OpenProcess", winapi.PROCESS_QUERY_LIMITED_INFORMATION, False, 4242)]
    closed = [call for call in kernel32.calls if call[0] == "CloseHandle"]
    assert closed == ([("CloseHandle", handle)] if handle else [])


def test_byref_stand_in_reaches_the_c_ulong() -> None:
    """The fake above writes through ``byref(...)._obj``; make sure that is the object."""
    code = ctypes.c_ulong()
    ctypes.byref(code)._obj.value = 7  # type: ignore[attr-defined]
    assert code.value == 7


@pytest.mark.windows_only("subprocess has the Win32 creation flags only there")
def test_the_flags_are_the_ones_subprocess_knows() -> None:
    assert winapi.CREATE_NEW_PROCESS_GROUP == subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined,unused-ignore]
    assert winapi.DETACHED_PROCESS == subprocess.DETACHED_PROCESS  # type: ignore[attr-defined,unused-ignore]
    assert winapi.CREATE_BREAKAWAY_FROM_JOB == subprocess.CREATE_BREAKAWAY_FROM_JOB  # type: ignore[attr-defined,unused-ignore]


@pytest.mark.windows_only("the real kernel32")
def test_the_real_kernel32_sees_this_process_alive() -> None:
    import os

    assert winapi.pid_is_alive(winapi.windows_kernel32(), os.getpid())
    assert not winapi.pid_is_alive(winapi.windows_kernel32(), 0xFFFFFFF0), "no such process"
    waiter = winapi.parent_waiter(winapi.windows_kernel32(), os.getpid(), lambda: None)
    assert waiter is not None, "a handle to a live process is opened (and waited on by the watchdog)"
    assert sys.platform == "win32"
