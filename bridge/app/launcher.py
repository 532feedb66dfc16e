"""ensure_running: start the app when nothing listens, once, across every bridge (docs/discovery.md, "Starting the app").

AI clients start two to five copies of a stdio server at once (one per window, plus a
probe). When the app is down they all see "connection refused" together, and only one of
them may launch it. :class:`Launcher` therefore serializes twice: an ``asyncio.Lock`` inside
the process and a ``filelock`` lock file across processes. Whoever gets the lock first
checks whether the app already accepts connections (another bridge may have started it
meanwhile), whether the discovery file names a live process (the app is starting: wait
for it), and only then launches.

The launched app is detached from the bridge: its stdin, stdout and stderr go to the null
device (or a log file), it runs in its own session / process group, without a shell, and
without the environment variables a PyInstaller-frozen bridge adds for itself, so the
client sees EOF when the bridge exits and the app's own bootloader does not mistake itself
for part of the bridge (pyinstaller/pyinstaller#4858). It outlives the bridge on purpose, so its
environment carries no bridge credential (the ``--token-env`` variable, ``MCP_APP_BRIDGE_*``).

Waiting is bounded by ``launch_timeout_seconds``; progress lines go to the log (stderr)
every few seconds, never to stdout.

One launch at a time, with a memory (per bridge process):

- a child this bridge launched that has not listened yet is waited for, never started a
  second time while it runs (a slow app, or one stuck before listening, stays one process);
- it is never killed by the bridge: a desktop app may legitimately take longer than the
  timeout (a first-run dialog, an update, a login window the user is filling in), and it
  is detached on purpose. A child that exits is reaped (``poll``) at the next attempt;
  ``check --launch`` stops the child it started when that child did not listen in time
  (:meth:`Launcher.stop_unready_child`), so a diagnostic leaves nothing behind;
- a failed attempt is remembered: requests in the next :func:`retry_delay_seconds`
  (5 s after the first failure, doubling with each failure in a row, at most 60 s) get the
  same failure at once, with the time of the next attempt, instead of one more launch and
  one more launch timeout each. A success, or the app found listening, clears the memory.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.config import DEFAULT_APP_NAME, DEFAULT_LAUNCH_TIMEOUT_SECONDS, in_sentence
from ..core.errors import AppLaunchFailedError, AppNotRunningError, AppUnreachableError
from ..core.policy import LAUNCH_RETRY_BACKOFF
from ..system.cancelscope import current_time
from ..system.logsink import open_log_file
from ..system.privatefile import state_file_digest
from .discovery import DiscoveryError, Endpoint, pid_is_the_apps, unpublished_app_hint

if TYPE_CHECKING:
    import filelock

__all__ = ["Launcher", "EnsureRunningCallable", "launch_environment", "default_lock_path", "spawn_on_windows", "state_folder", "package_state_problem", "log_package_state"]

log = logging.getLogger("bridge.launcher")

#: A library app's own ``ensure_running``: start the app (sync or async); the bridge then
#: waits until it accepts connections.
EnsureRunningCallable = Callable[[], "None | Awaitable[None]"]

#: Seconds between connection attempts while waiting for the app.
POLL_INTERVAL_SECONDS = 0.1
#: Seconds between progress lines while waiting.
PROGRESS_INTERVAL_SECONDS = 5.0


def retry_delay_seconds(failures_in_a_row: int) -> float:
    """Seconds before the next launch attempt after ``failures_in_a_row`` (>= 1) failed
    ones: 5, 10, 20, 40, then 60 s each time."""
    return LAUNCH_RETRY_BACKOFF.seconds(failures_in_a_row - 1)


def state_folder() -> Path:
    """The bridge's own per-user state folder (``platformdirs.user_state_path``:
    ``%LOCALAPPDATA%\\mcp-app-bridge`` on Windows; found without platformdirs on Linux,
    ``bridge/app/statefolder.py``), holding the launch locks and the served catalogs."""
    from .statefolder import user_state_path

    return user_state_path("mcp-app-bridge")


def package_state_problem(package: str | None, environ: dict[str, str] | None = None, folder: Path | None = None) -> str | None:
    """For a bridge inside the MSIX package ``package`` (its full name; ``None``: in none),
    what is wrong with its state ``folder`` (default :func:`state_folder`) and the fix
    (``bridge.system.msix.state_folder_problem``); ``None`` when nothing is."""
    from ..system.msix import package_family_name, state_folder_problem

    if package is None:
        return None
    return state_folder_problem(
        state_folder() if folder is None else folder, package_family_name(package), os.environ if environ is None else environ
    )


def log_package_state(
    *,
    platform: str | None = None,
    package: Callable[[], str | None] | None = None,
    environ: dict[str, str] | None = None,
    folder: Path | None = None,
) -> None:
    """At start, on Windows (``platform``, default this one): a warning when this bridge runs
    inside an MSIX package (``package()``, default ``bridge.system.msix.current_package``)
    and its state folder is not in the real profile (:func:`package_state_problem`), or,
    inside a package, one line saying the folder is fine."""
    if (sys.platform if platform is None else platform) != "win32":
        return
    if package is None:
        from ..system.msix import current_package

        name = current_package()
    else:
        name = package()
    problem = package_state_problem(name, environ, folder)
    if problem:
        log.warning("%s", problem)
    elif name is not None:
        log.info("this bridge runs inside the MSIX package %s; its state folder %s is in the real profile", name,
                 state_folder() if folder is None else folder)


def default_lock_path(key: str) -> Path:
    """The per-user lock file shared by every bridge that may launch the same app."""
    digest = state_file_digest(key)
    return state_folder() / "locks" / f"launch-{digest}.lock"


#: Variables with this prefix are the bridge's own; the launched app never gets them.
BRIDGE_VARIABLE_PREFIX = "MCP_APP_BRIDGE_"


def launch_environment(
    environ: dict[str, str] | None = None, *, frozen: bool | None = None, remove: Sequence[str] = ()
) -> dict[str, str]:
    """The environment for the launched app: the bridge's, minus PyInstaller's own, minus
    every bridge credential.

    The app is detached and outlives the bridge (that is intended), so nothing of the
    bridge's secrets may travel with it: the ``--token-env`` variable (``remove``) and
    every ``MCP_APP_BRIDGE_*`` variable are dropped.

    A frozen one-file bridge runs with ``_PYI_*`` variables and a library path pointing into
    its extraction folder (the original kept as ``LD_LIBRARY_PATH_ORIG`` when there was
    one). Another PyInstaller app started with them believes it is a stage of *our* launch
    and refuses to start (PyInstaller ≥ 6.22.1), and any app would load our libraries.

    Args:
        environ: the environment to clean (default: this process's).
        frozen: whether this bridge is frozen (default: ``sys.frozen``).
        remove: more variables to drop (the ``--token-env`` variable).
    """
    env = dict(os.environ if environ is None else environ)
    dropped = set(remove)
    for name in list(env):
        if name.startswith(("_PYI_", BRIDGE_VARIABLE_PREFIX)) or name == "_MEIPASS2" or name in dropped:
            del env[name]
    if getattr(sys, "frozen", False) if frozen is None else frozen:
        for name in ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "LIBPATH"):
            original = env.pop(f"{name}_ORIG", None)
            if original is not None:
                env[name] = original
            else:
                env.pop(name, None)
    return env


class Launcher:
    """Start the app if needed and wait until it accepts connections.

    Args:
        endpoint: where the app listens (re-read from the discovery file while waiting).
        command: ``--launch`` as argv (no shell), or ``None``.
        ensure_running: a library callable that starts the app, or ``None``.
        timeout_seconds: bound on the whole wait (launch included).
        app_name: how the app is named in messages.
        lock_path: the cross-process lock file.
        log_file: where the launched app's stdout/stderr go (default: the null device).
        probe: ``async (url) -> bool``, whether the app accepts connections at ``url``
            (``bridge.transport.verifiedconnect.verified_probe``: the road every connection
            takes, listener check included; tests inject their own).
        secret_variables: environment variables holding a bridge credential (the
            ``--token-env`` one); the launched app does not get them.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        command: Sequence[str] | None = None,
        ensure_running: EnsureRunningCallable | None = None,
        timeout_seconds: float = DEFAULT_LAUNCH_TIMEOUT_SECONDS,
        app_name: str = DEFAULT_APP_NAME,
        lock_path: Path | None = None,
        log_file: Path | None = None,
        probe: Callable[[str], Awaitable[bool]],
        secret_variables: Sequence[str] = (),
    ) -> None:
        self._endpoint = endpoint
        self._command = list(command) if command else None
        self._callable = ensure_running
        self._timeout_seconds = timeout_seconds
        self._app = app_name
        self._lock_path = lock_path
        self._log_file = log_file
        self._probe = probe
        self._secret_variables = tuple(secret_variables)
        self._lock = asyncio.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._file_lock_object: filelock.BaseFileLock | None = None
        self._failure: str | None = None  # why the last attempt failed (cleared by a success)
        self._failures_in_a_row = 0
        #: Why the last launch failed, without what follows (the retry, what is left running):
        #: for ``check --launch``, which says what it did itself. ``None`` after a success.
        self.failure_cause: str | None = None
        self._retry_at = 0.0  # loop time before which a failure is answered from memory

    @property
    def configured(self) -> bool:
        """Whether this launcher can start the app at all."""
        return self._command is not None or self._callable is not None

    async def ensure_running(self) -> None:
        """Make sure the app accepts connections, starting it at most once at a time.

        A child this bridge started that has not listened yet is waited for, not started
        again. After a failed attempt, calls within :func:`retry_delay_seconds` get that
        failure at once (the app is still probed first: started by hand, it is used).

        Raises:
            AppUnreachableError: (not recoverable) the app is down and nothing is
                configured to start it.
            AppLaunchFailedError: (not recoverable) starting it failed, or it did not
                accept connections within the launch timeout (now, or in the attempt
                remembered).
        """
        async with self._lock:
            self._endpoint.reload()  # the app may be back, on another port
            if await self._accepts_connections():
                self._forget_failure()
                return
            problem = self._endpoint.problem
            if problem is not None and not problem.missing:
                # A refused discovery file: a second instance would overwrite it and hide why.
                raise AppUnreachableError(f"{self._app} cannot be reached: {problem}.", recoverable=False)
            if not self.configured:
                raise AppNotRunningError(
                    f"{self._app} is not running. Start it and try again"
                    f"{self._why_unreachable()}.",
                    recoverable=False,
                )
            now = current_time()
            if self._failure is not None and now < self._retry_at:
                # Not one more launch (and one more launch timeout) per request: the same answer.
                raise AppLaunchFailedError(
                    f"{self._failure} The bridge tries again in {self._retry_at - now:.0f} s.", recoverable=False
                )
            self.failure_cause = None
            try:
                await self._launch_under_file_lock()
            except AppLaunchFailedError as exc:
                self.failure_cause = self.failure_cause or exc.message
                self._failures_in_a_row += 1
                delay = retry_delay_seconds(self._failures_in_a_row)
                self._failure = exc.message
                self._retry_at = current_time() + delay
                raise AppLaunchFailedError(f"{exc.message} The bridge tries again in {delay:.0f} s.", recoverable=False) from None
            self._forget_failure()

    def _forget_failure(self) -> None:
        self._failure = None
        self._failures_in_a_row = 0

    @property
    def started_pid(self) -> int | None:
        """The pid of the app process this launcher started, while it runs; else ``None``
        (nothing started, or it exited)."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def stop_unready_child(self) -> int | None:
        """Stop (kill, with its process group) and reap the child this launcher started,
        if it is still running; for ``check --launch`` after a failed launch, which must
        leave nothing behind. Returns its pid, or ``None`` when there was none running.
        The bridge itself never calls this: a launched app is left running (see the
        module's docstring)."""
        process = self._process
        self._process = None
        if process is None or process.poll() is not None:
            return None
        _kill_tree(process)
        return process.pid

    async def _launch_under_file_lock(self) -> None:
        deadline = current_time() + self._timeout_seconds
        lock = self._file_lock()
        if lock is not None:
            import filelock

            # Polled from the event loop, never blocked in a thread: a shutdown (stdin EOF,
            # SIGTERM) can interrupt the wait at once.
            while True:
                try:
                    lock.acquire(timeout=0)
                    break
                except filelock.Timeout:
                    if current_time() >= deadline:
                        raise AppLaunchFailedError(
                            f"{self._app} is being started by another bridge that did not finish within "
                            f"{self._timeout_seconds:g} s (--launch-timeout).",
                            recoverable=False,
                        ) from None
                    await asyncio.sleep(POLL_INTERVAL_SECONDS)
        try:
            self._endpoint.reload()
            if await self._accepts_connections():
                return  # another bridge started it while we waited for the lock
            if self._process is not None and self._process.poll() is not None:
                self._process = None  # an app this bridge started has exited (and is reaped now)
            discovery = self._endpoint.discovery
            if discovery is not None and discovery.pid is not None and pid_is_the_apps(discovery):
                log.info("%s (pid %d) is starting; waiting for it to accept connections", self._app, discovery.pid)
                waiting_for = f"pid {discovery.pid}, named by its discovery file, is running"
            elif self._process is not None:
                log.warning(
                    "%s (pid %d, started earlier by this bridge) has not accepted connections yet; waiting for it "
                    "instead of starting another", self._app, self._process.pid,
                )
                waiting_for = f"it was started earlier (pid {self._process.pid}) and is still running"
            else:
                await self._start()
                waiting_for = None
            await self._wait_until_listening(deadline, waiting_for)
        finally:
            if lock is not None:
                lock.release()

    def _file_lock(self) -> filelock.BaseFileLock | None:
        if self._lock_path is None:
            return None
        if self._file_lock_object is None:
            self._lock_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # thread_local=False: one lock for the whole process, whichever thread uses it.
            import filelock  # imported when a launch is needed: it costs ~8 ms and ~1 MB at start

            self._file_lock_object = filelock.FileLock(str(self._lock_path), thread_local=False)
        return self._file_lock_object

    async def _start(self) -> None:
        if self._callable is not None:
            log.info("starting %s", in_sentence(self._app))
            try:
                outcome = self._callable()
                import inspect  # only a library app's ensure_running hook comes here

                if inspect.isawaitable(outcome):
                    await outcome
            except Exception as exc:
                raise AppLaunchFailedError(
                    f"{self._app} is not running and could not be started: {type(exc).__name__}: {exc}.",
                    recoverable=False,
                ) from exc
            return
        assert self._command is not None
        log.info("starting %s: %s (its arguments not shown)", in_sentence(self._app), self._command[0])
        try:
            output = open_log_file(self._log_file) if self._log_file else subprocess.DEVNULL
        except OSError as exc:
            raise AppLaunchFailedError(f"{self._app} could not be started: the --launch-log {exc}.", recoverable=False) from None
        try:
            self._process = _spawn_detached(
                self._command,
                output,
                subprocess.STDOUT if self._log_file else subprocess.DEVNULL,
                launch_environment(remove=self._secret_variables),
            )
        except OSError as exc:
            raise AppLaunchFailedError(
                f"{self._app} is not running and could not be started: {exc.strerror or exc} "
                f"({self._command[0]}). Check the --launch command.",
                recoverable=False,
            ) from None
        finally:
            if self._log_file:
                output.close()  # type: ignore[union-attr]

    async def _wait_until_listening(self, deadline: float, waiting_for: str | None) -> None:
        """Wait for the app to accept connections. ``waiting_for``: what is waited for when
        this call started nothing (the messages must not say "was started")."""
        started = current_time()
        next_progress = started + PROGRESS_INTERVAL_SECONDS
        while True:
            self._endpoint.reload()
            if await self._accepts_connections():
                log.info("%s accepts connections after %.1f s", self._app, current_time() - started)
                return
            if self._process is not None and self._process.poll() not in (None, 0):
                status = self._process.returncode
                self._process = None  # reaped: a later attempt may launch again
                raise AppLaunchFailedError(
                    f"{self._app} was started but exited with status {status} before accepting "
                    "connections. Start it by hand to see why.",
                    recoverable=False,
                )
            now = current_time()
            if now >= deadline:
                if waiting_for is not None:
                    raise AppLaunchFailedError(
                        f"{self._app} did not accept connections within {self._timeout_seconds:g} s (--launch-timeout) "
                        f"and was not started again: {waiting_for}{self._why_unreachable(launched=True)}.",
                        recoverable=False,
                    )
                running = self._process is not None and self._process.poll() is None
                cause = (
                    f"{self._app} was started but did not accept connections within "
                    f"{self._timeout_seconds:g} s (--launch-timeout){self._why_unreachable(launched=True)}."
                )
                self.failure_cause = cause
                raise AppLaunchFailedError(
                    cause
                    + (f" It is still running (pid {self._process.pid}) and is left running; no second copy is "
                       "started while it runs." if running and self._process is not None else ""),
                    recoverable=False,
                )
            if now >= next_progress:
                log.warning("still waiting for %s (%.0f s of %g s)", in_sentence(self._app), now - started, self._timeout_seconds)
                next_progress = now + PROGRESS_INTERVAL_SECONDS
            await asyncio.sleep(POLL_INTERVAL_SECONDS)

    async def _accepts_connections(self) -> bool:
        try:
            url = self._endpoint.url()
        except DiscoveryError:
            return False
        return await self._probe(url)

    def _why_unreachable(self, *, launched: bool = False) -> str:
        source = self._endpoint.discovery_file
        try:
            url = self._endpoint.url()
        except DiscoveryError as exc:
            if launched and exc.missing and source is not None:
                return f": it never wrote the discovery file {source}, where the bridge looks for it"
            hint = unpublished_app_hint(self._app, source) if exc.missing else None
            return f" ({exc}; {hint})" if hint is not None else f" ({exc})"
        discovery = self._endpoint.discovery
        if discovery is not None and discovery.url == url:
            return f" (nothing accepts connections at {url}, read from the discovery file {source})"
        return f" (nothing accepts connections at {url})"


def _kill_tree(process: subprocess.Popen[bytes]) -> None:
    """Kill a detached child and its process group (POSIX: it leads its own session), and
    reap it; bounded (5 s)."""
    import contextlib
    import signal

    if sys.platform != "win32":
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def _spawn_detached(command: list[str], stdout: Any, stderr: Any, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start ``command`` without a shell, detached from the bridge's stdio and session."""
    options: dict[str, Any] = {
        "stdin": subprocess.DEVNULL,
        "stdout": stdout,
        "stderr": stderr,
        "env": env,
        "close_fds": True,
    }
    if sys.platform != "win32":
        return subprocess.Popen(command, start_new_session=True, **options)
    from ..system.msix import current_package  # pragma: no cover - Windows only

    started: subprocess.Popen[bytes] = spawn_on_windows(command, options, current_package())  # pragma: no cover
    return started  # pragma: no cover - Windows only


def spawn_on_windows(
    command: list[str],
    options: dict[str, Any],
    package: str | None,
    *,
    popen: Callable[..., Any] = subprocess.Popen,
    outside: Callable[..., Any] | None = None,
) -> Any:
    """Start the app on Windows for a bridge in ``package`` (``None``: in none), logging how
    (``bridge.system.msix.launch_plan``): outside the package with the desktop-app breakaway
    policy (``outside``, default ``bridge.system.msix.spawn_app_outside_package``), or, in no
    package or when that fails, with ``popen`` outside the client's job where it allows
    (``bridge.system.winapi.spawn_outside_job``). The arguments are stand-ins in the tests.

    Returns a ``subprocess.Popen``, or an object with its ``pid``/``poll``/``wait``/``kill``.
    Raises ``OSError`` when the app could not be started at all."""
    from ..system.msix import launch_plan, spawn_app_outside_package
    from ..system.winapi import spawn_outside_job

    outside_package, line = launch_plan(package)
    log.info("%s", line)
    if outside_package:
        try:
            return (outside or spawn_app_outside_package)(command, options["stdout"], options["stderr"], options["env"])
        except OSError as exc:
            log.warning(
                "could not start the app outside the package (%s); starting it inside, where its files are seen by "
                "this client's bridges only", exc.strerror or exc,
            )
    return spawn_outside_job(popen, command, options)

