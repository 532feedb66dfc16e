"""The ``mcp-app-bridge`` command and its subcommands (``check``, ``version``, ``bundle``;
``config`` is loaded only when it runs or help lists it).

``mcp-app-bridge --url URL [options]`` runs the bridge on stdio. A bad option exits 2 with
a message on stderr and nothing on stdout; stdout is only ever the JSON-RPC wire.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from .._version import __version__
from .diagnostics import console_fallbacks, exit_now, import_asyncio_without_tls, setup_logging, start_up_failed
from .options import CONTEXT, PATH, BridgeCommand, bridge_options, build_config, parse_bridge_args, stray_argument

__all__ = ["main"]


class _LazyGroup(click.Group):
    """A group whose ``config`` command is imported only when it runs or help lists it
    (click's documented lazy-loading pattern): serving never loads the config face."""

    _lazy = {"config": ("bridge.cli.config", "config"), "demo-app": ("bridge.cli.demoapp", "demo_app")}

    def main(self, *args: Any, **kwargs: Any) -> Any:
        console_fallbacks()  # before any help or report is printed
        return super().main(*args, **kwargs)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self._lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self._lazy:
            import importlib

            module, name = self._lazy[cmd_name]
            command: click.Command = getattr(importlib.import_module(module), name)
            return command
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        # click's "No such command '<word>'" would repeat a stray argument, a secret maybe.
        if args and not args[0].startswith("-") and self.get_command(ctx, args[0]) is None and not ctx.resilient_parsing:
            ctx.fail(stray_argument(self.list_commands(ctx)))
        return super().resolve_command(ctx, args)


@click.group(cls=_LazyGroup, invoke_without_command=True, context_settings=CONTEXT)
@bridge_options
@click.version_option(__version__, "--version", prog_name="mcp-app-bridge", message="%(prog)s %(version)s")
@click.pass_context
def main(ctx: click.Context, /, **options: Any) -> None:
    """Bridge an AI client on stdio to a desktop app's MCP server over Streamable HTTP.

    Without a command: reads newline-delimited JSON-RPC on stdin, forwards each message to
    the app, and writes every reply to stdout. Errors between the bridge and the app come
    back as JSON-RPC errors (code -32603, data.reason); the bridge keeps serving until
    stdin closes. The app is found by --url, or by its discovery file (--discovery-file,
    or the default one of --app-name).

    Commands (listed below): `check` diagnoses the path to the app; `config` prints,
    installs or links the entry an AI client needs to start the bridge; `demo-app` runs a
    test app; `bundle` builds an MCP Bundle.
    """
    if ctx.invoked_subcommand is not None:
        given = [name for name, value in options.items() if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
        if given:
            raise click.UsageError(f"give the bridge options after `{ctx.invoked_subcommand}`, not before it")
        return
    try:
        config = build_config(options)
        setup_logging(options["log_level"], options["log_file"])
    except click.ClickException as exc:
        start_up_failed(exc, options["log_level"], options["log_file"])

    import_asyncio_without_tls()
    from ..serve.loop import run_stdio  # imported late: `--help` and bad options stay fast

    exit_now(run_stdio(config))


@main.command(cls=BridgeCommand, context_settings=CONTEXT)
@bridge_options
@click.option("--client", metavar="CLIENT", help="Check this AI client's entries instead (a `config install --client` name): that the programs they name still exist, which tools the client loses past its limits, and for codex its own report (`codex app-server`) of each server; no bridge options then.")
@click.option("--name", "names", multiple=True, metavar="NAME", help="With --client: only this server (repeatable), and its whole walk with its own arguments and env.")
@click.option("--all", "walk_all", is_flag=True, help="Walk every client entry that runs the bridge (`config list` shows them), each with its own arguments and env; no bridge options then.")
def check(client: str | None, names: tuple[str, ...], walk_all: bool, **options: Any) -> None:
    """Walk the path an AI client's request takes and report each step.

    endpoint → connect (starting the app if --launch is given) → listener (who serves it) → token → initialize →
    tools/list → ping. Exit status 0 when all pass, 1 otherwise. The token is never shown.

    With --client CLIENT: whether the programs the client's entries name (the command, the
    --launch program) still exist, and which of each entry's tools the client will lose past
    its limits (names too long, too many tools; nothing is started to list them); with
    --client codex also Codex's own report of each server it starts (✓ connected with its
    tools, or ✗ with Codex's error), from the current folder. With --name NAME too: then
    the whole walk with that entry's own arguments and env.

    With --all: the whole walk of every client entry that runs the bridge.
    """
    from .statefolder import current_package, prepare_state_folder

    state_line = prepare_state_folder(package=current_package())  # Windows: in the real profile
    if state_line:
        click.echo(state_line)
    side = _wsl_side_line(entries=client is not None or walk_all)
    if side:
        click.echo(side)
    if walk_all:
        if client is not None or names:
            raise click.UsageError("--all walks every client's entries: give no --client or --name with it")
        from .clientcheck import check_all_command

        check_all_command()
    if client is not None or names:
        from .clientcheck import client_check_command

        client_check_command(click.get_current_context(), client, names)
    config = build_config(options)
    setup_logging("error" if options["log_level"] == "warning" else options["log_level"], options["log_file"])
    import asyncio

    from .check import run_check

    ok = asyncio.run(run_check(config, click.echo, click.style))
    sys.exit(0 if ok else 1)


def _wsl_side_line(*, entries: bool) -> str | None:
    """Inside WSL: which side this check runs on, and what that means (``bridge.clients.wsl``)."""
    import os

    if sys.platform != "linux":
        return None
    from ..clients.wsl import WINDOWS_EXE_NAME, wsl_distribution

    distribution = wsl_distribution(os.environ)
    if distribution is None:
        return None
    if entries:
        return (f"This check runs inside WSL ({distribution}), on the Linux side; each entry below says which side "
                "its bridge runs on.")
    return (f"This check runs inside WSL ({distribution}), on the Linux side: it walks the path a Linux bridge takes. "
            f"For an entry that runs the Windows {WINDOWS_EXE_NAME}, run that program's `check` with the entry's "
            "options (from here too, through interop): it walks the Windows side.")


@main.command()
def version() -> None:
    """Print the version."""
    click.echo(f"mcp-app-bridge {__version__}")


@main.command(context_settings={**CONTEXT, "ignore_unknown_options": True})
@click.option("--exe", "executable", required=True, type=click.Path(exists=True, path_type=Path), help="The frozen build: the one-folder build's folder (build/out/mcp-app-bridge-onedir), or an executable.")
@click.option("--out", required=True, type=PATH, metavar="FILE.mcpb", help="Where the bundle goes.")
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
        mcp-app-bridge bundle --exe build/out/mcp-app-bridge-onedir --out dist/MyApp.mcpb --app-name MyApp

    The one-folder build starts without unpacking itself (a one-file executable unpacks at
    every start, seconds on macOS and with antivirus); the bundle holds the whole folder.
    A --token-env VAR, a --token-command and each --header value become settings the user fills
    in at install time; no secret goes into the bundle, and a header that carries one is refused.
    """
    params = parse_bridge_args(bridge_args)
    build_config(params, require_env=False)
    app_name = params["app_name"]
    if name is None and app_name is None:
        raise click.UsageError("give --name NAME (or the bridge option --app-name NAME)")
    from ..clients.bundle import (
        BundleError,
        bundle_manifest,
        check_bundle_name,
        frozen_executable,
        name_from_app_name,
        write_bundle,
    )

    try:
        name = check_bundle_name(name) if name is not None else name_from_app_name(app_name)
    except BundleError as exc:
        raise click.BadParameter(str(exc), param_hint="--name") from None
    try:
        executable = frozen_executable(executable)
    except BundleError as exc:
        raise click.BadParameter(str(exc), param_hint="--exe") from None
    value_options = {
        opt for param in main.params if isinstance(param, click.Option) and not param.is_flag and not param.count for opt in param.opts
    }
    if platform is None:
        platform = "win32" if executable.suffix.lower() == ".exe" else ("linux" if sys.platform.startswith("linux") else sys.platform)
    bridge_args = _stable_launch_for(bridge_args, platform)
    try:
        manifest = bundle_manifest(
            name=name,
            bridge_args=bridge_args,
            value_options=value_options,
            platform=platform,
            display_name=display_name or app_name,
            description=description,
            author=author,
        )
        write_bundle(executable, out, manifest)
    except BundleError as exc:
        raise click.ClickException(f"{exc}. Nothing was written.") from None
    click.echo(f"wrote {out} (mcp-app-bridge {manifest['version']}, {platform})")




def _stable_launch_for(bridge_args: tuple[str, ...], platform: str) -> tuple[str, ...]:
    """``bridge_args`` with the ``--launch`` program at its stable path for a bundle built
    for ``platform``, maybe on another machine: only the rules that need no look at the
    user's files substitute (Homebrew's ``opt``); a versioned install folder is warned about
    (``bridge/clients/stablepath.py``)."""
    from ..clients.stablepath import stable_launch_command

    args = list(bridge_args)
    for index, arg in enumerate(args):
        if arg == "--launch" and index + 1 < len(args):
            at, prefix = index + 1, ""
        elif arg.startswith("--launch="):
            at, prefix = index, "--launch="
        else:
            continue
        value = args[at][len(prefix) :]
        rewritten, remarks = stable_launch_command(value, windows=platform == "win32", check_exists=False)
        for remark in remarks:
            click.echo(f"warning: {remark}", err=True)
        args[at] = prefix + rewritten
        break
    return tuple(args)
