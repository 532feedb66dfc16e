"""Where the bridge's diagnostics go: stderr or a log file, never stdout, written by a
thread of their own (``bridge/system/logsink.py``); how a start-up error reaches the user;
the fast exit once a run is over."""

from __future__ import annotations

import codecs
import io
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    import click

# click is imported only where an error is reported: a plain serving start
# (bridge/cli/serve.py) sets up logging through here and must not load it.

__all__ = [
    "console_fallbacks",
    "exit_now",
    "import_asyncio_without_tls",
    "mask_option_values",
    "setup_logging",
    "start_up_failed",
    "stdin_is_a_terminal",
]

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


def import_asyncio_without_tls() -> None:
    """Import asyncio without its TLS support, in a process that serves and nothing else.

    ``asyncio`` imports ``ssl`` (and OpenSSL: 5.2 MiB resident, 4-7 ms) whenever it can,
    for its own TLS transports. The bridge never uses them: ``http://`` goes over the
    bridge's own HTTP/1.1 client, and ``https://`` over httpx, whose TLS (anyio's TLS
    stream over ``ssl.MemoryBIO``) imports ``ssl`` itself when an https connection is first
    made, which works as before. So asyncio is imported with ``ssl`` hidden (its modules
    then take ``ssl = None``, as on a Python built without it), and ``ssl`` stays
    importable for everyone else. Only the ``mcp-app-bridge`` process's serving start calls
    this, never the library (an app serving in its own process may use asyncio's TLS); once
    asyncio is imported it does nothing. tests/test_layout.py checks that serving ``http://``
    loads no ``ssl``; tests/process/test_https.py that ``https://`` still works.
    """
    if "asyncio" in sys.modules or "ssl" in sys.modules:
        return
    sys.modules["ssl"] = None  # type: ignore[assignment]  # `import ssl` raises ImportError
    try:
        import asyncio  # noqa: F401
    finally:
        del sys.modules["ssl"]


def setup_logging(level: str = "warning", log_file: Path | None = None) -> None:
    """Send diagnostics to stderr (or ``log_file``), never stdout: the bridge's own (the
    ``bridge`` logger and those below it) at ``level``, every other library's (asyncio,
    filelock, httpx…) at ``warning`` or above (``level`` when that is higher), so that
    ``--log-level debug`` is the bridge's own trace, not its dependencies'.

    Records are written by a daemon thread (:class:`~bridge.system.logsink.ThreadedHandler`), so
    the event loop never waits on a stderr the client does not read.
    """
    from ..system.logsink import ThreadedHandler, open_log_file

    handler: logging.Handler
    if log_file is not None:
        try:  # created 0600, never through a symbolic link
            stream = io.TextIOWrapper(open_log_file(log_file), encoding="utf-8", line_buffering=True)
        except OSError as exc:
            import click

            raise click.ClickException(f"cannot use the log file: {exc}") from None
        handler = logging.StreamHandler(stream)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s mcp-app-bridge %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [ThreadedHandler(handler)]
    own = logging.getLevelNamesMapping()[level.upper()]
    # Others' records below warning are not even made (asyncio's "Using selector", filelock's
    # every acquire, httpcore's trace); the bridge's logger passes its own to root's handler.
    root.setLevel(max(own, logging.WARNING))
    logging.getLogger("bridge").setLevel(own)
    logging.captureWarnings(True)


def stdin_is_a_terminal() -> bool:
    """Whether a person runs the bridge by hand (stdin is a terminal), not a client."""
    try:
        return os.isatty(0)
    except OSError:  # (no descriptor 0 at all)
        return False


def start_up_failed(exc: click.ClickException, log_level: str, log_file: Path | None) -> NoReturn:
    """A configuration error found once the command line was parsed (an unset --token-env,
    an unusable --log-file, no endpoint…). Run by hand (stdin is a terminal): exit 2 with
    the message on stderr, as click does. Started by a client (stdin is not a terminal):
    the message also goes to --log-file, and every request is answered with it
    (``bridge/serve/startuperror.py``) until stdin ends; then exit 2. Errors click finds
    while parsing (an unknown option, a bad value) never get here: they always exit 2 at
    once."""
    import click

    if stdin_is_a_terminal():
        raise exc
    message = mask_option_values(exc.format_message(), sys.argv[1:])
    try:
        setup_logging(log_level, log_file)
    except click.ClickException as log_exc:  # the log file itself is the problem: stderr then
        setup_logging(log_level, None)
        if log_exc is not exc:
            logging.getLogger("bridge").error("%s", log_exc.format_message())
    logging.getLogger("bridge").error("cannot start: %s (every request is answered with this)", message)
    if log_file is not None:  # (without a log file the record above is on stderr already)
        click.echo(f"Error: {message}", err=True)
    from ..serve.startuperror import serve_startup_error

    exit_now(serve_startup_error(message, exc.exit_code))


def mask_option_values(message: str, argv: list[str]) -> str:
    """``message`` with every value of an option that must not be repeated
    (``bridge/cli/optiontable.py``: its ``echo`` is ``"never"``) found in ``argv`` replaced by
    ``<the --option value>`` (a value of 6 characters or more, of an option that takes
    text: the others' values are checked numbers and names): a second guard, for a start-up error that is served to every
    request and logged (the messages themselves are written not to repeat them)."""
    from .optiontable import BRIDGE_OPTIONS, text

    never = {option.flag for option in BRIDGE_OPTIONS if option.echo == "never" and option.convert is text}
    values: list[tuple[str, str]] = []
    for index, word in enumerate(argv):
        flag, equals, value = word.partition("=")
        if flag in never and equals:
            values.append((flag, value))
        elif word in never and index + 1 < len(argv):
            values.append((word, argv[index + 1]))
    for flag, value in sorted(values, key=lambda pair: -len(pair[1])):
        if len(value.strip()) >= 6:  # (not a word that short: it would mask the message's own words)
            message = message.replace(value, f"<the {flag} value>")
    return message


def exit_now(status: int) -> NoReturn:
    """End the process with ``status`` once the bridge's run is over, without the
    interpreter's teardown: finalizing every loaded module takes about 30 ms (measured),
    and Codex sends SIGKILL 7-9 ms after its SIGTERM. Nothing is lost: the run has closed
    its connections and flushed stdout; queued log records are written here first. A
    one-file build's run empties its own unpack folder last, all but its lock file
    (``bridge/system/unpacksweep.py``: a bootloader killed while cleaning up then leaves
    nothing the next start cannot remove at once)."""
    logging.shutdown()  # (ThreadedHandler.close writes what is queued, bounded)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    from ..system.unpacksweep import empty_own_folder, own_unpack_folder

    folder = own_unpack_folder()
    if folder is not None:
        empty_own_folder(folder)
    os._exit(status)
