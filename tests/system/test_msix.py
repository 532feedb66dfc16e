"""A bridge started inside an MSIX package (issue 37, item 2): knowing it
(``GetCurrentPackageFullName``), the state folder in the real profile, and starting the app
outside the package (the desktop app breakaway policy). Stand-ins for kernel32 on every OS;
the real calls at the end, on Windows only (the named-pipes job runs them, none skipped)."""

from __future__ import annotations

import ctypes
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bridge.app import launcher
from bridge.cli.statefolder import prepare_state_folder
from bridge.system import msix, winapi

FULL_NAME = "Claude_1.1.3189.0_x64__pzs8sxrjxfjjc"


class PackageKernel32:
    """``GetCurrentPackageFullName`` as Microsoft documents it: a length query, then the name."""

    def __init__(self, name: str | None, first: int | None = None) -> None:
        self.name, self.first = name, first
        self.calls: list[int] = []

    def GetCurrentPackageFullName(self, length: Any, buffer: Any) -> int:  # noqa: N802 - Win32's name
        self.calls.append(length._obj.value)
        if self.name is None:
            return msix.APPMODEL_ERROR_NO_PACKAGE
        if buffer is None or length._obj.value < len(self.name) + 1:
            length._obj.value = len(self.name) + 1
            return self.first if self.first is not None else winapi.ERROR_INSUFFICIENT_BUFFER
        buffer.value = self.name
        return msix.ERROR_SUCCESS


def test_a_packaged_process_knows_its_package_full_name() -> None:
    kernel32 = PackageKernel32(FULL_NAME)
    assert msix.package_full_name(kernel32) == FULL_NAME
    assert kernel32.calls == [0, len(FULL_NAME) + 1], "a length query first, then the name with that length"


@pytest.mark.parametrize("kernel32", [PackageKernel32(None), PackageKernel32(FULL_NAME, first=87)])
def test_no_package_or_an_undocumented_answer_is_no_package(kernel32: PackageKernel32) -> None:
    assert msix.package_full_name(kernel32) is None


def test_the_family_name_is_the_name_and_the_publisher_id() -> None:
    assert msix.package_family_name(FULL_NAME) == "Claude_pzs8sxrjxfjjc"
    assert msix.package_family_name("OpenAI.Codex_26.1.0.0_neutral_~_2p2nqsd0c76g0") == "OpenAI.Codex_2p2nqsd0c76g0"


# -- the state folder ------------------------------------------------------------------------


@pytest.fixture
def profile(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "Local").mkdir()
    (tmp_path / "Roaming").mkdir()
    return {"LOCALAPPDATA": str(tmp_path / "Local"), "APPDATA": str(tmp_path / "Roaming")}


def test_outside_a_package_the_state_folder_is_never_a_problem(profile: dict[str, str]) -> None:
    assert msix.state_folder_problem(Path(profile["LOCALAPPDATA"]) / "mcp-app-bridge", None, profile) is None


def test_inside_a_package_a_missing_state_folder_is_said_with_the_fix(profile: dict[str, str]) -> None:
    folder = Path(profile["LOCALAPPDATA"]) / "mcp-app-bridge"
    problem = msix.state_folder_problem(folder, "Claude_pzs8sxrjxfjjc", profile)
    assert problem is not None and "does not exist" in problem and str(folder) in problem
    assert "mcp-app-bridge check" in problem and "outside the package" in problem
    folder.mkdir()
    assert msix.state_folder_problem(folder, "Claude_pzs8sxrjxfjjc", profile) is None, "made in the real profile: fine"


def test_inside_a_package_a_folder_made_inside_it_is_said_with_what_to_delete(profile: dict[str, str]) -> None:
    folder = Path(profile["LOCALAPPDATA"]) / "mcp-app-bridge"
    copy = Path(profile["LOCALAPPDATA"]) / "Packages" / "Claude_pzs8sxrjxfjjc" / "LocalCache" / "Local" / "mcp-app-bridge"
    copy.mkdir(parents=True)
    folder.mkdir()  # (inside the package, the merged view shows it as existing)
    problem = msix.state_folder_problem(folder, "Claude_pzs8sxrjxfjjc", profile)
    assert problem is not None and f"delete {copy}" in problem and "made inside the package" in problem


