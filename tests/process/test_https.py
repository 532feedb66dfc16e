"""An ``https://`` endpoint through a real bridge process.

The serving start imports asyncio with ``ssl`` hidden (``bridge/cli/diagnostics.py``,
``import_asyncio_without_tls``): asyncio's own TLS transports are then unusable in the
bridge process. ``https://`` goes through httpx, whose TLS is anyio's ``TLSStream`` over
``ssl.MemoryBIO`` and imports ``ssl`` itself; these tests show that a client of the
bridge gets an app's answers over TLS all the same, and a clear error when the app's
certificate is not trusted.

The app is the example app (``examples/app_server.py``'s, the official SDK's server)
behind uvicorn's TLS with a self-signed certificate for the IP address 127.0.0.1
(``tests/support/https_app.py``); the bridge trusts it through ``SSL_CERT_FILE``, the
variable httpx reads for its CA file. The certificate is made with the ``openssl``
command: the tests are skipped where there is none (some Windows machines).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.apps import AppServer
from support.https_app import launch_https_app, make_certificate
from support.processes import (
    BridgeProcess,
    base_env,
    bridge_error_reason,
    handshake,
    initialize,
    result_text,
    tool_call,
)

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    made = make_certificate(tmp_path_factory.mktemp("tls"))
    if made is None:
        pytest.skip("no `openssl` command here: it makes the test's self-signed certificate")
    return made


@pytest.fixture(scope="module")
def https_app(certificate: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    server = launch_https_app(*certificate, log_path=tmp_path_factory.mktemp("https_app") / "app.log")
    try:
        yield server
    finally:
        server.stop()


def _env(cert_file: Path | None) -> dict[str, str]:
    # SSL_CERT_DIR is httpx's other source of CAs; neither may come from the test's own environment.
    return base_env(SSL_CERT_FILE=str(cert_file) if cert_file is not None else None, SSL_CERT_DIR=None)


@pytest.mark.frozen_relevant
def test_https_app_answers_through_the_bridge(https_app: AppServer, certificate: tuple[Path, Path]) -> None:
    """initialize and a tools/call reach the app over TLS and their replies come back on
    stdout; at stdin EOF the bridge exits 0, and everything it wrote was JSON-RPC."""
    assert https_app.url.startswith("https://127.0.0.1:")
    with BridgeProcess("--url", https_app.url, env=_env(certificate[0])) as bridge:
        result = handshake(bridge, request_id=1)
        assert result["serverInfo"]["name"], result
        bridge.send(tool_call(2, "echo", {"text": "über TLS ✓"}))
        assert result_text(bridge.read_reply(2)) == "über TLS ✓"
        status, _ = bridge.close_and_time_exit()
        assert status == 0, bridge.stderr_tail()
    # The exchange was the app's, over TLS (uvicorn logs the requests it served).
    assert https_app.wait_for_stderr('"POST /mcp HTTP/1.1" 200'), https_app.stderr_text()[-3000:]



def test_a_timed_out_call_over_tls_leaves_the_bridge_serving(https_app: AppServer, certificate: tuple[Path, Path]) -> None:
    """A bounded wait over TLS: with --request-timeout 1 a 3 s tool call gets the timeout error
    for its id (httpx's read timeout and the bridge's idle bound on the SSE stream, a cancel
    scope around reads of anyio's TLS stream, both end it: either alone suffices), and the
    next call is answered."""
    with BridgeProcess("--url", https_app.url, "--request-timeout", "1", env=_env(certificate[0])) as bridge:
        handshake(bridge, request_id=1)
        bridge.send(tool_call(2, "slow", {"seconds": 3}))
        assert bridge_error_reason(bridge.read_reply(2)) == "timeout"
        bridge.send(tool_call(3, "echo", {"text": "still here"}))
        assert result_text(bridge.read_reply(3)) == "still here"


def test_untrusted_certificate_is_an_error_reply(https_app: AppServer) -> None:
    """Without the certificate in SSL_CERT_FILE the app's TLS is not trusted: the
    initialize gets one error reply made by the bridge that says so (``tls_failed``, with
    the fix; not "not running", and no attempt to start the app), and no request reached
    the app's MCP endpoint. The bridge still exits 0 at stdin EOF."""
    served_before = https_app.stderr_text().count('"POST /mcp HTTP/1.1"')
    with BridgeProcess("--url", https_app.url, env=_env(None)) as bridge:
        bridge.send(initialize(1))
        reply = bridge.read_reply(1)
        assert bridge_error_reason(reply) == "tls_failed"
        assert "certificate verify failed" in reply["error"]["message"], reply
        assert "SSL_CERT_FILE" in reply["error"]["message"], reply
        assert "not running" not in reply["error"]["message"], reply
        status, _ = bridge.close_and_time_exit()
        assert status == 0, bridge.stderr_tail()
    assert https_app.stderr_text().count('"POST /mcp HTTP/1.1"') == served_before
