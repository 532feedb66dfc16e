"""Serving a start-up error: when the bridge cannot run, every request learns why.

An AI client that starts a server and sees it exit at once shows only "Connection closed"
or "Disconnected"; what the server wrote on stderr goes to a log the user rarely opens.
So when the configuration is unusable (``--token-env`` names an unset variable, say) and a
client started the bridge (stdin is not a terminal), the bridge stays on stdio instead:
every request (``initialize`` first) gets a JSON-RPC error carrying the message, reason
``not_configured`` (docs/behaviour.md, "Errors"); notifications and client responses get nothing. It
ends on stdin EOF or a signal, with the status it would have exited with at once.

Synchronous on purpose: nothing here talks to the app, and nothing may fail before the
message is delivered.
"""

from __future__ import annotations

import logging
import os

from ..core.errors import InboundError, LineTooLongError, NotConfiguredError
from ..core.framing import EOF, NEED_DATA, LineFramer, OverlongLine
from ..core.jsonrpc import classify, error_line, read_id_from_head, refusal_line
from ..stdio.fds import claim_stdio

__all__ = ["serve_startup_error", "answers_for_line"]

log = logging.getLogger("bridge")

#: The longest line read in this mode (bytes); a longer one is answered from its head.
_MAX_LINE_BYTES = 1024 * 1024


def answers_for_line(line: bytes, exc: NotConfiguredError) -> bytes | None:
    """The stdout line for one stdin line (without its line end): ``exc`` for each request,
    a batch's as one array, an unusable line's own -32600/-32700; ``None`` for a
    notification or a client response."""
    try:
        message = classify(line)
    except InboundError as inbound:
        return error_line(inbound.request_id, inbound)
    return refusal_line(message, exc)


def serve_startup_error(message: str, status: int) -> int:
    """Answer every request on this process's stdio with ``message`` until stdin ends or
    SIGINT comes (other signals end the process as they would have), then return
    ``status``. ``message`` is already logged by the caller.

    Returns:
        ``status``, or 1 when stdin or stdout is not usable at all.
    """
    try:
        read_fd, wire_fd = claim_stdio()
    except OSError as exc:
        log.error("stdin or stdout is not usable (%s)", exc)
        return 1
    error = NotConfiguredError(f"mcp-app-bridge cannot start: {message}")
    framer = LineFramer(_MAX_LINE_BYTES)
    try:
        while True:
            event = framer.next_event()
            if event is NEED_DATA:
                framer.receive_data(os.read(read_fd, 65536))
                continue
            if event is EOF:
                return status
            if isinstance(event, OverlongLine):
                request_id = read_id_from_head(event.head)
                reply: bytes | None = error_line(
                    request_id, LineTooLongError("Invalid Request: the message is too long", request_id)
                )
            else:
                assert isinstance(event, bytes)
                reply = answers_for_line(event, error)
            if reply is not None:
                _write_all(wire_fd, reply)
    except KeyboardInterrupt:  # SIGINT: the client's way to say stop
        return status
    except OSError:  # stdout closed: the client is gone
        return status


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