def test_a_state_folder_outside_appdata_is_not_redirected(profile: dict[str, str], tmp_path: Path) -> None:
    assert msix.state_folder_problem(tmp_path / "elsewhere" / "mcp-app-bridge", "Claude_x", profile) is None


def test_the_launcher_asks_about_its_own_state_folder(profile: dict[str, str]) -> None:
    folder = Path(profile["LOCALAPPDATA"]) / "mcp-app-bridge"
    assert launcher.package_state_problem(None, profile, folder) is None
    assert "does not exist" in (launcher.package_state_problem(FULL_NAME, profile, folder) or "")


def test_the_bridge_logs_a_missing_state_folder_inside_a_package(profile: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    folder = Path(profile["LOCALAPPDATA"]) / "mcp-app-bridge"
    with caplog.at_level(logging.INFO, logger="bridge.launcher"):
        launcher.log_package_state(platform="linux", package=lambda: FULL_NAME, environ=profile, folder=folder)
        assert caplog.records == []
        launcher.log_package_state(platform="win32", package=lambda: None, environ=profile, folder=folder)
        assert caplog.records == [], "no package: nothing to say"
        launcher.log_package_state(platform="win32", package=lambda: FULL_NAME, environ=profile, folder=folder)
    [record] = caplog.records
    assert record.levelno == logging.WARNING and "does not exist" in record.getMessage() and "check" in record.getMessage()
    folder.mkdir()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="bridge.launcher"):
        launcher.log_package_state(platform="win32", package=lambda: FULL_NAME, environ=profile, folder=folder)
    assert "is in the real profile" in caplog.text


def test_config_install_and_check_make_the_state_folder_on_windows_only(tmp_path: Path, profile: dict[str, str]) -> None:
    folder = tmp_path / "Local" / "mcp-app-bridge"
    assert prepare_state_folder(platform="linux", folder=folder) is None and not folder.exists()
    said = prepare_state_folder(platform="win32", folder=folder)
    assert folder.is_dir() and said is not None and "real profile" in said
    assert prepare_state_folder(platform="win32", folder=folder) is None, "made already: nothing to say"


def test_inside_a_package_config_install_and_check_make_nothing_and_say_why(tmp_path: Path, profile: dict[str, str]) -> None:
    folder = tmp_path / "Local" / "mcp-app-bridge"
    said = prepare_state_folder(platform="win32", package=FULL_NAME, folder=folder, environ=profile)
    assert not folder.exists() and said is not None
    assert "runs inside the MSIX package" in said and "does not exist" in said and "from a terminal" in said


