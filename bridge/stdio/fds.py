"""The stdio ends: raw file-descriptor reads and writes, on the event loop where they
cannot block it, else each in its own daemon thread.

Why raw descriptors, and threads as the general path (docs/behaviour.md, "stdin framing" and
"stdout"; public reports: python/cpython#87694, pyinstaller/pyinstaller#8426 and #9368,
modelcontextprotocol/python-sdk#2433):

- ``os.read(fd, n)`` returns whatever one read yields, so a message is seen as soon as its
  newline arrives. ``sys.stdin.buffer.read(n)`` would wait for ``n`` bytes or EOF, and
  asyncio's pipe APIs cannot read Windows stdin at all.
- ``os.write(fd, …)`` sends UTF-8 bytes with no text layer: no locale encoding, no newline
  translation, nothing left in a buffer (a frozen executable ignores ``PYTHONUNBUFFERED``).
- The threads are daemons, so a read blocked on a pipe the client never closes, or a write
  to a client that stopped reading, can never keep the process alive at exit. asyncio's
  (and anyio's) worker threads are not daemons, which is why they are not used here.

The fast path (measured in bench/README.md: a thread hand-off each way cost more than the
rest of the bridge's work on a small call): where the descriptor can be watched by the
event loop's selector (POSIX pipes, sockets and terminals; not regular files, not Windows),
a read waits for readiness on the loop and then reads what is there, which cannot block;
a write of at most ``PIPE_BUF`` bytes to a pipe or socket is made on the loop when
``poll`` says it is writable, which POSIX guarantees cannot block for a pipe (a terminal
may report writable with less room, so it goes to the thread). Everything else (larger writes, a
client that is not reading, other descriptors) goes to the daemon threads. The descriptors
stay in blocking mode (``claim_stdio``): another process may share them.

Tests inject their own ends with the same two methods: ``receive()`` and ``send(data)``.
"""

from __future__ import annotations

import asyncio
import collections
import os
import queue
import select
import stat
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = [
    "ByteSource",
    "ByteSink",
    "FdReader",
    "FdWriter",
    "DEFAULT_READ_BYTES",
    "claim_stdio",
    "is_onefile_child",
    "watch_parent",
    "watch_parent_on_loop",
]

#: Bytes asked for per read while messages are small: a pipe hands over at most its buffer
#: (64 KiB on Linux) per read. Python allocates the full size for every read, and above
#: glibc's mmap threshold (128 KiB) that costs an mmap, page faults and a munmap: 15 µs per
#: read measured, where a 64 KiB read costs 1 µs.
DEFAULT_READ_BYTES = 64 * 1024
#: While reads come back full (a large message is streaming in), the size grows ×4 per
#: read up to this, and drops back once a read is short.
MAX_READ_BYTES = 1024 * 1024


class ByteSource(Protocol):
    """Where the bridge reads the client's bytes from."""

    async def receive(self) -> bytes:
        """Return the next chunk (any length ≥ 1), or ``b""`` once input has ended."""
        ...


class ByteSink(Protocol):
    """Where the bridge writes its lines to."""

    async def send(self, data: bytes) -> None:
        """Write all of ``data``. Raises ``OSError`` (e.g. ``BrokenPipeError``) when the
        reader has gone."""
        ...


