"""The plain serving command line without click: ``mcp-app-bridge --url URL …`` as an AI
client runs it, parsed and served without importing click.

An AI client starts the bridge at every session and for every health check, and only
ever with bridge options. click and what only it loads (``uuid``, ``platform``,
``datetime``, ``gettext``, ``locale``, …) were 15-18 ms of the start's CPU and 1.7 MiB of
its memory (bench/README.md, "Start-up"), as much as the bridge's lead over mcp-stdio. So
:func:`main` first tries :func:`parse_plain_argv`: the bridge options in their plain forms
only (``--name VALUE`` and flags, each once).
Both take the options, their converters and defaults from one table
(``bridge/cli/optiontable.py``). Anything else (``--help``, ``--version``, a command,
``--name=VALUE``, a value starting with "-", an option twice, a value the converter
refuses, shell completion, a variable that gives an option's value), and
any error while building the configuration, goes to the click command
(:data:`bridge.cli.commands.main`) exactly as before: it parses the whole command line
again and says what is wrong. tests/cli/test_serve.py holds both equal to the table.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .buildconfig import build_config
from .diagnostics import console_fallbacks, exit_now, import_asyncio_without_tls, setup_logging
from .optiontable import BRIDGE_OPTIONS, BridgeOption, OptionValueError, defaults

__all__ = ["PLAIN_DEFAULTS", "main", "parse_plain_argv"]

# -- the plain serving command line, from the one table (optiontable.py) ----------------------

#: Every bridge option's value when it is not given (the table's defaults, as click's).
PLAIN_DEFAULTS: dict[str, Any] = defaults()

#: The options that take a value, by spelling.
_VALUE_OPTIONS: dict[str, BridgeOption] = {
    spelling: option for option in BRIDGE_OPTIONS if option.convert is not None for spelling in option.spellings
}
#: The switches' spellings: (dest, value).
_FLAGS: dict[str, tuple[str, bool]] = {
    spelling: (option.dest, spelling == option.flag)
    for option in BRIDGE_OPTIONS
    if option.convert is None
    for spelling in option.spellings
}
#: Variables that give an option's value: when one is set, click parses (it reads them).
_ENV_VARIABLES = tuple(option.env for option in BRIDGE_OPTIONS if option.env)


def parse_plain_argv(argv: list[str]) -> dict[str, Any] | None:
    """The bridge options of ``argv`` (``sys.argv[1:]``) as click would parse them, keyed
    like :data:`PLAIN_DEFAULTS`; or None for any command line that is not plain (see the
    module docstring), which the click command then parses."""
    if any(variable in os.environ for variable in _ENV_VARIABLES):
        return None
    options = dict(PLAIN_DEFAULTS)
    given: set[str] = set()
    many: dict[str, list[Any]] = {}
    index = 0
    try:
        while index < len(argv):
            word = argv[index]
            if word in _FLAGS:
                dest, value = _FLAGS[word]
                index += 1
            elif word in _VALUE_OPTIONS and index + 1 < len(argv) and not argv[index + 1].startswith("-"):
                option = _VALUE_OPTIONS[word]
                assert option.convert is not None
                dest, value = option.dest, option.convert(argv[index + 1])
                index += 2
                if option.multiple:
                    many.setdefault(dest, []).append(value)
                    continue
            else:
                return None
            if dest in given:
                return None
            given.add(dest)
            options[dest] = value
    except OptionValueError:  # click says what is wrong
        return None
    options.update((dest, tuple(values)) for dest, values in many.items())
    return options


def main() -> None:
    """The ``mcp-app-bridge`` command (and ``python -m bridge``): serve at once when the
    command line is plain, else hand it to the click command."""
    options = None
    if not any(name.startswith("_") and name.endswith("_COMPLETE") for name in os.environ):  # click's shell completion
        options = parse_plain_argv(sys.argv[1:])
    if options is not None:
        console_fallbacks()  # as the click command does first
        try:
            config = build_config(options)
            setup_logging(options["log_level"], options["log_file"])
        except Exception:  # a reason to give: the click command parses again and gives it
            options = None  # (as a client-started bridge, by answering every request with it)
    if options is None:
        from .commands import main as click_main

        click_main()
        return
    from ..serve.catalogstart import answer_start_from_catalog, hold_signals

    hold_signals()  # until the serving loop takes them over: a client that has an early reply may signal at once

    # A client's start-up answered from the catalog while the app is down, before the
    # serving loop (and asyncio with it) is loaded: bridge/serve/catalogstart.py.
    catalog_start = answer_start_from_catalog(config)
    if catalog_start is None:  # or its first initialize answered by the running app: bridge/serve/appstart.py
        from ..serve.appstart import answer_start_from_app

        catalog_start = answer_start_from_app(config)
    import_asyncio_without_tls()
    from ..serve.loop import run_stdio  # what the click command runs, with what click does around it

    try:
        status = run_stdio(config, catalog_start=catalog_start)
    except (EOFError, KeyboardInterrupt):  # click's "Aborted!"
        sys.stderr.write("\nAborted!\n")
        sys.exit(1)
    exit_now(status)
