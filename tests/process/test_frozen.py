"""The frozen one-file executable as shipped: process lifetime and the extraction folder.

These run only when ``MCP_APP_BRIDGE_EXE`` names the PyInstaller one-file build (CI sets
it after building); the protocol behaviour of the same file is covered by running
processes.py against it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.apps import process_alive
from support.https_app import launch_https_app, make_certificate
from support.processes import BRIDGE_EXE_VAR, base_env, handshake, start_bridge, wait_until

from bridge.stdio.fds import is_onefile_child

SPEC = Path(__file__).resolve().parents[2] / "build" / "mcp-app-bridge.spec"

frozen = pytest.mark.skipif(not os.environ.get(BRIDGE_EXE_VAR), reason=f"{BRIDGE_EXE_VAR} names no frozen executable")
posix = pytest.mark.posix_only("POSIX signals, pgrep, ps and TMPDIR")


def test_build_spec_bakes_in_utf8_mode_unbuffered_io_console_and_the_anyio_backend() -> None:
    """pyinstaller/pyinstaller#9368, #8426 and #7217: a frozen program ignores PYTHONUTF8/PYTHONUNBUFFERED given at
    run time, and a windowed one has no stdio at all, so the spec must set them."""
    spec = SPEC.read_text(encoding="utf-8")
    assert '("u", None, "OPTION")' in spec
    assert '("X utf8", None, "OPTION")' in spec
    assert "console=True" in spec
    assert '"anyio._backends._asyncio"' in spec


def test_plain_python_is_not_taken_for_a_onefile_child() -> None:
    assert not is_onefile_child()


def children_of(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(child) for child in found]


def alive(pid: int) -> bool:
    return process_alive(pid)  # /proc on Linux (zombies count as gone), kill(pid, 0) on macOS


@pytest.fixture
def private_tmpdir(tmp_path: Path) -> Path:
    """The bootloader extracts into TMPDIR: a private one shows what it leaves behind."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


@pytest.mark.frozen
@frozen
@posix
@pytest.mark.parametrize("how", ["stdin_eof", "sigterm"])
def test_onefile_exits_whole_and_removes_its_extraction_folder(app_server, private_tmpdir: Path, how: str) -> None:
    env = {**os.environ, "TMPDIR": str(private_tmpdir)}
    with start_bridge(app_server.url, env=env) as bridge:
        handshake(bridge)
        (inner,) = children_of(bridge.proc.pid)
        assert list(private_tmpdir.glob("_MEI*")), "the one-file build extracts itself"
        started = time.monotonic()
        if how == "stdin_eof":
            bridge.close_stdin()
        else:
            bridge.proc.send_signal(signal.SIGTERM)
        assert bridge.wait(5) == 0
        assert wait_until(lambda: not alive(inner), 5)
        assert time.monotonic() - started < 2.5
        assert list(private_tmpdir.glob("_MEI*")) == []


@pytest.mark.frozen
@frozen
@posix
def test_inner_process_exits_when_the_bootloader_is_killed(app_server, private_tmpdir: Path) -> None:
    """pyinstaller/pyinstaller#4858: SIGKILL of the bootloader leaves the client's stdin pipe open, so only
    the parent-death watchdog can tell the inner process to go."""
    if sys.platform == "win32":  # its marker skips it first; this tells mypy --platform
        pytest.skip("POSIX signals")
    env = {**os.environ, "TMPDIR": str(private_tmpdir)}
    bridge = start_bridge(app_server.url, env=env)
    inner = None
    try:
        handshake(bridge)
        (inner,) = children_of(bridge.proc.pid)
        bridge.proc.kill()
        bridge.proc.wait(5)
        assert wait_until(lambda: not alive(inner), 5), "the inner process outlived its bootloader"
    finally:
        if inner is not None and alive(inner):
            os.kill(inner, signal.SIGKILL)
        bridge.kill()
        bridge.close_stdin()
        bridge.join_readers()


@pytest.mark.frozen
@frozen
def test_frozen_version_matches_the_package() -> None:
    from bridge import __version__

    done = subprocess.run([os.environ[BRIDGE_EXE_VAR], "--version"], capture_output=True, timeout=30)
    assert done.returncode == 0
    assert __version__.encode() in done.stdout
    assert sys.platform == "win32" or b"\r" not in done.stdout


