"""The server half on a Unix domain socket (bridge/appserver/unixsocket.py, AppServer(link=…)):
a private folder, mode 0600, a stale socket of a dead run replaced and nothing else, the
``http+unix://`` URL published, ``Host: localhost`` accepted there, the file removed on exit."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.processes import wait_until
from support.pythonapp import START_TIMEOUT

from bridge.appserver import AppServer, UnsafeFileError
from bridge.appserver.unixsocket import SOCKET_FILE_NAME, bind_private_socket, remove_socket_file, socket_path_for
from bridge.core.unixurl import split_unix_url

# mypy --platform reads this too: the rest of the module is POSIX code.
if sys.platform == "win32":
    pytest.skip("Unix sockets", allow_module_level=True)

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX") or sys.platform == "win32", reason="Unix sockets")
as_root = pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="needs root to make a file another user's")
OTHER_UID = 54_321


async def inner(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"inner"})


@pytest.mark.process
def test_the_socket_goes_beside_the_discovery_file_or_in_a_private_temp_folder(short_root: Path) -> None:
    discovery = short_root / "state" / "mcp-endpoint.json"
    path = socket_path_for(discovery)
    assert path == discovery.with_name(SOCKET_FILE_NAME)
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    deep = short_root / ("x" * 120) / "mcp-endpoint.json"  # too long for sun_path
    far = socket_path_for(deep, temp_root=str(short_root))
    assert far.parent == short_root / f"mcp-app-bridge-{os.geteuid()}" and stat.S_IMODE(os.stat(far.parent).st_mode) == 0o700
    assert socket_path_for(deep, temp_root=str(short_root)) == far, "the same discovery file, the same socket"


def test_a_temp_folder_too_deep_for_any_socket_path_is_a_clear_error(short_root: Path) -> None:
    """Every folder usable but none short enough (a long ``TMPDIR`` and runtime folder): an
    ``OSError`` that names the limit, which the app reports at start; not an assertion."""
    deep = short_root / ("x" * 120) / "mcp-endpoint.json"
    long_temp = short_root / ("t" * 100)
    long_temp.mkdir()
    with pytest.raises(OSError, match="limit of 10[0-9] bytes") as raised:
        socket_path_for(deep, temp_root=str(long_temp), runtime_root=str(long_temp))
    assert raised.value.errno == errno.ENAMETOOLONG


def test_a_temp_folder_that_is_a_link_or_open_is_refused(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 120) / "mcp-endpoint.json"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / f"mcp-app-bridge-{os.geteuid()}").symlink_to(elsewhere)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        socket_path_for(deep, temp_root=str(tmp_path), runtime_root=str(tmp_path / "none"))
    other = tmp_path / "other"
    other.mkdir()
    (other / f"mcp-app-bridge-{os.geteuid()}").mkdir(mode=0o755)
    os.chmod(other / f"mcp-app-bridge-{os.geteuid()}", 0o755)
    with pytest.raises(UnsafeFileError, match="mode 0755"):
        socket_path_for(deep, temp_root=str(other), runtime_root=str(tmp_path / "none"))


@pytest.fixture
def short_root() -> Iterator[Path]:
    """A folder with a short path: ``<root>/run/mcp-app-bridge/<16 hex>.sock`` must fit the
    OS's limit on a socket path (107 bytes on Linux), which a test's own ``tmp_path`` may not."""
    root = Path(tempfile.mkdtemp(prefix="sq"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.process
@pytest.mark.parametrize("squat", ["link", pytest.param("another user", marks=as_root)])
def test_a_temp_folder_made_by_someone_else_sends_the_socket_to_the_runtime_folder(
    tmp_path: Path, short_root: Path, squat: str
) -> None:
    """Issue 41, 8: another user who made ``$TMPDIR/mcp-app-bridge-<uid>`` first pushed the
    app onto TCP; the socket goes to the user's runtime folder instead."""
    deep = tmp_path / ("x" * 120) / "mcp-endpoint.json"
    temp, runtime = short_root / "tmp", short_root / "run"
    temp.mkdir()
    runtime.mkdir(mode=0o700)
    squatted = temp / f"mcp-app-bridge-{os.geteuid()}"
    if squat == "link":
        squatted.symlink_to(runtime)
    else:
        squatted.mkdir(mode=0o700)
        os.chown(squatted, OTHER_UID, OTHER_UID)
    path = socket_path_for(deep, temp_root=str(temp), runtime_root=str(runtime))
    assert path.parent == runtime / "mcp-app-bridge" and stat.S_IMODE(os.lstat(path.parent).st_mode) == 0o700
    assert socket_path_for(deep, temp_root=str(temp), runtime_root=str(runtime)) == path, "the same discovery file, the same socket"
    with pytest.raises(UnsafeFileError, match="symbolic link" if squat == "link" else f"belongs to uid {OTHER_UID}"):
        socket_path_for(deep, temp_root=str(temp), runtime_root=str(short_root / "none"))  # no runtime folder: the first refusal


