"""The ``npipe://`` URL (bridge/core/pipeurl.py) and where it is accepted: ``--url``
(Windows only), the discovery file, ``--auth-url`` given as a path."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from bridge.app.discovery import DiscoveryError, Endpoint, read_discovery_file, write_discovery_file
from bridge.core.config import ConfigError, check_endpoint_url
from bridge.core.pipeurl import MAX_PIPE_PATH_CHARS, is_pipe_url, pipe_path, pipe_url, resolve_pipe_path, split_pipe_url
from bridge.core.unixurl import resolve_path


def test_the_pipe_and_the_mcp_path_are_split() -> None:
    assert split_pipe_url("npipe://./pipe/myapp/mcp") == ("\\\\.\\pipe\\myapp", "/mcp")
    assert split_pipe_url("NPIPE://./PIPE/myapp/mcp?x=1") == ("\\\\.\\pipe\\myapp", "/mcp?x=1")
    assert split_pipe_url("npipe://./pipe/my%20app%25/a/b") == ("\\\\.\\pipe\\my app%", "/a/b")


def test_pipe_url_is_the_inverse_and_takes_a_name_or_a_path() -> None:
    for name in ("myapp", "mcp-app-bridge-4242-0123456789abcdef", "my app%", "ünï"):
        url = pipe_url(name, "/mcp")
        assert split_pipe_url(url) == ("\\\\.\\pipe\\" + name, "/mcp")
        assert pipe_url("\\\\.\\pipe\\" + name, "/mcp") == url
    assert pipe_url("myapp") == "npipe://./pipe/myapp/mcp"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("npipe://./pipe/myapp", "needs the MCP path"),
        ("npipe://server/pipe/myapp/mcp", "host must be '.'"),
        ("npipe:////./pipe/myapp/mcp", "not npipe:////"),
        ("npipe://./pipes/myapp/mcp", "host must be '.'"),
        ("npipe://./pipe//mcp", "empty"),
        ("npipe://./pipe/a%5Cb/mcp", "holds '\\\\'"),
        ("npipe://./pipe/a%2Fb/mcp", "holds '\\\\', '/'"),
        ("npipe://./pipe/a%00b/mcp", "control"),
        ("npipe://./pipe/a%ffb/mcp", "not UTF-8"),
        ("npipe://./pipe/myapp/mcp#frag", "fragment"),
        ("npipe://./pipe/myapp/m cp", "spaces"),
        ("http://127.0.0.1/mcp", "not an npipe"),
    ],
)
def test_what_is_refused_and_why(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace("?", r"\?")):
        split_pipe_url(url)


def test_the_pipe_path_is_bounded_by_windows_limit() -> None:
    longest = "n" * (MAX_PIPE_PATH_CHARS - len("\\\\.\\pipe\\"))
    assert len(pipe_path(longest)) == MAX_PIPE_PATH_CHARS
    with pytest.raises(ValueError, match="257 characters"):
        pipe_path(longest + "n")


def test_a_query_is_never_repeated_in_a_refusal() -> None:
    with pytest.raises(ValueError) as refused:
        split_pipe_url("npipe://server/pipe/x/mcp?token=s3cret")
    assert "s3cret" not in str(refused.value)


def test_a_path_is_resolved_on_the_same_pipe() -> None:
    assert resolve_pipe_path("npipe://./pipe/app/mcp", "/auth/token") == "npipe://./pipe/app/auth/token"
    assert resolve_path("npipe://./pipe/app/mcp", "/auth/token") == "npipe://./pipe/app/auth/token"
    assert is_pipe_url("NPipe://./pipe/x/y") and not is_pipe_url("http+unix://%2Fa/mcp")


def test_url_npipe_is_refused_off_windows_with_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    with pytest.raises(ConfigError, match="exists only on Windows") as refused:
        check_endpoint_url("npipe://./pipe/myapp/mcp")
    assert "\n" not in str(refused.value)


def test_url_npipe_is_accepted_on_windows_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    check_endpoint_url("npipe://./pipe/myapp/mcp")
    with pytest.raises(ConfigError, match="host must be '.'"):
        check_endpoint_url("npipe://otherhost/pipe/myapp/mcp")
    with pytest.raises(ConfigError, match="Windows does not connect to|bridge on Windows"):
        check_endpoint_url("http+unix://%2Frun%2Fapp.sock/mcp")


@pytest.mark.posix_only("the discovery file's folder checks are POSIX modes here")
def test_the_discovery_file_carries_a_pipe_and_names_its_server(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    folder.mkdir(mode=0o700)
    path = folder / "mcp-endpoint.json"
    write_discovery_file(path, url="npipe://./pipe/myapp-1/mcp", pid=os.getpid())  # a live pid: this one
    assert read_discovery_file(path).url == "npipe://./pipe/myapp-1/mcp"
    endpoint = Endpoint(url=None, discovery_file=path)
    endpoint.reload()
    described = endpoint.discovery_for_pipe("\\\\.\\PIPE\\MyApp-1")  # Windows names pipes without regard to case
    assert described is not None and described.pid == os.getpid()
    assert endpoint.discovery_for_pipe("\\\\.\\pipe\\other") is None
    assert endpoint.discovery_for_socket("/run/app.sock") is None
    path.write_text(json.dumps({"url": "npipe://host/pipe/x/mcp", "pid": 1}), encoding="utf-8")
    path.chmod(0o600)
    with pytest.raises(DiscoveryError, match="host must be '.'"):
        read_discovery_file(path)
