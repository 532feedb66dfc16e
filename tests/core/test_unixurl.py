"""The ``http+unix://`` URL form (bridge/core/unixurl.py) and ``--url`` accepting it."""

from __future__ import annotations

import pytest

from bridge.core.config import ConfigError, check_endpoint_url
from bridge.core.unixurl import MAX_SOCKET_PATH_BYTES, is_unix_url, resolve_path, split_unix_url, unix_url


def test_a_socket_path_and_the_mcp_path_round_trip() -> None:
    url = unix_url("/run/user/1000/my app/mcp.sock", "/mcp")
    assert url == "http+unix://%2Frun%2Fuser%2F1000%2Fmy%20app%2Fmcp.sock/mcp"
    assert split_unix_url(url) == ("/run/user/1000/my app/mcp.sock", "/mcp")
    assert split_unix_url(url + "?x=1") == ("/run/user/1000/my app/mcp.sock", "/mcp?x=1")
    assert is_unix_url("HTTP+UNIX://%2Fa/mcp") and not is_unix_url("http://127.0.0.1/mcp")


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http+unix://relative.sock/mcp", "absolute"),
        ("http+unix://%2Fa.sock", "the MCP path"),
        ("http+unix:///mcp", "the MCP path"),
        ("http+unix://%00%2Fa.sock/mcp", "absolute"),
        ("http+unix://%2Fa%00b.sock/mcp", "NUL"),
        ("http+unix://%40abstract/mcp", "absolute"),  # a Linux abstract name has no file to check
        ("http+unix://user@%2Fa.sock/mcp", "'@' or ':'"),
        ("http+unix://%2Fa.sock:80/mcp", "'@' or ':'"),
        ("http+unix://%2Fa.sock/mcp#x", "fragment"),
        ("http+unix://%2Fa.sock/m cp", "spaces"),
        ("http+unix://%2F" + "a" * MAX_SOCKET_PATH_BYTES + "/mcp", "the OS allows"),
    ],
)
def test_malformed_unix_urls_are_refused_with_the_reason(url: str, words: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        split_unix_url(url)
    assert words in str(caught.value)
    with pytest.raises(ConfigError) as config_error:
        check_endpoint_url(url)
    assert words in str(config_error.value)


def test_url_accepts_a_unix_socket_and_https_stays_tcp_only() -> None:
    check_endpoint_url("http+unix://%2Ftmp%2Fapp.sock/mcp")
    with pytest.raises(ConfigError, match="http\\+unix://"):
        check_endpoint_url("https+unix://%2Ftmp%2Fapp.sock/mcp")


def test_a_path_resolves_on_the_same_socket_and_a_tcp_url_as_urljoin_does() -> None:
    """``--auth-url /auth/token`` against an ``http+unix://`` endpoint: the same socket
    (``urljoin`` alone gave the bare path back, and the token exchange failed)."""
    assert resolve_path("http+unix://%2Frun%2Fapp.sock/mcp?x=1", "/auth/token") == "http+unix://%2Frun%2Fapp.sock/auth/token"
    assert resolve_path("http://127.0.0.1:8765/mcp", "/auth/token") == "http://127.0.0.1:8765/auth/token"
    assert resolve_path("http://[::1]:9/a/b/mcp", "/auth/token") == "http://[::1]:9/auth/token"
    with pytest.raises(ValueError, match="must start with '/'"):
        resolve_path("http+unix://%2Frun%2Fapp.sock/mcp", "auth/token")
    with pytest.raises(ValueError, match="absolute"):
        resolve_path("http+unix://run.sock/mcp", "/auth/token")
