"""The ``mcp-app-bridge`` command, and ``--mcp-stdio`` for Python apps (the only module
that knows click).

``mcp-app-bridge --url URL [options]`` runs the bridge on stdio. A bad option exits 2 with
a message on stderr and nothing on stdout; stdout is only ever the JSON-RPC wire.
"""

from __future__ import annotations

import functools
import inspect
import io
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from .._version import __version__
from ..core.config import DEFAULT_MAX_MESSAGE_BYTES, BridgeConfig, ConfigError, check_endpoint_url, parse_header

__all__ = ["main", "mcp_stdio_option", "setup_logging"]

_LOG_LEVELS = ("debug", "info", "warning", "error")
_TOKEN_OPTIONS = ("--token-env", "--token-file", "--token-command", "--auth-url")

F = TypeVar("F", bound=Callable[..., Any])


def setup_logging(level: str = "warning", log_file: Path | None = None) -> None:
    """Send diagnostics to stderr (or ``log_file``), never stdout, at ``level``.

    Records are written by a daemon thread (:class:`~bridge.logsink.ThreadedHandler`), so
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


def _token_source(
    token_env: str | None,
    token_file: Path | None,
    token_command: str | None,
    auth_url: str | None,
    secret_file: Path | None,
    token_timeout_seconds: float,
    allow_remote: bool,
) -> object | None:
    given = [name for name, value in zip(_TOKEN_OPTIONS, (token_env, token_file, token_command, auth_url), strict=True) if value]
    if len(given) > 1:
        raise click.UsageError(f"give at most one token source, not {' and '.join(given)}")
    if (auth_url is None) != (secret_file is None):
        raise click.UsageError("--auth-url and --secret-file go together")
    from ..app import tokens  # the I/O side: imported only once the options are known to be good

    if token_env is not None:
        if not os.environ.get(token_env, "").strip():
            raise click.BadParameter(f"environment variable {token_env} is not set or is empty", param_hint="--token-env")
        return tokens.EnvTokenSource(token_env)
    if token_file is not None:
        _refuse_open_file(token_file, "--token-file")
        return tokens.FileTokenSource(token_file)
    if token_command is not None:
        try:
            argv = tokens.split_command(token_command)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--token-command") from None
        return tokens.CommandTokenSource(argv, timeout_seconds=token_timeout_seconds)
    if auth_url is not None and secret_file is not None:
        _refuse_open_file(secret_file, "--secret-file")
        try:
            if not auth_url.startswith("/"):  # a path is resolved against the MCP endpoint
                check_endpoint_url(auth_url, allow_remote=allow_remote)
        except ConfigError as exc:
            raise click.BadParameter(str(exc).replace("--url", "--auth-url"), param_hint="--auth-url") from None
        return tokens.AuthRouteTokenSource(auth_url, secret_file)
    return None


def _refuse_open_file(path: Path, option: str) -> None:
    """A secret file that exists must pass OpenSSH's rules (``bridge/privatefile.py``); it
    may appear later: the app can create it when it starts."""
    from ..system.privatefile import UnsafeFileError, read_private_file

    try:
        read_private_file(path, option.lstrip("-").replace("-", " "))
    except UnsafeFileError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None
    except OSError:
        pass  # missing or unreadable now: the token source says so when it is needed


_PATH = click.Path(dir_okay=False, path_type=Path)
_SECONDS = click.FloatRange(min=0, min_open=True)


_BRIDGE_OPTIONS = [
    click.option("--url", metavar="URL", help="The app's MCP endpoint, e.g. http://127.0.0.1:8765/mcp (loopback only)."),
    click.option("--app-name", metavar="NAME", help="The app's name: used in messages and for its default discovery file."),
    click.option("--discovery-file", type=_PATH, metavar="PATH", help="The app's discovery file (endpoint, pid, token), re-read on every reconnect."),
    click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'", help="Extra HTTP header for every request (repeatable)."),
    click.option("--token-env", metavar="VAR", help="Bearer token from environment variable VAR."),
    click.option("--token-file", type=_PATH, metavar="PATH", help="Bearer token from a file (mode 0600)."),
    click.option("--token-command", metavar="CMD", help="Bearer token printed by a command (run without a shell)."),
    click.option("--auth-url", metavar="URL", help="The app's auth route (a URL, or a path on the MCP endpoint): POST the --secret-file, get a token."),
    click.option("--secret-file", type=_PATH, metavar="PATH", help="The local secret for --auth-url (mode 0600)."),
    click.option("--token-timeout", "token_timeout_seconds", type=_SECONDS, default=10.0, show_default=True, metavar="SECONDS", help="Bound on getting a token."),
    click.option("--launch", "launch", metavar="CMD", help="Start the app with CMD (no shell) when nothing listens."),
    click.option("--launch-timeout", "launch_timeout_seconds", type=_SECONDS, default=30.0, show_default=True, metavar="SECONDS", help="Bound on starting the app until it accepts connections."),
    click.option("--launch-log", "launch_log_file", type=_PATH, metavar="PATH", help="Where the launched app's output goes (default: discarded)."),
    click.option("--session-400-heuristic/--no-session-400-heuristic", default=True, show_default=True, help="Treat a 400 that mentions the session like a 404 (session gone)."),
    click.option("--connect-timeout", "connect_timeout_seconds", type=_SECONDS, default=5.0, show_default=True, metavar="SECONDS", help="Bound on connecting to the app."),
    click.option("--request-timeout", "request_timeout_seconds", type=_SECONDS, default=300.0, show_default=True, metavar="SECONDS", help="Longest silence from the app while a request waits (keep-alives count as activity)."),
    click.option("--max-message-bytes", type=click.IntRange(min=1024), default=DEFAULT_MAX_MESSAGE_BYTES, show_default=True, metavar="N", help="Largest message accepted in either direction."),
    click.option("--max-concurrent-requests", type=click.IntRange(min=1), default=32, show_default=True, metavar="N", help="Requests in flight to the app at once."),
    click.option("--allow-remote", is_flag=True, help="Allow a non-loopback --url (https only)."),
    click.option("--verify-listener/--no-verify-listener", default=True, show_default=True, help="Check that the app (this user's process, the discovery file's pid) listens on the port before sending anything there."),
    click.option("--log-level", type=click.Choice(_LOG_LEVELS, case_sensitive=False), default="warning", show_default=True, help="Diagnostics level (always stderr or --log-file, never stdout)."),
    click.option("--log-file", type=_PATH, metavar="PATH", help="Write diagnostics to PATH instead of stderr."),
]


def _bridge_options(function: F) -> F:
    for option in reversed(_BRIDGE_OPTIONS):
        function = option(function)
    return function


def _build_config(options: dict[str, Any], *, require_env: bool = True) -> BridgeConfig:
    """Turn parsed bridge options into a configuration (raises click usage errors)."""
    url, app_name, discovery_file = options["url"], options["app_name"], options["discovery_file"]
    if url is None and discovery_file is None and app_name is None:
        raise click.UsageError("give the app's endpoint: --url URL, --discovery-file PATH or --app-name NAME")
    if discovery_file is None and url is None and app_name is not None:
        from ..app.discovery import default_discovery_path

        discovery_file = default_discovery_path(app_name)
    source = _token_source(
        options["token_env"] if require_env else None,
        options["token_file"],
        options["token_command"],
        options["auth_url"],
        options["secret_file"],
        options["token_timeout_seconds"],
        options["allow_remote"],
    )
    if not require_env and options["token_env"] is not None and source is not None:
        raise click.UsageError("give at most one token source")
    launch_command = None
    if options["launch"] is not None:
        from ..app.tokens import split_command

        try:
            launch_command = tuple(split_command(options["launch"]))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--launch") from None
    try:
        return BridgeConfig(
            url=url,
            discovery_file=discovery_file,
            app_name=app_name or "The app",
            headers=tuple(parse_header(text) for text in options["headers"]),
            token_source=source,
            token_timeout_seconds=options["token_timeout_seconds"],
            launch_command=launch_command,
            launch_timeout_seconds=options["launch_timeout_seconds"],
            launch_log_file=options["launch_log_file"],
            session_400_heuristic=options["session_400_heuristic"],
            connect_timeout_seconds=options["connect_timeout_seconds"],
            request_timeout_seconds=options["request_timeout_seconds"],
            max_message_bytes=options["max_message_bytes"],
            max_concurrent_requests=options["max_concurrent_requests"],
            allow_remote=options["allow_remote"],
            verify_listener=options["verify_listener"],
        )
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(invoke_without_command=True, context_settings=_CONTEXT)
@_bridge_options
@click.version_option(__version__, "--version", prog_name="mcp-app-bridge")
@click.pass_context
def main(ctx: click.Context, /, **options: Any) -> None:
    """Bridge an AI client on stdio to a desktop app's MCP server over Streamable HTTP.

    Without a command: reads newline-delimited JSON-RPC on stdin, forwards each message to
    the app, and writes every reply to stdout. Errors between the bridge and the app come
    back as JSON-RPC errors (code -32603, data.reason); the bridge keeps serving until
    stdin closes. The app is found by --url, or by its discovery file (--discovery-file,
    or the default one of --app-name).

    Commands: `check` diagnoses the path to the app; `config` prints, installs or links
    the entry an AI client needs to start the bridge.
    """
    if ctx.invoked_subcommand is not None:
        given = [name for name, value in options.items() if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
        if given:
            raise click.UsageError(f"give the bridge options after `{ctx.invoked_subcommand}`, not before it")
        return
    config = _build_config(options)
    setup_logging(options["log_level"], options["log_file"])

    from ..serve.loop import run_stdio  # imported late: `--help` and bad options stay fast

    sys.exit(run_stdio(config))


@main.command(context_settings=_CONTEXT)
@_bridge_options
def check(**options: Any) -> None:
    """Walk the path an AI client's request takes and report each step.

    endpoint → connect (starting the app if --launch is given) → token → initialize →
    tools/list → ping. Exit status 0 when all pass, 1 otherwise. The token is never shown.
    """
    config = _build_config(options)
    setup_logging("error" if options["log_level"] == "warning" else options["log_level"], options["log_file"])
    import anyio

    from .check import run_check

    ok = anyio.run(run_check, config, click.echo, click.style)
    sys.exit(0 if ok else 1)


@main.command()
def version() -> None:
    """Print the version."""
    click.echo(f"mcp-app-bridge {__version__}")


@main.command(context_settings={**_CONTEXT, "ignore_unknown_options": True})
@click.option("--exe", "executable", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path), help="The frozen executable (build/out/mcp-app-bridge).")
@click.option("--out", required=True, type=_PATH, metavar="FILE.mcpb", help="Where the bundle goes.")
@click.option("--name", metavar="NAME", help="The bundle's name (default: --app-name in lower case).")
@click.option("--display-name", metavar="TEXT", help="The name the client shows (default: --app-name).")
@click.option("--author", metavar="NAME", help="Who ships it (default: --app-name).")
@click.option("--description", metavar="TEXT", help="One sentence the client shows.")
@click.option("--platform", type=click.Choice(["darwin", "win32", "linux"]), help="The OS the executable is for (default: a .exe is win32, else this OS).")
@click.argument("bridge_args", nargs=-1, type=click.UNPROCESSED)
def bundle(executable: Path, out: Path, name: str | None, display_name: str | None, author: str | None, description: str | None, platform: str | None, bridge_args: tuple[str, ...]) -> None:
    """Build an MCP Bundle (.mcpb) around the frozen executable, for Claude Desktop.

    The bridge options go after the command's own, as the bridge should get them:

    \b
        mcp-app-bridge bundle --exe build/out/mcp-app-bridge --out dist/MyApp.mcpb --app-name MyApp

    A --token-env VAR becomes a setting the user fills in at install time; no secret goes into the bundle.
    """
    try:
        parsed = main.make_context("mcp-app-bridge", list(bridge_args), resilient_parsing=False)
    except click.UsageError as exc:
        raise click.UsageError(f"bridge option: {exc.format_message()}") from None
    _build_config(parsed.params, require_env=False)
    app_name = parsed.params["app_name"]
    if name is None and app_name is None:
        raise click.UsageError("give --name NAME (or the bridge option --app-name NAME)")
    from ..clients.bundle import BundleError, bundle_manifest, write_bundle

    if platform is None:
        platform = "win32" if executable.suffix.lower() == ".exe" else ("linux" if sys.platform.startswith("linux") else sys.platform)
    try:
        manifest = bundle_manifest(
            name=name or app_name.lower(),
            bridge_args=bridge_args,
            platform=platform,
            display_name=display_name or app_name,
            description=description,
            author=author,
        )
        write_bundle(executable, out, manifest)
    except BundleError as exc:
        raise click.ClickException(f"{exc}. Nothing was written.") from None
    click.echo(f"wrote {out} (mcp-app-bridge {manifest['version']}, {platform})")


from .config import config  # noqa: E402 (click only: the config-file code loads when a config command runs)

main.add_command(config)


def mcp_stdio_option(
    make_config: Callable[[], BridgeConfig] | Callable[[dict[str, Any]], BridgeConfig],
    *,
    flag: str = "--mcp-stdio",
    log_level: str = "warning",
    log_file: Path | None = None,
) -> Callable[[F], F]:
    """Add ``--mcp-stdio`` to a Python app's own click command.

    With the flag, the bridge runs on this process's stdin/stdout and the process exits
    with its status *instead of* the command's body, so no window, database or
    single-instance lock of the app is touched (keep the app's option callbacks free of
    such work: they run first, as click parses the command line)::

        @click.command()
        @click.option("--profile", default="default")
        @mcp_stdio_option(lambda params: BridgeConfig(
            app_name="MyApp", discovery_file=discovery_path(params["profile"])))
        def main(profile): ...  # the GUI

    Args:
        make_config: builds the configuration, called only when the flag is given, either
            with no argument or with one: a dict of the command's other parameters, as
            click parsed them.
        flag: the option's name.
        log_level, log_file: where the bridge's diagnostics go (never stdout).
    """
    wants_params = _takes_one_argument(make_config)

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def branch(*args: Any, **params: Any) -> Any:
            if not params.pop(_MCP_STDIO_PARAM):
                return command(*args, **params)
            setup_logging(log_level, log_file)
            config = make_config(dict(params)) if wants_params else make_config()  # type: ignore[call-arg]
            from ..serve.loop import run_stdio

            click.get_current_context().exit(run_stdio(config))

        option = click.option(
            flag,
            _MCP_STDIO_PARAM,
            is_flag=True,
            help="Serve MCP on stdin/stdout for an AI client, through the running app.",
        )
        return option(branch)  # type: ignore[return-value]

    return decorate


_MCP_STDIO_PARAM = "bridge_mcp_stdio"


def _takes_one_argument(function: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)
