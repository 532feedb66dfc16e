"""``python -m bridge`` with a timestamp (``time.perf_counter()``, CLOCK_MONOTONIC: the
harness's clock too) at each step of a reply's path, appended to ``$BRIDGE_TIMELINE`` as
``step seconds`` lines. Used by ``large_reply.py --timeline``; wraps functions from the
outside, so the bridge's code is the one measured (another checkout's with
``PYTHONPATH``: ``large_reply.py --timeline-root``). Linux (the clock is shared).
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

from bridge.cli.serve import main
from bridge.serve import dispatch
from bridge.stdio import fds, outbox
from bridge.streamable import replies, upstream
from bridge.transport import connection

_out = open(os.environ["BRIDGE_TIMELINE"], "a", buffering=1)  # noqa: SIM115 (open for the process's life)


def stamp(name: str) -> None:
    _out.write(f"{name} {time.perf_counter():.6f}\n")


def around(owner: Any, attribute: str, name: str, wrap_async: bool = False) -> None:
    original = getattr(owner, attribute)
    if wrap_async:
        @functools.wraps(original)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            stamp(f"{name}:start")
            try:
                return await original(*args, **kwargs)
            finally:
                stamp(f"{name}:end")
        setattr(owner, attribute, timed_async)
    else:
        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stamp(f"{name}:start")
            try:
                return original(*args, **kwargs)
            finally:
                stamp(f"{name}:end")
        setattr(owner, attribute, timed)


first_bytes = connection.Connection.buffer_updated


def buffer_updated(self: connection.Connection, nbytes: int) -> None:
    if not self.parser.buffered_bytes:
        stamp("socket: bytes after none buffered")
    first_bytes(self, nbytes)


connection.Connection.buffer_updated = buffer_updated  # type: ignore[method-assign]
around(dispatch, "classify", "stdin line classified")
around(upstream.Upstream, "send_request", "Upstream.send_request", wrap_async=True)
around(replies.ReplyReader, "read_body", "read_body", wrap_async=True)
around(replies.ReplyReader, "parse", "ReplyReader.parse")
around(replies, "to_wire_line", "to_wire_line")
if hasattr(replies, "loads_strict_bytes"):  # (a checkout before it: loads_strict on decoded text)
    around(replies, "loads_strict_bytes", "loads_strict_bytes")
else:
    around(replies, "loads_strict", "loads_strict")
around(outbox.Outbox, "put", "Outbox.put", wrap_async=True)
around(fds, "_write_all", "stdout _write_all (thread)")

if __name__ == "__main__":
    main()
