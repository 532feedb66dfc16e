"""Shared fixtures: a real MCP app server on 127.0.0.1, and an environment without proxies.

``examples/app_server.py`` (the official MCP SDK's server behind uvicorn) is started with
``sys.executable`` on a free port. The fixtures wait at most `LISTEN_TIMEOUT` seconds for
its ``LISTENING <url>`` line and always stop it at teardown.

- ``app_server``: one default (stateful, SSE) server shared by the whole session. Tests
  must not kill it; start a private one instead.
- ``start_app_server(*extra_args)``: starts a private server per call, e.g.
  ``start_app_server("--json-response")`` or ``start_app_server("--stateless")``; to
  "restart the app" on the same port, kill one and call
  ``start_app_server("--port", str(old.port))``. All are stopped when the test ends.

Each server's stderr (SDK logs and uvicorn's access log, e.g. ``"DELETE /mcp HTTP/1.1"
200``) goes to a file: read it with ``.stderr_text()`` or wait for a line with
``.wait_for_stderr("DELETE /mcp")``.

The run's environment is its own (``support.isolation``): a private HOME and TMPDIR, no
XDG folder variables and no ``MCP_APP_BRIDGE_*`` variable but the harness's, whatever the
caller's session holds.

For the desktop-app lifecycle (``tests/process/test_lifecycle.py``): apps started by a bridge are
not children of the test, so ``reap_apps`` kills, at teardown, every pid an app wrote to a
``--started-file``; ``isolated_env`` gives a bridge its own HOME and state folder (its
cross-process launch lock lives there); ``make_secret_file`` writes a 0600 secret.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from support import isolation
from support.apps import (
    PLATFORM_MARKERS,
    PROXY_VARS,
    AppServer,
    launch_app_server,
    pids_mentioning,
    read_pids,
    stop_pids,
)

# Property tests: no deadline (speed is measured by the benchmarks, never asserted; a
# loaded CI machine would turn it into flakes), and in CI the same examples on every run
# (derandomized), so a red run is the code's, reproducible from the log. Locally each run
# draws new examples, which is where new failures are found.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


#: A test that starts a subprocess must be marked `process` (support/spawnguard.py).
pytest_plugins = ["support.spawnguard"]

_PRIVATE_HOME = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """Isolate the run from the caller's environment (``support.isolation``) before
    anything is collected or started."""
    config.stash[_PRIVATE_HOME] = isolation.isolate()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _PRIVATE_HOME in config.stash:
        isolation.release(config.stash[_PRIVATE_HOME])


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove proxy variables (both spellings) for every test: loopback traffic must not see them."""
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """Give the next test the logging this one found: a test that runs a command in process
    (click's runner, ``run_stdio``) configures logging as the bridge does at start
    (bridge/cli/diagnostics.py: the root logger's level and handlers, the ``bridge``
    logger's level, ``logging.captureWarnings``), and a level left at ERROR would hide a
    later test's warnings from ``caplog``."""
    root = logging.getLogger()
    own = logging.getLogger("bridge")
    saved = (root.level, root.handlers[:], own.level)
    yield
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]
    own.setLevel(saved[2])
    logging.captureWarnings(False)


@pytest.fixture
def private_state_folder(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A per-user state folder of the test's own (platformdirs reads ``XDG_STATE_HOME`` on
    Linux): the catalog an in-process bridge with a launcher writes
    (bridge/app/servedcatalog.py) must neither reach the user's real one nor answer for
    another test. Autouse in tests/serve and tests/streamable (their conftest.py); not
    everywhere, as ``config install`` writes a set ``XDG_STATE_HOME`` into entries."""
    folder = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(folder))
    return folder


@pytest.fixture
def start_app_server(tmp_path: Path) -> Iterator[Callable[..., AppServer]]:
    """Factory: ``start_app_server(*extra_args) -> AppServer``; every server is stopped at teardown."""
    started: list[AppServer] = []

    def start(*extra_args: str) -> AppServer:
        server = launch_app_server(*extra_args, log_path=tmp_path / f"app_server_{len(started)}.log")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def app_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    """The default stateful SSE app server, shared by the whole test session (do not kill it)."""
    server = launch_app_server(log_path=tmp_path_factory.mktemp("app_server") / "app_server.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def reap_apps() -> Iterator[Callable[[Path], Path]]:
    """``reap_apps(started_file) -> started_file``: at teardown every process listed in
    that file (apps launched by a bridge, detached from it) is stopped, and so is every
    process whose command line names the file's folder (on Linux: an app launched so late
    that it has not written its pid yet, or a launched program that never writes one)."""
    files: list[Path] = []

    def register(started_file: Path) -> Path:
        files.append(started_file)
        return started_file

    yield register
    for attempt in range(2):  # again after a pause: a launch may have been on its way
        if attempt:
            time.sleep(0.2)
        pids = [pid for path in files for pid in read_pids(path)]
        pids += [pid for path in files for pid in pids_mentioning(str(path.parent))]
        stop_pids(pids)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for name, (label, here) in PLATFORM_MARKERS.items():
        for mark in item.iter_markers(name):
            if len(mark.args) != 1 or not isinstance(mark.args[0], str) or not mark.args[0].strip():
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{name} needs its reason as its one argument")
            if not here():
                pytest.skip(f"{label}: {mark.args[0]}")


@pytest.fixture(params=["httpx", "pool"])
def wire(request: pytest.FixtureRequest) -> str:
    """Which transport the hazard tests run against: respx through the httpx adapter, or
    the bridge's own pool against a scripted server on 127.0.0.1."""
    if request.param == "pool" and request.node.get_closest_marker("httpx_only") is not None:
        pytest.skip("a client-side failure no server can cause; test_upstream_pool.py covers it over the pool")
    return str(request.param)


@pytest.fixture
def run_bridge(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``helpers.running_bridge`` over the test's ``wire`` (``"httpx"`` when it asks for none)."""
    import functools

    from support.helpers import running_bridge

    wire = request.getfixturevalue("wire") if "wire" in request.fixturenames else "httpx"
    return functools.partial(running_bridge, wire=wire)




@pytest.fixture
def anyio_backend() -> str:
    """Every async test runs on asyncio (the bridge's own loop)."""
    return "asyncio"


# The lifecycle harness's fixture, for every test that asks for it.
from support.lifecycle import desk  # noqa: E402,F401
