"""Where the bridge's diagnostics go: stderr or a log file, never stdout, written by a
thread of their own (``bridge/system/logsink.py``)."""

from __future__ import annotations

import codecs
import io
import logging
import sys
from pathlib import Path

import click

__all__ = ["console_fallbacks", "setup_logging"]

#: What a console that cannot show a character gets instead (``check``'s marks, the help's arrows).
_ASCII_FALLBACKS = {"✓": "OK", "✗": "X", "→": "->", "…": "...", "—": "-", "–": "-", "≤": "<=", "≥": ">="}
_FALLBACK_ERRORS = "mcp-app-bridge-ascii"


def _ascii_fallback(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    return "".join(_ASCII_FALLBACKS.get(character, "?") for character in text), error.end


codecs.register_error(_FALLBACK_ERRORS, _ascii_fallback)


def console_fallbacks() -> None:
    """Let stdout and stderr show what their encoding cannot as ASCII (✓ as ``OK``, → as ``->``).

    Windows Python writes piped output in the ANSI code page (cp1252 and the like), which
    has neither ✓ nor →; a strict encoder would end ``check`` or ``--help`` with a
    ``UnicodeEncodeError``. Only text streams in strict mode change; the JSON-RPC wire
    (bytes on the descriptor, ``bridge/stdio/fds.py``) never passes through them.
    """
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            try:
                reconfigure(errors=_FALLBACK_ERRORS)
            except (ValueError, OSError):  # pragma: no cover - a stream that refuses: leave it
                pass


def setup_logging(level: str = "warning", log_file: Path | None = None) -> None:
    """Send diagnostics to stderr (or ``log_file``), never stdout, at ``level``.

    Records are written by a daemon thread (:class:`~bridge.system.logsink.ThreadedHandler`), so
    the event loop never waits on a stderr the client does not read.
    """
    from ..system.logsink import ThreadedHandler, open_log_file

    handler: logging.Handler
    if log_file is not None:
        try:  # created 0600, never through a symbolic link
            stream = io.TextIOWrapper(open_log_file(log_file), encoding="utf-8", line_buffering=True)
        except OSError as exc:
            raise click.ClickException(f"cannot use the log file: {exc}") from None
        handler = logging.StreamHandler(stream)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s mcp-app-bridge %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [ThreadedHandler(handler)]
    root.setLevel(level.upper())
    # httpcore's debug trace is noise at our level of detail; it never shows header values,
    # but keeping it quiet keeps the log readable.
    logging.getLogger("httpcore").setLevel(max(logging.INFO, root.level))
    logging.captureWarnings(True)