class _DaemonCaller:
    """Runs blocking calls one at a time in a daemon thread and hands results to the loop."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.Future[Any]] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def call(self, func: Callable[[], Any]) -> Any:
        if self._thread is None:
            self._loop = asyncio.get_running_loop()
            self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
            self._thread.start()
        assert self._loop is not None
        outcome: asyncio.Future[Any] = self._loop.create_future()
        self._jobs.put((func, outcome))
        return await outcome

    def _work(self) -> None:
        assert self._loop is not None
        while (job := self._jobs.get()) is not None:
            func, outcome = job
            try:
                result: tuple[bool, Any] = (True, func())
            except BaseException as exc:  # handed to the awaiting task, raised there
                result = (False, exc)
            try:
                self._loop.call_soon_threadsafe(_settle, outcome, result)
            except RuntimeError:  # the event loop has finished: nobody is waiting any more
                return


class FdReader:
    """Read chunks from a file descriptor (the process's stdin by default).

    Args:
        fd: the descriptor to read; it is not closed by this object.
        read_bytes: the most bytes asked for per read.
    """

    def __init__(self, fd: int = 0, read_bytes: int = DEFAULT_READ_BYTES) -> None:
        self._fd = fd
        self._read_bytes = read_bytes
        self._small_read_bytes = read_bytes
        self._caller = _DaemonCaller("mcp-app-bridge stdin")
        self._eof = False
        self._on_loop: bool | None = None  # decided on the first read
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watching = False
        self._chunks: collections.deque[bytes] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._thread_read: asyncio.Future[bytes] | None = None  # outlives a cancelled receive

    async def receive(self) -> bytes:
        """Return the next chunk, or ``b""`` at EOF (and on every later call). A read error
        (for example an invalid handle) counts as EOF."""
        if self._eof:
            return b""
        if self._on_loop is None:
            self._on_loop = self._can_watch()
        if self._on_loop:
            data = await self._receive_on_loop()
        else:
            data = await self._receive_in_thread()
        if not data:
            self._eof = True
            self.close()
        return data

    async def _receive_in_thread(self) -> bytes:
        # A receive cancelled while its read is in the thread leaves that read running: the
        # next receive takes its bytes instead of starting another read.
        if self._thread_read is None:
            self._thread_read = asyncio.ensure_future(self._caller.call(lambda: os.read(self._fd, self._read_bytes)))
        read = self._thread_read
        try:
            data: bytes = await asyncio.shield(read)
        except OSError:
            data = b""
        self._thread_read = None
        return data

    def _can_watch(self) -> bool:
        """Whether the running loop's selector can watch ``fd`` (not a regular file, not
        ``/dev/null``, not Windows' proactor loop)."""
        loop = self._loop = asyncio.get_running_loop()
        if sys.platform == "win32":
            return False  # a selector loop there "accepts" any fd, then select() fails on it
        if not (_can_poll(self._fd) or os.isatty(self._fd)):
            return False  # regular files: kqueue (macOS) never reports readable at EOF
        try:
            loop.add_reader(self._fd, self._on_readable)
        except (OSError, ValueError, NotImplementedError, RuntimeError):
            return False
        self._watching = True
        return True

    async def _receive_on_loop(self) -> bytes:
        assert self._loop is not None
        if not self._chunks:
            if not self._watching:
                self._loop.add_reader(self._fd, self._on_readable)
                self._watching = True
            waiter = self._waiter = self._loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        return self._chunks.popleft()

    def _on_readable(self) -> None:
        # The selector has just said the descriptor is readable and only this callback
        # reads it, so this read returns at once, though the descriptor is blocking.
        try:
            data = os.read(self._fd, self._read_bytes)
        except OSError:
            data = b""
        if len(data) == self._read_bytes:
            self._read_bytes = min(self._read_bytes * 4, max(MAX_READ_BYTES, self._small_read_bytes))
        else:
            self._read_bytes = self._small_read_bytes
        self._chunks.append(data)
        if not data or len(self._chunks) > 1:
            self._unwatch()  # EOF, or nobody is taking chunks: wait for the next receive
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _unwatch(self) -> None:
        if self._watching and self._loop is not None:
            self._watching = False
            try:
                self._loop.remove_reader(self._fd)
            except Exception:  # the loop is closed already
                pass

    def close(self) -> None:
        """Stop watching the descriptor (it stays open)."""
        self._unwatch()


class FdWriter:
    """Write bytes to a file descriptor (the wire: a private duplicate of fd 1)."""

    def __init__(self, fd: int = 1) -> None:
        self._fd = fd
        self._caller = _DaemonCaller("mcp-app-bridge stdout")
        self._poll: Any = None
        if sys.platform != "win32" and _can_poll(fd):  # no poll on Windows
            self._poll = select.poll()
            self._poll.register(fd, select.POLLOUT)

    def write_now(self, data: bytes) -> int:
        """Write ``data`` now if that cannot block, and return how many bytes went (0: none;
        the caller sends the rest with :meth:`send`). Raises ``OSError`` when the client
        closed its end."""
        if self._poll is not None and len(data) <= _ATOMIC_WRITE_BYTES and self._poll.poll(0):
            # Writable (or broken: then the write raises at once). Up to PIPE_BUF bytes
            # go in one piece without blocking (POSIX write(2), "Pipes and FIFOs").
            return os.write(self._fd, data)
        return 0

    async def send(self, data: bytes) -> None:
        """Write all of ``data``; raises ``OSError`` when the client closed its end."""
        written = self.write_now(data)
        if written < len(data):
            rest = data[written:]
            await self._caller.call(lambda: _write_all(self._fd, rest))


def _settle(outcome: asyncio.Future[Any], result: tuple[bool, Any]) -> None:
    if outcome.done():  # the awaiting task was cancelled
        return
    ok, value = result
    if ok:
        outcome.set_result(value)
    else:
        outcome.set_exception(value)


#: Writes up to this size are made on the event loop when the descriptor is writable.
_ATOMIC_WRITE_BYTES = getattr(select, "PIPE_BUF", 512)


def _can_poll(fd: int) -> bool:
    """Whether ``fd`` is a pipe or a socket, where ``poll`` tells the truth (POSIX)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def claim_stdio() -> tuple[int, int]:
    """Take the process's stdin and stdout for the wire and return ``(read_fd, write_fd)``.

    fd 1 is duplicated for the bridge's private use, then pointed at stderr (or at the null
    device when there is no stderr), so that a stray ``print()`` from any code in the
    process lands in the log instead of corrupting the JSON-RPC stream.

    On Windows, a program built without a console (a windowed desktop app offering
    ``--mcp-stdio``) starts with no C-runtime descriptors 0/1/2 even when the AI client gave
    it pipes (pyinstaller/pyinstaller#7217). The pipes are still there as OS handles, so descriptors are
    made from ``GetStdHandle`` before anything else.

    Raises:
        OSError: stdin or stdout is not usable at all (the process was started without
            pipes, e.g. by a double click). Nothing was changed in that case.
    """
    if sys.platform == "win32":
        from ..system.winapi import adopt_std_handles

        adopt_std_handles()
    os.fstat(0)
    wire_fd = os.dup(1)
    if sys.platform != "win32":
        # A parent may hand over non-blocking pipes; EAGAIN would then look like EOF.
        os.set_blocking(0, True)
        os.set_blocking(wire_fd, True)
        _grow_pipe(0)
        _grow_pipe(wire_fd)
    try:
        os.fstat(2)
        os.dup2(2, 1)
    except OSError:
        null_fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null_fd, 1)
        os.close(null_fd)
    return 0, wire_fd


#: Linux: the stdin and stdout pipes are grown to this from 64 KiB when the system allows
#: it (``/proc/sys/fs/pipe-max-size``, 1 MiB by default): a large message then crosses in a
#: sixteenth of the wake-ups (16 MiB alone through a pipe: 18 → 7 ms, bench/README.md).
WIRE_PIPE_BYTES = 1024 * 1024


def _grow_pipe(fd: int) -> None:
    if sys.platform != "linux":
        return  # F_SETPIPE_SZ is Linux's
    import fcntl

    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, WIRE_PIPE_BYTES)
    except OSError:
        pass  # not allowed (a lower pipe-max-size, the user's pipe quota): 64 KiB it is


def is_onefile_child() -> bool:
    """Return whether this is the Python process of a PyInstaller one-file executable.

    Such a process is the child of the executable's bootloader, which extracted it to a
    ``_MEI…`` folder. When an AI client kills the bootloader outright (SIGKILL), nothing
    tells the child: its stdin stays open because the client still holds the pipe
    (pyinstaller/pyinstaller#4858).
    """
    bundle = getattr(sys, "_MEIPASS", None)
    return bool(getattr(sys, "frozen", False)) and bundle is not None and os.path.basename(bundle).startswith("_MEI")


def watch_parent_on_loop(loop: asyncio.AbstractEventLoop, on_parent_gone: Callable[[], None], *, parent: int | None = None) -> bool:
    """Call ``on_parent_gone()`` on ``loop`` once this process's parent has exited, with no
    thread and no polling: Linux ≥ 5.3 (``pidfd_open(2)``; the descriptor becomes readable
    when the process exits, and is close-on-exec). Returns False where that is unavailable
    (other systems, older kernels, a loop without ``add_reader``): then use
    :func:`watch_parent`. ``parent``: the pid to watch (default: the parent now); when it
    is no longer the parent, ``on_parent_gone()`` is called at once."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return False
    parent = os.getppid() if parent is None else parent
    if os.getppid() != parent:  # gone already: this process was adopted
        loop.call_soon(on_parent_gone)
        return True
    try:
        fd = pidfd_open(parent)
    except OSError:
        return False
    if os.getppid() != parent:  # re-parented before the open: that pid may be another process now
        os.close(fd)
        loop.call_soon(on_parent_gone)
        return True

    def exited() -> None:
        loop.remove_reader(fd)
        os.close(fd)
        on_parent_gone()

    try:
        loop.add_reader(fd, exited)
    except (NotImplementedError, OSError):
        os.close(fd)
        return False
    return True


def watch_parent(on_parent_gone: Callable[[], None], interval_seconds: float = 0.5, *, parent: int | None = None) -> None:
    """Call ``on_parent_gone()`` from a daemon thread once this process's parent has died.

    POSIX: an orphan is re-parented, so ``getppid()`` changes; it is polled every
    ``interval_seconds``. Windows: the thread waits on a handle to the parent process
    (``OpenProcess`` + ``WaitForSingleObject``: :func:`bridge.system.winapi.parent_waiter`, whose
    logic the tests of every OS run with a stand-in for kernel32). Where neither works,
    nothing is watched. ``parent``: the pid to watch (default: the parent now).
    """
    parent = os.getppid() if parent is None else parent
    watch: Callable[[], None] | None
    if sys.platform == "win32":  # pragma: no cover - Windows only
        from ..system.winapi import parent_waiter, windows_kernel32

        watch = parent_waiter(windows_kernel32(), parent, on_parent_gone)
        if watch is None:
            return
    else:

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(interval_seconds)
            on_parent_gone()

    threading.Thread(target=watch, name="mcp-app-bridge parent watchdog", daemon=True).start()