@pytest.mark.frozen
@frozen
@pytest.mark.parametrize(
    "command",
    [["config", "print", "--client", "codex", "--name", "app", "--url", "http://127.0.0.1:9/mcp"], ["check", "--help"]],
)
def test_every_command_runs_from_the_frozen_file(command: list[str]) -> None:
    """The main group loads `config` by its module name (lazily): the build must carry the
    modules its analysis cannot see, or the shipped file fails at `config install`."""
    done = subprocess.run([os.environ[BRIDGE_EXE_VAR], *command], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")


PYINSTALLER_BOOTSTRAP_EXTENSIONS = {"_ctypes", "zlib"}
"""Loaded by PyInstaller's own bootstrap in every frozen program: ctypes (its ctypes hooks)
and zlib (reading the module archive)."""


def extension_modules_after_handshake(url: str, env: dict[str, str] | None = None) -> set[str]:
    """Names of the Python extension modules mapped by the bridge's Python process once it has
    answered ``initialize`` (the inner process of a one-file build), from /proc/PID/maps."""
    with start_bridge(url, env=env) as bridge:
        handshake(bridge)
        python_pid = (children_of(bridge.proc.pid) or [bridge.proc.pid])[0]
        maps = Path(f"/proc/{python_pid}/maps").read_text(encoding="utf-8").splitlines()
    paths = {line.split(maxsplit=5)[5] for line in maps if len(line.split(maxsplit=5)) == 6}
    return {Path(path).name.split(".")[0] for path in paths if ".cpython-" in path or ".abi3." in path}


@pytest.fixture(scope="module")
def https_app_and_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """The example app over TLS (tests/support/https_app.py) and a bridge environment that trusts it."""
    made = make_certificate(tmp_path_factory.mktemp("tls"))
    if made is None:
        pytest.skip("no `openssl` command here: it makes the test's self-signed certificate")
    server = launch_https_app(*made, log_path=tmp_path_factory.mktemp("https_app") / "app.log")
    try:
        yield server.url, base_env(SSL_CERT_FILE=str(made[0]), SSL_CERT_DIR=None)
    finally:
        server.stop()


@pytest.mark.frozen
@frozen
@pytest.mark.linux_only("reads /proc/PID/maps")
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_the_frozen_start_loads_no_extension_module_that_python_m_bridge_does_not(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    """The frozen file starts at the cost of `python -m bridge` plus its unpack, not more: it
    imports what the source start imports (build/mcp-app-bridge.spec). PyInstaller's inspect
    hook imported zipfile with bz2 and lzma at every start; over https://, where httpx brings
    anyio in, a frozen anyio that cannot read its own source imported its whole API (pickle,
    tempfile, random)."""
    if scheme == "https":
        url, env = request.getfixturevalue("https_app_and_env")
    else:
        url, env = request.getfixturevalue("app_server").url, None
    frozen_extensions = extension_modules_after_handshake(url, env)
    monkeypatch.delenv(BRIDGE_EXE_VAR)
    source_extensions = extension_modules_after_handshake(url, env)
    assert "_socket" in frozen_extensions and "_socket" in source_extensions  # the reading works
    if scheme == "https":
        assert "_ssl" in frozen_extensions and "_ssl" in source_extensions
    assert frozen_extensions - source_extensions - PYINSTALLER_BOOTSTRAP_EXTENSIONS == set()


# -- the AI clients' kill patterns (issue 19): N runs leave O(1) bytes in TMPDIR ------------

KILL_RUNS = 20


def folders_and_bytes(tmpdir: Path) -> tuple[int, int]:
    folders = [entry for entry in tmpdir.iterdir() if entry.name.startswith("_MEI")]
    size = sum(path.stat().st_size for folder in folders for path in folder.rglob("*") if path.is_file() and not path.is_symlink())
    return len(folders), size


def read_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    """One stdout line, waiting at most ``timeout`` seconds for it (POSIX: select on the pipe)."""
    import selectors

    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    buffer = b""
    deadline = time.monotonic() + timeout
    try:
        while not buffer.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                raise AssertionError(f"no line from the bridge within {timeout:g} s (so far {buffer[:200]!r})")
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                raise AssertionError(f"the bridge closed stdout (so far {buffer[:200]!r})")
            buffer += chunk
    finally:
        selector.close()
    return buffer


def start_in_own_group(url: str, tmpdir: Path) -> subprocess.Popen[bytes]:
    """As the clients start a server: pipes, and (like Codex) a process group of its own."""
    return subprocess.Popen(
        [os.environ[BRIDGE_EXE_VAR], "--url", url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(tmpdir)},
        start_new_session=True,
    )


def answer_initialize(proc: subprocess.Popen[bytes]) -> None:
    import json

    assert proc.stdin is not None
    proc.stdin.write(json.dumps(initialize_request()).encode() + b"\n")
    proc.stdin.flush()
    assert b'"result"' in read_line(proc, 30)


def initialize_request() -> dict[str, object]:
    from support.processes import initialize

    return initialize(0)


def end_group(proc: subprocess.Popen[bytes]) -> None:
    """Whatever the pattern left running (an orphaned inner process exits by itself within
    its watchdog's 0.5 s): give it 2 s, then SIGKILL the group, and reap the bootloader.
    Zombies do not count: the bootloader is one until it is reaped here, and its inner
    process one after a group SIGKILL wherever PID 1 reaps nothing (a container's); with
    ``pgrep -g``, which lists them, the 2 s were spent on every run."""
    if sys.platform == "win32":  # its marker skips it first; this tells mypy --platform
        pytest.skip("POSIX signals")

    def group_gone() -> bool:
        proc.poll()
        listing = subprocess.run(["ps", "-A", "-o", "pgid=,stat="], capture_output=True, text=True).stdout
        rows = (line.split() for line in listing.splitlines())
        return not any(len(row) == 2 and row[0] == str(proc.pid) and not row[1].startswith("Z") for row in rows)

    wait_until(group_gone, 2)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)
    for pipe in (proc.stdin, proc.stdout):
        try:
            if pipe is not None:
                pipe.close()
        except OSError:
            pass


def claude_code_kill(proc: subprocess.Popen[bytes]) -> None:
    """Claude Code ends every server: SIGINT, SIGTERM 0.11 s later, SIGKILL 0.52 s later, to the pid."""
    if sys.platform == "win32":  # its marker skips it first; this tells mypy --platform
        pytest.skip("POSIX signals")
    answer_initialize(proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.11)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.52 - 0.11)
    proc.send_signal(signal.SIGKILL)


