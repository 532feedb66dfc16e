"""The bridge's options as click options, built from the one table
(``bridge/cli/optiontable.py``): for the bridge itself, ``check``, and the bridge arguments
that ``config`` and ``bundle`` take after their own.

:func:`build_config` turns parsed options into a :class:`~bridge.core.config.BridgeConfig`
(click usage errors for what is wrong), and :func:`parse_bridge_args` parses an argument
list as the bridge would, without running it. Neither these nor the commands built with
:class:`BridgeCommand` repeat an option's value or a stray argument in an error (see
``optiontable``'s docstring): click's own messages for a bad number or choice, or an extra
argument, would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.shell_completion import CompletionItem

# click-free, so that a plain serving start (serve.py) can build the configuration too.
from .buildconfig import build_config, split_command
from .optiontable import BRIDGE_OPTIONS, BridgeOption, OptionValueError, file_path

__all__ = [
    "CLICK_OPTIONS",
    "CONTEXT",
    "PATH",
    "BridgeCommand",
    "bridge_options",
    "build_config",
    "parse_bridge_args",
    "stray_argument",
    "split_command",
]

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:  # generic in the annotations of newer click
    _ParamType = click.ParamType[Any]
else:
    _ParamType = click.ParamType

CONTEXT: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


PATH = click.Path(dir_okay=False, path_type=Path)


class _TableType(_ParamType):
    """A click type that converts with the table's converter: the same values as the
    click-free parser, and messages that do not repeat the value."""

    def __init__(self, option: BridgeOption) -> None:
        assert option.convert is not None
        self.name = (option.metavar or "value").lower()
        self._convert = option.convert
        self._choices = option.choices
        self._paths = option.convert is file_path

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):  # a default, or a value converted already
            return value
        try:
            return self._convert(value)
        except OptionValueError as exc:
            self.fail(str(exc), param, ctx)

    def shell_complete(self, ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        if self._paths:
            return [CompletionItem(incomplete, type="file")]
        return [CompletionItem(choice) for choice in self._choices if choice.startswith(incomplete)]


def _click_option(option: BridgeOption) -> Callable[[F], F]:
    """The click option for one row of the table."""
    shown = option.default is not None and option.default != ()
    if option.convert is None:  # a switch
        declaration = f"{option.flag}/{option.off_flag}" if option.off_flag else option.flag
        return click.option(
            declaration, option.dest, is_flag=True, default=option.default, show_default=shown and option.off_flag is not None,
            envvar=option.env, help=option.help,
        )
    return click.option(
        option.flag, *option.aliases, option.dest, type=_TableType(option), default=option.default, show_default=shown,
        multiple=option.multiple, metavar=option.metavar, envvar=option.env, help=option.help,
    )


#: The click options, one for each row of the table, in its order.
CLICK_OPTIONS = [_click_option(option) for option in BRIDGE_OPTIONS]


def bridge_options(function: F) -> F:
    """Add every bridge option to a click command (the bridge itself, ``check``)."""
    for option in reversed(CLICK_OPTIONS):
        function = option(function)
    return function


def stray_argument(commands: Sequence[str] = ()) -> str:
    """The error for an argument that is neither an option nor a command (nor an option's
    value), in place of click's, which repeats it: it is often a value split off its
    option, such as the token of a ``--header`` given as two words in a JSON ``args`` list."""
    what = f"an option or a command ({', '.join(commands)})" if commands else "an option"
    return (
        f"an argument is not {what}, nor the value of the option before it (not repeated here: it may be a secret); "
        "is a value with spaces split into two arguments? Give each option's value as one argument"
    )


class BridgeCommand(click.Command):
    """A click command that refuses an extra argument without repeating it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.allow_extra_args = True  # left in ctx.args; refused here, in our words
        rest = super().parse_args(ctx, args)
        if rest and not ctx.resilient_parsing:
            ctx.fail(stray_argument())
        return rest


def parse_bridge_args(args: Sequence[str]) -> dict[str, Any]:
    """Parse ``args`` as the bridge's own command line would (the same options), without
    running anything; returns the parsed options for :func:`build_config`.

    Raises:
        click.UsageError: an unknown or malformed option, prefixed "bridge option:".
    """
    command = bridge_options(BridgeCommand("mcp-app-bridge", context_settings=CONTEXT, callback=lambda **_: None))
    try:
        context = command.make_context("mcp-app-bridge", list(args), resilient_parsing=False)
    except click.UsageError as exc:
        raise click.UsageError(f"bridge option: {exc.format_message()}") from None
    return dict(context.params)
