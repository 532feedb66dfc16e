"""The discovery file, secret-file modes and the launched app's environment."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from bridge.app.discovery import (
    DiscoveryError,
    Endpoint,
    read_discovery_file,
    remove_discovery_file,
    write_discovery_file,
)
from bridge.app.launcher import launch_environment
from bridge.app.tokens import TokenSourceError, read_credential

posix = pytest.mark.posix_only("file modes (0600, 0644) are POSIX")


def test_written_file_is_0600_atomic_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "state" / "mcp-endpoint.json"
    write_discovery_file(path, url="http://127.0.0.1:8765/mcp", token="tok-PLACEHOLDER-0123456789")
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["mcp-endpoint.json"]  # no temporary left
    found = read_discovery_file(path)
    assert (found.url, found.pid, found.token) == ("http://127.0.0.1:8765/mcp", os.getpid(), "tok-PLACEHOLDER-0123456789")
    assert "tok-" not in repr(found)


@posix
@pytest.mark.parametrize("mode", [0o666, 0o620, 0o602])
def test_group_or_world_writable_file_is_refused_with_the_fix_in_the_message(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"url": "http://127.0.0.1:1/mcp"}))
    path.chmod(mode)
    with pytest.raises(DiscoveryError, match=r"Permissions 06[0-9]{2} for .* are too open.*writable by group or others.*chmod 600"):
        read_discovery_file(path)


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ({"url": "http://localhost:8765/mcp"}, "explicit"),
        ({"url": "http://192.168.1.2:8765/mcp"}, "not http"),
        ({"url": "ftp://127.0.0.1/mcp"}, "not http"),
        ({"pid": 3}, '"url"'),
        ({"url": "http://127.0.0.1:1/mcp", "pid": "12"}, '"pid"'),
        ({"url": "http://[::1]:1/mcp", "token": ""}, '"token"'),
        ([], '"url"'),
    ],
)
def test_malformed_or_off_loopback_files_are_refused(tmp_path: Path, document: object, says: str) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps(document))
    path.chmod(0o600)
    with pytest.raises(DiscoveryError, match=says):
        read_discovery_file(path)


def test_missing_file_means_the_app_is_not_running(tmp_path: Path) -> None:
    with pytest.raises(DiscoveryError, match="not running"):
        read_discovery_file(tmp_path / "absent.json")


def test_remove_only_removes_this_apps_file(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    write_discovery_file(path, url="http://127.0.0.1:1/mcp", pid=999_999)
    remove_discovery_file(path)  # not ours
    assert path.exists()
    remove_discovery_file(path, pid=999_999)
    assert not path.exists()


def test_endpoint_rereads_the_file_on_reload(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    endpoint = Endpoint(discovery_file=path)
    with pytest.raises(DiscoveryError, match="not running"):
        endpoint.url()
    write_discovery_file(path, url="http://127.0.0.1:1111/mcp", token="a")
    endpoint.reload()
    assert endpoint.url() == "http://127.0.0.1:1111/mcp"
    write_discovery_file(path, url="http://127.0.0.1:2222/mcp", token="b")
    assert endpoint.url() == "http://127.0.0.1:1111/mcp"  # cached until the next reconnect
    assert endpoint.token() == "b"  # a token is always read fresh
    assert endpoint.url() == "http://127.0.0.1:2222/mcp"


def test_fixed_url_wins_over_the_discovery_file(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    write_discovery_file(path, url="http://127.0.0.1:2222/mcp")
    assert Endpoint(url="http://127.0.0.1:1/mcp", discovery_file=path).url() == "http://127.0.0.1:1/mcp"


@posix
def test_secret_files_others_may_read_are_refused_with_the_chmod_to_run(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("tok-PLACEHOLDER-0123456789\n")
    path.chmod(0o644)
    with pytest.raises(TokenSourceError, match="chmod 600") as caught:
        read_credential(path, "token file")
    assert "tok-" not in str(caught.value)
    path.chmod(0o600)
    assert read_credential(path, "token file") == "tok-PLACEHOLDER-0123456789"


def test_launched_app_gets_no_pyinstaller_variables_and_its_own_library_path() -> None:
    frozen_env = {
        "PATH": "/usr/bin",
        "_PYI_APPLICATION_HOME_DIR": "/tmp/_MEI123",
        "_PYI_ARCHIVE_FILE": "/opt/bridge",
        "_MEIPASS2": "/tmp/_MEI123",
        "LD_LIBRARY_PATH": "/tmp/_MEI123",
        "LD_LIBRARY_PATH_ORIG": "/opt/lib",
        "DYLD_LIBRARY_PATH": "/tmp/_MEI123",
    }
    assert launch_environment(frozen_env, frozen=True) == {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/opt/lib"}
    plain = {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/opt/lib"}
    assert launch_environment(plain, frozen=False) == plain


@posix
@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to give the file away")
def test_file_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    if sys.platform == "win32":  # its marker skips it first; this tells mypy --platform
        pytest.skip("POSIX only")
    path = tmp_path / "d.json"
    write_discovery_file(path, url="http://127.0.0.1:1/mcp")
    os.chown(path, 65534, -1)
    with pytest.raises(DiscoveryError, match="belongs to uid 65534, not to the user running the bridge"):
        read_discovery_file(path)


def test_launched_app_gets_neither_the_token_variable_nor_the_bridges_own() -> None:
    env = {"PATH": "/usr/bin", "APP_TOKEN": "tok-PLACEHOLDER-0123456789", "MCP_APP_BRIDGE_X": "1", "HOME": "/home/u"}
    assert launch_environment(env, frozen=False, remove=["APP_TOKEN"]) == {"PATH": "/usr/bin", "HOME": "/home/u"}


@pytest.mark.process
def test_a_discovery_file_whose_pid_is_dead_counts_as_absent(tmp_path: Path) -> None:
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    path = tmp_path / "d.json"
    write_discovery_file(path, url="http://127.0.0.1:1111/mcp", pid=gone.pid, token="a")
    endpoint = Endpoint(discovery_file=path)
    with pytest.raises(DiscoveryError, match=f"pid {gone.pid}, which is not running") as caught:
        endpoint.url()
    assert caught.value.missing  # so --launch starts the app
    assert endpoint.token() is None and endpoint.listener_pid(1111) is None
    write_discovery_file(path, url="http://127.0.0.1:1111/mcp", token="a")  # this (live) process
    endpoint.reload()
    assert endpoint.url() == "http://127.0.0.1:1111/mcp"
    assert (endpoint.listener_pid(1111), endpoint.listener_pid(2222)) == (os.getpid(), None)


# -- the pid's start time: a reused pid is not the app ------------------------------------------


def test_the_writer_records_the_pids_start_time_and_files_without_it_stay_readable(tmp_path: Path) -> None:
    from bridge.app.discovery import process_start_time, read_discovery_file, write_discovery_file

    path = tmp_path / "state" / "mcp-endpoint.json"
    write_discovery_file(path, url="http://127.0.0.1:9/mcp")
    found = read_discovery_file(path)
    assert found.pid == os.getpid() and found.pid_start_time is not None
    assert abs(found.pid_start_time - (process_start_time(os.getpid()) or 0)) < 0.01
    path.write_text(json.dumps({"url": "http://127.0.0.1:9/mcp", "pid": 42}))
    assert read_discovery_file(path).pid_start_time is None  # an older writer's file
    for bad in ("yesterday", True, -1):
        path.write_text(json.dumps({"url": "http://127.0.0.1:9/mcp", "pid": 42, "pid_start_time": bad}))
        with pytest.raises(DiscoveryError, match="pid_start_time"):
            read_discovery_file(path)


@pytest.mark.process
@pytest.mark.linux_only("process start times from /proc here; psutil elsewhere")
def test_a_live_pid_that_started_at_another_time_is_not_the_apps() -> None:
    import subprocess
    import sys
    import time

    from bridge.app.discovery import Discovery, pid_is_the_apps, process_start_time

    me = process_start_time(os.getpid())
    assert me is not None
    url = "http://127.0.0.1:9/mcp"
    assert pid_is_the_apps(Discovery(url, pid=os.getpid(), pid_start_time=me))
    assert not pid_is_the_apps(Discovery(url, pid=os.getpid(), pid_start_time=me - 60))  # reused
    assert pid_is_the_apps(Discovery(url, pid=os.getpid(), written_at=time.time()))  # older file, written after the start
    assert not pid_is_the_apps(Discovery(url, pid=os.getpid(), written_at=me - 60))  # written before this process began
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    assert not pid_is_the_apps(Discovery(url, pid=gone.pid))
    assert pid_is_the_apps(Discovery(url))  # no pid named: nothing to compare


def test_launch_retries_back_off_from_5_s_to_60_s() -> None:
    from bridge.app.launcher import retry_delay_seconds

    assert [retry_delay_seconds(n) for n in range(1, 8)] == [5, 10, 20, 40, 60, 60, 60]
