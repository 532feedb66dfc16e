"""The ``mcp-app-bridge`` command (the only module that knows click).

``mcp-app-bridge --url URL [options]`` runs the bridge on stdio. A bad option exits 2 with
a message on stderr and nothing on stdout; stdout is only ever the JSON-RPC wire.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import click

from ._version import __version__
from .config import DEFAULT_MAX_MESSAGE_BYTES, BridgeConfig, ConfigError, parse_header

__all__ = ["main"]

_LOG_LEVELS = ("debug", "info", "warning", "error")


def _read_token(token_env: str | None, token_file: Path | None) -> str | None:
    """Read the bearer token from its source. The token itself never appears in messages."""
    if token_env is not None:
        token = os.environ.get(token_env, "").strip()
        if not token:
            raise click.BadParameter(f"environment variable {token_env} is not set or is empty", param_hint="--token-env")
        return token
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not UTF-8 text"
            raise click.BadParameter(f"cannot read {token_file}: {reason}", param_hint="--token-file") from None
        if not token:
            raise click.BadParameter(f"{token_file} is empty", param_hint="--token-file")
        return token
    return None


def _setup_logging(level: str, log_file: Path | None) -> None:
    handler: logging.Handler
    if log_file is not None:
        handler = logging.FileHandler(log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s mcp-app-bridge %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpcore's debug trace is noise at our level of detail; it never shows header values,
    # but keeping it quiet keeps the log readable.
    logging.getLogger("httpcore").setLevel(max(logging.INFO, root.level))
    logging.captureWarnings(True)


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--url", required=True, metavar="URL", help="The app's MCP endpoint, e.g. http://127.0.0.1:8765/mcp (loopback only).")
@click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'", help="Extra HTTP header for every request (repeatable).")
@click.option("--token-env", metavar="VAR", help="Read the bearer token from environment variable VAR.")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path), metavar="PATH", help="Read the bearer token from a file.")
@click.option("--connect-timeout", "connect_timeout_seconds", type=click.FloatRange(min=0, min_open=True), default=5.0, show_default=True, metavar="SECONDS", help="Bound on connecting to the app.")
@click.option("--request-timeout", "request_timeout_seconds", type=click.FloatRange(min=0, min_open=True), default=300.0, show_default=True, metavar="SECONDS", help="Longest silence from the app while a request waits (keep-alives count as activity).")
@click.option("--max-message-bytes", type=click.IntRange(min=1024), default=DEFAULT_MAX_MESSAGE_BYTES, show_default=True, metavar="N", help="Largest message accepted in either direction.")
@click.option("--max-concurrent-requests", type=click.IntRange(min=1), default=32, show_default=True, metavar="N", help="Requests in flight to the app at once.")
@click.option("--allow-remote", is_flag=True, help="Allow a non-loopback --url (https only).")
@click.option("--log-level", type=click.Choice(_LOG_LEVELS, case_sensitive=False), default="warning", show_default=True, help="Diagnostics level (always stderr or --log-file, never stdout).")
@click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path), metavar="PATH", help="Write diagnostics to PATH instead of stderr.")
@click.version_option(__version__, "--version", prog_name="mcp-app-bridge")
def main(
    url: str,
    headers: tuple[str, ...],
    token_env: str | None,
    token_file: Path | None,
    connect_timeout_seconds: float,
    request_timeout_seconds: float,
    max_message_bytes: int,
    max_concurrent_requests: int,
    allow_remote: bool,
    log_level: str,
    log_file: Path | None,
) -> None:
    """Bridge an AI client on stdio to a desktop app's MCP server over Streamable HTTP.

    Reads newline-delimited JSON-RPC on stdin, forwards each message to the app at --url,
    and writes every reply to stdout. Errors between the bridge and the app come back as
    JSON-RPC errors (code -32603, data.reason); the bridge keeps serving until stdin closes.
    """
    if token_env is not None and token_file is not None:
        raise click.UsageError("give at most one of --token-env and --token-file")
    try:
        parsed_headers = tuple(parse_header(text) for text in headers)
        config = BridgeConfig(
            url=url,
            headers=parsed_headers,
            token=_read_token(token_env, token_file),
            connect_timeout_seconds=connect_timeout_seconds,
            request_timeout_seconds=request_timeout_seconds,
            max_message_bytes=max_message_bytes,
            max_concurrent_requests=max_concurrent_requests,
            allow_remote=allow_remote,
        )
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    _setup_logging(log_level, log_file)

    from .session import run_stdio  # imported late: `--help` and bad options stay fast

    sys.exit(run_stdio(config))
