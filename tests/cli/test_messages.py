"""Messages a user acts on (issue 14 item 7): each says where to look and what to type.

- a 404 from the app names the URL the bridge used and the usual ``/mcp`` path;
- ``app_launch_failed`` names the discovery file the bridge read (or waited for);
- the refusal of an existing client entry names ``force=True`` for Python callers.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from support.helpers import RunBridge, init

from bridge.app.discovery import Endpoint, write_discovery_file
from bridge.app.launcher import Launcher
from bridge.clients import ClientConfigError, ServerEntry, install_entry
from bridge.core.errors import AppLaunchFailedError

pytestmark = pytest.mark.anyio




@pytest.mark.parametrize("url", ["http://127.0.0.1:8765/", "http://127.0.0.1:8765/api"])
async def test_a_404_names_the_url_and_the_usual_mcp_path(url: str, run_bridge: RunBridge) -> None:
    async with run_bridge(lambda request: httpx.Response(404, text="Not Found"), url=url) as h:
        h.stdin.feed(init(0))
        (reply,) = await h.stdout.wait_for(1)
    error = reply["error"]
    assert error["data"] == {"source": "bridge", "reason": "http_status", "httpStatus": 404}
    assert f"at {url}," in error["message"] and "/mcp" in error["message"], error["message"]


async def _never_listens(url: str) -> bool:
    return False


async def test_a_launch_whose_app_never_publishes_names_the_discovery_file(tmp_path: Path) -> None:
    discovery = tmp_path / "MyApp" / "mcp-endpoint.json"
    launcher = Launcher(
        Endpoint(discovery_file=discovery), ensure_running=lambda: None, timeout_seconds=0.3,
        app_name="MyApp", probe=_never_listens,
    )
    with pytest.raises(AppLaunchFailedError) as caught:
        await launcher.ensure_running()
    message = str(caught.value)
    assert "did not accept connections within 0.3 s" in message
    assert f"it never wrote the discovery file {discovery}" in message, message


async def test_a_launch_whose_app_published_a_dead_endpoint_names_the_file_and_its_url(tmp_path: Path) -> None:
    discovery = tmp_path / "mcp-endpoint.json"
    launcher = Launcher(
        Endpoint(discovery_file=discovery), ensure_running=lambda: write_discovery_file(discovery, url="http://127.0.0.1:9/mcp"),
        timeout_seconds=0.3, app_name="MyApp", probe=_never_listens,
    )
    with pytest.raises(AppLaunchFailedError) as caught:
        await launcher.ensure_running()
    assert f"nothing accepts connections at http://127.0.0.1:9/mcp, read from the discovery file {discovery}" in str(caught.value)


def test_an_existing_entry_is_refused_with_the_python_spelling_of_force(tmp_path: Path) -> None:
    """The library speaks Python (force=True); `config install` says --force instead
    (tests/clients/test_clienttable.py), so neither message names the other's spelling."""
    path = tmp_path / "claude_desktop_config.json"
    entry = ServerEntry(command="/opt/MyApp/myapp", args=("--mcp-stdio",))
    install_entry(path, "claude-desktop", "MyApp", entry)
    before = path.read_bytes()
    with pytest.raises(ClientConfigError, match=r"force=True") as caught:
        install_entry(path, "claude-desktop", "MyApp", entry)
    assert "--force" not in str(caught.value)
    assert path.read_bytes() == before
    install_entry(path, "claude-desktop", "MyApp", ServerEntry(command="/opt/MyApp/v2"), force=True)
    assert json.loads(path.read_text())["mcpServers"]["MyApp"]["command"] == "/opt/MyApp/v2"
