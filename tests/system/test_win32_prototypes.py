"""The Win32 prototypes the bridge declares (bridge/system/namedpipe.win32_pipe_api,
bridge/transport/pipelink._kernel32, bridge/system/winapi.windows_kernel32), read with a stand-in ``ctypes.WinDLL`` on every OS:
every function the pipe code calls is declared, and every handle or pointer it returns is
pointer-sized (ctypes's default ``int`` result would cut a 64-bit handle, and
``GetCurrentProcess``'s pseudo-handle, -1, would not pass back in)."""

from __future__ import annotations

import ast
import ctypes
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.system import namedpipe, winapi
from bridge.transport import pipelink

ROOT = Path(__file__).resolve().parent.parent.parent


class Function:
    def __init__(self) -> None:
        self.restype: Any = ctypes.c_int
        self.argtypes: Any = None


def last_error() -> int:
    return 0


class FakeWinDLL:
    made: list[FakeWinDLL] = []

    def __init__(self, name: str, use_last_error: bool = False) -> None:
        self.name, self.use_last_error = name, use_last_error
        self.functions: dict[str, Function] = {}
        FakeWinDLL.made.append(self)

    def __getattr__(self, name: str) -> Function:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.functions.setdefault(name, Function())


@pytest.fixture
def fake_windows(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    FakeWinDLL.made = []
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(ctypes, "WinDLL", FakeWinDLL, raising=False)
    monkeypatch.setattr(ctypes, "get_last_error", last_error, raising=False)
    namedpipe.win32_pipe_api.cache_clear()
    pipelink._kernel32.cache_clear()
    winapi.windows_kernel32.cache_clear()
    yield
    namedpipe.win32_pipe_api.cache_clear()
    pipelink._kernel32.cache_clear()
    winapi.windows_kernel32.cache_clear()


def called_win32_functions(path: Path) -> set[str]:
    """The ``kernel32.X`` / ``advapi32.X`` names a module calls."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("kernel32", "advapi32")
    }


HANDLE_RESULTS = {"GetCurrentProcess", "OpenProcess", "CreateNamedPipeW", "CreateFileW", "LocalFree", "GetStdHandle"}


def test_every_function_namedpipe_calls_is_declared_with_a_pointer_sized_handle(fake_windows: None) -> None:
    kernel32, advapi32, last_error = namedpipe.win32_pipe_api()
    assert kernel32.name == "kernel32" and advapi32.name == "advapi32" and kernel32.use_last_error and advapi32.use_last_error
    assert last_error is ctypes.get_last_error  # type: ignore[attr-defined,unused-ignore]  # Windows only
    declared = {name: function for dll in (kernel32, advapi32) for name, function in dll.functions.items()}
    called = called_win32_functions(ROOT / "bridge" / "system" / "namedpipe.py")
    assert called and called <= set(declared), f"called but not declared: {called - set(declared)}"
    for name, function in declared.items():
        assert function.argtypes is not None, name
        if name in HANDLE_RESULTS:
            assert function.restype is ctypes.c_void_p, name
        assert all(ctypes.sizeof(kind) in (ctypes.sizeof(ctypes.c_void_p), 4) for kind in function.argtypes), name
    assert declared["OpenProcessToken"].argtypes[0] is ctypes.c_void_p, "the pseudo-handle -1 goes in as a pointer"
    assert declared["CloseHandle"].argtypes == [ctypes.c_void_p]


def test_the_client_opens_the_pipe_with_a_typed_createfilew(fake_windows: None) -> None:
    kernel32 = pipelink._kernel32()
    assert kernel32.use_last_error
    assert set(kernel32.functions) == {"CreateFileW"} == called_win32_functions(ROOT / "bridge" / "transport" / "pipelink.py")
    create = kernel32.functions["CreateFileW"]
    assert create.restype is ctypes.c_void_p and len(create.argtypes) == 7 and create.argtypes[0] is ctypes.c_wchar_p


def test_the_process_calls_get_a_typed_kernel32_of_their_own(fake_windows: None) -> None:
    """The parent watchdog, the pid check and the standard handles' adoption: a DLL object of
    their own (ctypes.windll.kernel32 is shared with every library in the process), each
    function typed, a handle pointer-sized both ways."""
    kernel32 = winapi.windows_kernel32()
    assert kernel32.name == "kernel32" and kernel32 is not getattr(ctypes, "windll", None)
    called = called_win32_functions(ROOT / "bridge" / "system" / "winapi.py") | {"GetStdHandle"}
    assert called == set(kernel32.functions), called ^ set(kernel32.functions)
    for name, function in kernel32.functions.items():
        assert function.argtypes is not None, name
        if name in HANDLE_RESULTS:
            assert function.restype is ctypes.c_void_p, name
    for name in ("WaitForSingleObject", "GetExitCodeProcess", "CloseHandle"):
        assert kernel32.functions[name].argtypes[0] is ctypes.c_void_p, f"{name} takes the handle pointer-sized"
    for path in ("app/discovery.py", "stdio/fds.py", "system/winapi.py"):
        assert "windll.kernel32." not in (ROOT / "bridge" / path).read_text(encoding="utf-8"), path


def test_the_package_calls_get_a_typed_kernel32_of_their_own(fake_windows: None) -> None:
    """GetCurrentPackageFullName and the breakaway start (bridge/system/msix.py): every
    function called is declared, handles and pointers pointer-sized, as Microsoft documents
    them (appmodel.h, processthreadsapi.h)."""
    from bridge.system import msix

    msix.package_kernel32.cache_clear()
    kernel32 = msix.package_kernel32()
    msix.package_kernel32.cache_clear()
    assert kernel32.name == "kernel32" and kernel32.use_last_error
    called = called_win32_functions(ROOT / "bridge" / "system" / "msix.py")
    assert called == set(kernel32.functions), called ^ set(kernel32.functions)
    declared = kernel32.functions
    for name, function in declared.items():
        assert function.argtypes is not None, name
    pointer = ctypes.c_void_p
    assert declared["GetCurrentPackageFullName"].restype is ctypes.c_long
    assert declared["GetCurrentPackageFullName"].argtypes[1] is ctypes.c_wchar_p
    update = declared["UpdateProcThreadAttribute"].argtypes
    assert len(update) == 7 and update[2] is ctypes.c_size_t and update[4] is ctypes.c_size_t, "DWORD_PTR, SIZE_T"
    create = declared["CreateProcessW"].argtypes
    assert len(create) == 10 and create[1] is ctypes.c_wchar_p and create[5] is ctypes.c_uint32
    assert declared["DeleteProcThreadAttributeList"].restype is None
    for name in ("WaitForSingleObject", "GetExitCodeProcess", "TerminateProcess", "CloseHandle"):
        assert declared[name].argtypes[0] is pointer, f"{name} takes the handle pointer-sized"
