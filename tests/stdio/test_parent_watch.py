"""The one-file child's watch on its bootloader (bridge/stdio/fds.py): on Linux a pidfd on the
event loop, with no thread; a real parent process is SIGKILLed under a real child."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import asyncio, os, sys, threading
    from bridge.stdio.fds import watch_parent_on_loop

    async def main():
        gone = asyncio.Event()
        loop = asyncio.get_running_loop()
        assert watch_parent_on_loop(loop, gone.set)
        print("watching", threading.active_count(), flush=True)
        await asyncio.wait_for(gone.wait(), 20)
        print("parent gone", flush=True)

    asyncio.run(main())
    """
)

# The middle process: starts the child with the test's stdout, reports the child's pid, waits.
MIDDLE = "import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', sys.argv[1]]); print(c.pid, flush=True); time.sleep(60)"


@pytest.mark.process
@pytest.mark.linux_only("pidfd_open(2)")
@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="os.pidfd_open needs Python 3.9+ on Linux")
def test_the_child_hears_of_its_parents_sigkill_at_once_without_a_thread() -> None:
    if sys.platform != "linux":  # its marker skips it first; this tells mypy --platform
        pytest.skip("pidfd_open(2): Linux only")
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE, CHILD], stdout=subprocess.PIPE)
    assert middle.stdout is not None
    child_pid = None
    try:
        child_pid = int(middle.stdout.readline())
        assert middle.stdout.readline().split() == [b"watching", b"1"]  # the main thread only
        middle.send_signal(signal.SIGKILL)
        middle.wait(10)
        ready, _, _ = select.select([middle.stdout], [], [], 5)
        assert ready and middle.stdout.readline() == b"parent gone\n"
    finally:
        middle.kill()
        middle.wait(10)
        if child_pid is not None:
            try:
                os.kill(child_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.anyio
@pytest.mark.parametrize("backend", ["pidfd", "thread"])
async def test_a_parent_that_was_gone_before_the_watch_began_is_reported_at_once(backend: str) -> None:
    """The one-file child's serving loop starts after an early start's reply, by when the
    client may have killed the bootloader: the watch is of the parent the process started
    under (``parent``), and one that is not the parent any more is reported at once."""
    import asyncio

    from bridge.stdio.fds import watch_parent, watch_parent_on_loop

    gone = asyncio.Event()
    loop = asyncio.get_running_loop()
    not_the_parent = os.getppid() + 1_000_000  # a pid that is not this process's parent
    if backend == "pidfd":
        if not watch_parent_on_loop(loop, gone.set, parent=not_the_parent):
            pytest.skip("no pidfd_open here")
    else:

        def heard() -> None:
            loop.call_soon_threadsafe(gone.set)

        watch_parent(heard, 0.05, parent=not_the_parent)
    await asyncio.wait_for(gone.wait(), 5)