def test_check_makes_the_state_folder_and_says_so(
    monkeypatch: pytest.MonkeyPatch, private_state_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from click.testing import CliRunner

    from bridge.cli.commands import main

    made = private_state_folder / "mcp-app-bridge"
    monkeypatch.setattr(launcher, "state_folder", lambda: made)
    monkeypatch.setattr(sys, "platform", "win32")
    result = CliRunner().invoke(main, ["check", "--client", "cursor"])
    assert made.is_dir() and f"made the bridge's state folder {made}" in result.stdout


# -- starting the app outside the package ---------------------------------------------------


class SpawnKernel32:
    """The calls of ``spawn_outside_package``, answered as Windows would (a created process,
    or a refusal with the job flag when ``refuse_job``)."""

    def __init__(self, refuse_job: bool = False, refuse_all: bool = False) -> None:
        self.refuse_job, self.refuse_all = refuse_job, refuse_all
        self.calls: list[tuple[Any, ...]] = []
        self.exit_code = winapi.STILL_ACTIVE

    def InitializeProcThreadAttributeList(self, attributes: Any, count: int, flags: int, size: Any) -> int:  # noqa: N802
        self.calls.append(("Initialize", attributes is None, count, flags))
        if attributes is None:
            size._obj.value = 48
            return 0  # by design: the size only
        assert len(attributes) == 48
        return 1

    def UpdateProcThreadAttribute(self, attributes: Any, flags: int, attribute: int, value: Any, size: int, previous: Any, returned: Any) -> int:  # noqa: N802
        if attribute == msix.PROC_THREAD_ATTRIBUTE_DESKTOP_APP_POLICY:
            read = value._obj.value
        else:
            read = list(value)
        self.calls.append(("Update", flags, attribute, read, size, previous, returned))
        return 1

    def CreateProcessW(self, application: Any, line: Any, process: Any, thread: Any, inherit: bool, flags: int, block: Any, cwd: Any, startup: Any, information: Any) -> int:  # noqa: N802
        info = startup._obj.StartupInfo
        self.calls.append(("Create", application, line.value, inherit, flags, block[:], cwd, info.dwFlags,
                           (info.hStdInput, info.hStdOutput, info.hStdError), startup._obj.lpAttributeList is not None))
        if self.refuse_all or (self.refuse_job and flags & winapi.CREATE_BREAKAWAY_FROM_JOB):
            return 0
        information._obj.hProcess, information._obj.hThread, information._obj.dwProcessId = 0x50, 0x54, 4321
        return 1

    def DeleteProcThreadAttributeList(self, attributes: Any) -> None:  # noqa: N802
        self.calls.append(("Delete",))

    def CloseHandle(self, handle: int) -> int:  # noqa: N802
        self.calls.append(("CloseHandle", handle))
        return 1

    def WaitForSingleObject(self, handle: int, milliseconds: int) -> int:  # noqa: N802
        self.calls.append(("Wait", handle, milliseconds))
        return msix.WAIT_TIMEOUT if self.exit_code == winapi.STILL_ACTIVE else msix.WAIT_OBJECT_0

    def GetExitCodeProcess(self, handle: int, code: Any) -> int:  # noqa: N802
        code._obj.value = self.exit_code
        return 1

    def TerminateProcess(self, handle: int, code: int) -> int:  # noqa: N802
        self.calls.append(("Terminate", handle, code))
        self.exit_code = code
        return 1


COMMAND = ["C:\\Program Files\\My App\\app.exe", "--serve", "a b"]


def test_the_app_is_started_with_the_breakaway_policy_and_only_its_own_handles() -> None:
    kernel32 = SpawnKernel32()
    child = msix.spawn_outside_package(kernel32, COMMAND, {"b": "2", "A": "1"}, (0x10, 0x20, 0x20))
    calls = kernel32.calls
    assert calls[0] == ("Initialize", True, 2, 0) and calls[1] == ("Initialize", False, 2, 0)
    assert calls[2] == ("Update", 0, 0x00020012, 0x5, 4, None, None), "PROC_THREAD_ATTRIBUTE_DESKTOP_APP_POLICY: override | tree"
    assert calls[3][:4] == ("Update", 0, 0x00020002, [0x10, 0x20]), "PROC_THREAD_ATTRIBUTE_HANDLE_LIST, each handle once"
    create = calls[4]
    assert create[1] is None and create[2] == '"C:\\Program Files\\My App\\app.exe" --serve "a b"'
    assert create[3] is True, "the listed handles are inherited (and only they)"
    assert create[4] == 0x00080000 | 0x00000400 | 0x00000200 | 0x00000008 | 0x01000000
    assert create[5] == "A=1\0b=2\0\0\0" and create[6] is None  # (the buffer adds its own null)
    assert create[7] == 0x100 and create[8] == (0x10, 0x20, 0x20) and create[9]
    assert calls[5:] == [("Delete",), ("CloseHandle", 0x54)], "the list is deleted and the thread handle closed"
    assert child.pid == 4321 and child.poll() is None
    child.kill()
    assert child.wait(5) == 1 and child.returncode == 1 and ("CloseHandle", 0x50) in kernel32.calls
    assert msix.BREAKAWAY_POLICY == 0x5


def test_a_job_that_forbids_breaking_away_gets_a_second_start_without_the_flag() -> None:
    kernel32 = SpawnKernel32(refuse_job=True)
    child = msix.spawn_outside_package(kernel32, COMMAND, {}, (1, 2, 3))
    creates = [call for call in kernel32.calls if call[0] == "Create"]
    assert [bool(call[4] & winapi.CREATE_BREAKAWAY_FROM_JOB) for call in creates] == [True, False]
    assert child.pid == 4321


def test_a_start_that_fails_both_ways_raises_and_still_deletes_the_list() -> None:
    kernel32 = SpawnKernel32(refuse_all=True)
    with pytest.raises(OSError, match="CreateProcessW failed"):
        msix.spawn_outside_package(kernel32, COMMAND, {}, (1, 2, 3), last_error=lambda: 5)
    assert kernel32.calls[-1] == ("Delete",)


def test_a_child_still_running_after_the_wait_times_out() -> None:
    child = msix.spawn_outside_package(SpawnKernel32(), COMMAND, {}, (1, 2, 3))
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(0.01)


def test_the_launch_says_which_way_it_starts_the_app() -> None:
    assert msix.launch_plan(None) == (False, "starting the app with CreateProcess (this bridge runs in no MSIX package)")
    outside, line = msix.launch_plan(FULL_NAME)
    assert outside and FULL_NAME in line and "PROC_THREAD_ATTRIBUTE_DESKTOP_APP_POLICY 0x5" in line


def test_the_launcher_starts_outside_the_package_when_in_one(caplog: pytest.LogCaptureFixture) -> None:
    started: list[Any] = []

    def outside(command: list[str], stdout: Any, stderr: Any, env: Any) -> str:
        started.append(("outside", command, stdout, stderr, env))
        return "child"

    def popen(command: list[str], **options: Any) -> str:
        started.append(("popen", command, options["creationflags"]))
        return "popen child"

    options = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": {"A": "1"}, "close_fds": True}
    with caplog.at_level(logging.INFO, logger="bridge.launcher"):
        assert launcher.spawn_on_windows(["app.exe"], options, FULL_NAME, popen=popen, outside=outside) == "child"
    assert started == [("outside", ["app.exe"], subprocess.DEVNULL, subprocess.DEVNULL, {"A": "1"})]
    assert "runs inside the MSIX package" in caplog.text and "breakaway" in caplog.text
    started.clear()
    with caplog.at_level(logging.INFO, logger="bridge.launcher"):
        assert launcher.spawn_on_windows(["app.exe"], options, None, popen=popen, outside=outside) == "popen child"
    assert started[0][0] == "popen" and "runs in no MSIX package" in caplog.text


def test_when_the_breakaway_start_fails_the_app_is_started_inside_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    def outside(*args: Any) -> Any:
        raise OSError(0, "CreateProcessW failed (error 87)")

    options: dict[str, Any] = {"stdout": None, "stderr": None, "env": {}}
    with caplog.at_level(logging.INFO, logger="bridge.launcher"):
        child = launcher.spawn_on_windows(["app.exe"], options, FULL_NAME, popen=lambda command, **o: "inside", outside=outside)
    assert child == "inside" and "could not start the app outside the package" in caplog.text


# -- the real kernel32 (Windows only) -------------------------------------------------------


@pytest.mark.windows_only("the real GetCurrentPackageFullName")
def test_the_real_kernel32_says_this_python_has_no_package() -> None:
    assert msix.current_package() is None


@pytest.mark.windows_only("the real CreateProcessW with the desktop app policy")
def test_the_real_breakaway_start_runs_the_program_and_passes_its_environment(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    code = "import os, sys; open(sys.argv[1], 'w').write(os.environ['MSIX_PROBE'] + ' ' + sys.argv[2])"
    with open(tmp_path / "log.txt", "wb") as log_file:
        child = msix.spawn_app_outside_package(
            [sys.executable, "-c", code, str(out), "a b"], log_file, subprocess.STDOUT,
            {"SYSTEMROOT": os.environ["SYSTEMROOT"], "MSIX_PROBE": "seen"},
        )
    assert child.wait(60) == 0
    assert out.read_text() == "seen a b"
    assert ctypes.sizeof(msix.STARTUPINFOEXW) == (112 if ctypes.sizeof(ctypes.c_void_p) == 8 else 72)


@pytest.mark.windows_only("the launcher's real start outside a package")
def test_the_launchers_windows_start_in_a_package_runs_the_app_for_real(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "started.txt"
    options = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL,
               "env": launcher.launch_environment(), "close_fds": True}
    command = [sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write('up')", str(out)]
    with caplog.at_level(logging.INFO, logger="bridge.launcher"):
        child = launcher.spawn_on_windows(command, options, FULL_NAME)
    assert isinstance(child, msix.OutsideChild) and child.wait(60) == 0 and out.read_text() == "up"
    assert "could not start" not in caplog.text