def codex_kill(proc: subprocess.Popen[bytes]) -> None:
    """Codex: SIGTERM to the process group, SIGKILL to it 7-9 ms later."""
    if sys.platform == "win32":  # its marker skips it first; this tells mypy --platform
        pytest.skip("POSIX signals")
    answer_initialize(proc)
    os.killpg(proc.pid, signal.SIGTERM)
    time.sleep(0.008)
    os.killpg(proc.pid, signal.SIGKILL)


def group_kill_at_start(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL of the whole group 5 ms after start: the bootloader is still unpacking."""
    if sys.platform == "win32":  # its marker skips it first; this tells mypy --platform
        pytest.skip("POSIX signals")
    time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.frozen
@frozen
@posix
@pytest.mark.timeout(300)
@pytest.mark.parametrize("pattern", [claude_code_kill, codex_kill, group_kill_at_start], ids=lambda f: f.__name__)
def test_runs_killed_as_the_clients_do_leave_nothing_behind(app_server, private_tmpdir: Path, pattern) -> None:
    """Each start removes what killed runs left (bridge/system/unpacksweep.py): 20 runs killed
    in a row, then one clean run once the youngest left-over is past the grace period,
    leave no unpack folder, where main's build left 3, 20 and 20 of them (17 MB each).
    A folder whose run never took its lock (killed while unpacking, or its bootloader's own
    clean-up cut short by the SIGKILL) waits out the grace period; one whose bridge was
    killed goes at the next start."""
    from bridge.system.unpacksweep import GRACE_SECONDS

    for _ in range(KILL_RUNS):
        proc = start_in_own_group(app_server.url, private_tmpdir)
        try:
            pattern(proc)
        finally:
            end_group(proc)
    time.sleep(GRACE_SECONDS + 0.5)
    proc = start_in_own_group(app_server.url, private_tmpdir)
    answer_initialize(proc)
    time.sleep(0.5)  # the sweep runs beside the start-up
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(10) == 0
    end_group(proc)
    left = sorted(str(path.relative_to(private_tmpdir)) for path in private_tmpdir.rglob("*"))
    assert folders_and_bytes(private_tmpdir) == (0, 0), left
