"""``--mcp-stdio`` for a Python app's own click command (public as
``bridge.mcp_stdio_option``): the app's executable doubles as its bridge."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..core.config import BridgeConfig, ConfigError
from . import diagnostics
from .diagnostics import setup_logging
from .optiontable import LOG_LEVELS, OptionValueError
from .optiontable import log_level as level_name

__all__ = ["mcp_stdio_option"]

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:  # generic in the annotations of newer click
    _ParamType = click.ParamType[Any]
else:
    _ParamType = click.ParamType


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
            click parsed them. A ``ConfigError`` it raises is raised on at a terminal; when
            a client started the process (stdin not a terminal) every request is answered
            with its message instead (reason ``not_configured``), and the process exits 2
            when stdin closes.
        flag: the option's name.
        log_level, log_file: where the bridge's diagnostics go (never stdout). A
            ``--log-level LEVEL`` on the command line (``debug``, ``info``, ``warning``,
            ``error``, as ``mcp-app-bridge`` takes it) sets the level instead: the
            decorator adds that option, unless the command has a ``--log-level`` of its own,
            whose value the bridge then takes when it is one of those levels.
    """
    wants_params = _takes_one_argument(make_config)

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def branch(*args: Any, **params: Any) -> Any:
            own_level = params.pop(_LOG_LEVEL_PARAM, None)
            if not params.pop(_MCP_STDIO_PARAM):
                return command(*args, **params)
            setup_logging(own_level or _apps_log_level(params) or log_level, log_file)
            try:
                config = make_config(dict(params)) if wants_params else make_config()  # type: ignore[call-arg]
            except ConfigError as exc:
                if diagnostics.stdin_is_a_terminal():
                    raise
                # started by a client: every request learns why (as for mcp-app-bridge)
                logging.getLogger("bridge").error("cannot start: %s (every request is answered with this)", exc)
                from ..serve.startuperror import serve_startup_error

                click.get_current_context().exit(serve_startup_error(str(exc), 2))
            from ..serve.loop import run_stdio

            click.get_current_context().exit(run_stdio(config))

        option = click.option(
            flag,
            _MCP_STDIO_PARAM,
            is_flag=True,
            help="Serve MCP on stdin/stdout for an AI client, through the running app.",
        )
        branch = option(branch)
        siblings: list[click.Parameter] = branch.__click_params__  # type: ignore[attr-defined]
        level = _LogLevelOption(siblings)
        siblings.append(level)
        return branch  # type: ignore[return-value]

    return decorate


_MCP_STDIO_PARAM = "bridge_mcp_stdio"
_LOG_LEVEL_PARAM = "bridge_log_level"
_LOG_LEVEL_FLAG = "--log-level"


class _LevelType(_ParamType):
    name = "level"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return level_name(value)
        except OptionValueError as exc:
            self.fail(str(exc), param, ctx)


class _LogLevelOption(click.Option):
    """``--log-level`` for the bridge half, which steps aside (no spelling, no help line)
    when the app's command has a ``--log-level`` of its own. ``siblings`` is the list the
    command's decorators add their parameters to (click's ``__click_params__``): the
    app's options declared above ``mcp_stdio_option`` join it after this one is made."""

    def __init__(self, siblings: list[click.Parameter]) -> None:
        self._siblings = siblings
        super().__init__(
            [_LOG_LEVEL_FLAG, _LOG_LEVEL_PARAM],
            type=_LevelType(),
            metavar="LEVEL",
            help=f"With --mcp-stdio: the bridge's diagnostics level ({', '.join(LOG_LEVELS)}; on stderr).",
        )

    def _stepped_aside(self) -> bool:
        return any(param is not self and _LOG_LEVEL_FLAG in param.opts for param in self._siblings)

    @property
    def opts(self) -> list[str]:
        return [] if self._stepped_aside() else self._opts

    @opts.setter
    def opts(self, value: list[str]) -> None:
        self._opts = value

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        return None if self._stepped_aside() else super().get_help_record(ctx)


def _apps_log_level(params: dict[str, Any]) -> str | None:
    """The app's own ``--log-level`` value, when it is one of the bridge's levels."""
    for param in click.get_current_context().command.params:
        if param.name != _LOG_LEVEL_PARAM and _LOG_LEVEL_FLAG in param.opts:
            value = params.get(param.name or "")
            if isinstance(value, str) and value.lower() in LOG_LEVELS:
                return value.lower()
    return None


def _takes_one_argument(function: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)