def test_a_stale_socket_is_replaced_a_live_one_and_anything_else_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = folder / "app.sock"
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(path))
    dead.close()  # what a killed run leaves: a socket file nobody listens on
    sock, bound = bind_private_socket(path)
    try:
        assert stat.S_ISSOCK(os.lstat(path).st_mode) and stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        with pytest.raises(OSError, match="another server accepts connections"):
            bind_private_socket(path)  # a live one
        assert os.lstat(path).st_ino == bound.inode
    finally:
        sock.close()
    remove_socket_file(bound)
    assert not path.exists()

    target = folder / "target"
    target.write_text("x")
    path.symlink_to(target)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        bind_private_socket(path)
    assert path.is_symlink() and target.read_text() == "x"
    path.unlink()
    path.write_text("data")
    with pytest.raises(UnsafeFileError, match="not a socket"):
        bind_private_socket(path)
    assert path.read_text() == "data"


def test_a_socket_that_replaced_this_servers_is_left_alone_whatever_its_inode(tmp_path: Path) -> None:
    """A successor replaced the stale socket (the inode number may be the same on ext4):
    the clean-up of the server that bound the first leaves it."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = folder / "app.sock"
    sock, bound = bind_private_socket(path)
    sock.close()  # it stopped listening: a successor finds the socket stale
    successor, theirs = bind_private_socket(path)
    try:
        remove_socket_file(bound)
        assert path.is_socket() and os.lstat(path).st_ino == theirs.inode, "the successor's socket was removed"
        assert bound.handle is None, "the descriptor is given back"
    finally:
        successor.close()
        remove_socket_file(theirs)
    assert not path.exists()


@as_root
def test_another_users_stale_socket_is_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = folder / "app.sock"
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(path))
    dead.close()
    os.lchown(path, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeFileError, match=f"belongs to uid {OTHER_UID}"):
        bind_private_socket(path)
    assert os.lstat(path).st_uid == OTHER_UID


@pytest.mark.process
def test_app_server_publishes_http_unix_and_accepts_host_localhost_only(tmp_path: Path) -> None:
    discovery = tmp_path / "state" / "mcp-endpoint.json"
    server = AppServer(inner, discovery_file=discovery, link="unix")
    statuses: list[int] = []
    thread = threading.Thread(target=lambda: statuses.append(server.run()), daemon=True)
    thread.start()
    try:
        assert wait_until(discovery.exists, START_TIMEOUT)
        published = json.loads(discovery.read_text())
        assert published["url"] == server.url and server.link == "unix"
        socket_path, target = split_unix_url(published["url"])
        assert socket_path == str(discovery.with_name(SOCKET_FILE_NAME)) and target == "/mcp"
        assert stat.S_IMODE(os.lstat(socket_path).st_mode) == 0o600
        with httpx.Client(transport=httpx.HTTPTransport(uds=socket_path), timeout=10) as client:
            token = {"Authorization": f"Bearer {server.token}"}
            assert client.get("http://localhost/mcp", headers=token).text == "inner"
            assert client.get("http://127.0.0.1:8000/mcp", headers=token).status_code == 421
            assert client.get("http://localhost/mcp").status_code == 401
    finally:
        server.stop()
        thread.join(START_TIMEOUT)
    assert statuses == [0] and not discovery.exists() and not os.path.exists(socket_path)


def test_auto_falls_back_to_tcp_with_a_log_line_and_unix_says_why(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    server = AppServer(inner, link="auto", socket_path=folder / "app.sock")
    with caplog.at_level("WARNING", logger="bridge.appserver"):
        url = server.bind()
    assert url.startswith("http://127.0.0.1:") and server.link == "tcp" and not (folder / "app.sock").exists()
    assert "serving on TCP (127.0.0.1) instead of a Unix domain socket" in caplog.text and "mode 0777" in caplog.text
    with pytest.raises(UnsafeFileError, match="mode 0777"):
        AppServer(inner, link="unix", socket_path=folder / "app.sock").bind()
