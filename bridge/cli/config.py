"""``mcp-app-bridge config …``: print, install, remove, link or locate the entry an AI
client needs to start the bridge.

The main command loads this module only when ``config`` runs (or help lists it), so
serving never imports the config face; tomlkit loads only for Codex's file.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..clients.clienttable import CLIENTS
from .options import build_config, parse_bridge_args

__all__ = ["config"]

F = TypeVar("F", bound=Callable[..., Any])

_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
_ENTRY_CONTEXT = {**_CONTEXT, "ignore_unknown_options": True}
_PATH = click.Path(dir_okay=False, path_type=Path)

_CLIENTS = tuple(CLIENTS)


@click.group(context_settings=_CONTEXT, short_help="Print, install, remove or link an AI client's entry.")
def config() -> None:
    """Print, install, remove or link the entry an AI client needs to start the bridge.

    The bridge options go after the command's own, exactly as the bridge should get them:

    \b
        mcp-app-bridge config install --client claude-desktop --name myapp --app-name MyApp

    An app's own executable: --command /path/to/MyApp -- --mcp-stdio
    """


def _warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


def _stderr(line: str) -> None:
    click.echo(line, err=True)


def _client_option(choices: tuple[str, ...] = _CLIENTS) -> Callable[[F], F]:
    return click.option("--client", type=click.Choice(choices), required=True, help="Which AI client.")


def _entry_options(function: F, choices: tuple[str, ...] = _CLIENTS) -> F:
    function = click.argument("bridge_args", nargs=-1, type=click.UNPROCESSED)(function)
    function = click.option(
        "--command",
        "command_path",
        metavar="PATH",
        help="The executable the client starts (default: this bridge). An app gives its own, "
        "with --mcp-stdio after `--`. Kept as given (made absolute, symlinks kept); a bare name is looked up on PATH.",
    )(function)
    function = click.option("--name", required=True, metavar="NAME", help="The server's name in the client.")(function)
    return _client_option(choices)(function)


def _token_variables(args: list[str]) -> list[str]:
    found = []
    for index, arg in enumerate(args):
        if arg == "--token-env" and index + 1 < len(args):
            found.append(args[index + 1])
        elif arg.startswith("--token-env="):
            found.append(arg.split("=", 1)[1])
    return found


def _wsl_options(function: F) -> F:
    function = click.option(
        "--linux-bridge",
        is_flag=True,
        help="Inside WSL: run this Linux bridge (for an app inside WSL too) instead of the Windows one.",
    )(function)
    return click.option(
        "--windows-exe",
        metavar="PATH",
        help="Inside WSL: the Windows mcp-app-bridge.exe the entry runs through WSL interop, as /mnt/c/… or C:\\… "
        "(default: mcp-app-bridge.exe on PATH, which holds the Windows PATH in WSL).",
    )(function)


def _wsl_side(windows_exe: str | None, linux_bridge: bool) -> tuple[str, str] | None:
    """Inside WSL (``bridge.clients.wsl``), unless --linux-bridge: ``(the Windows bridge's WSL
    path, the distribution)`` for an entry that runs it through interop; else ``None``.

    Raises:
        click.UsageError: inside WSL with no Windows bridge found or given.
    """
    import sys

    from ..clients.wsl import WINDOWS_EXE_NAME, find_windows_exe, wsl_distribution, wsl_exe_path

    if sys.platform != "linux":
        if windows_exe or linux_bridge:
            raise click.UsageError("--windows-exe and --linux-bridge are for a client inside WSL")
        return None
    distribution = wsl_distribution(os.environ)
    if distribution is None:
        if windows_exe or linux_bridge:
            raise click.UsageError("--windows-exe and --linux-bridge are for a client inside WSL, and this is not WSL")
        return None
    if linux_bridge:
        if windows_exe:
            raise click.UsageError("give --windows-exe or --linux-bridge, not both")
        return None
    exe = wsl_exe_path(windows_exe) if windows_exe else find_windows_exe(os.environ.get("PATH"))
    if exe is None:
        raise click.UsageError(
            f"this is WSL ({distribution}): the entry should run the Windows bridge, beside the Windows app, but "
            f"{WINDOWS_EXE_NAME} is not on PATH. Install it on Windows, then give its path with "
            f"--windows-exe /mnt/c/…/{WINDOWS_EXE_NAME} (or --linux-bridge for an app that runs inside WSL too)"
        )
    return exe, distribution


def _startup_timeout_option(function: F) -> F:
    return click.option(
        "--startup-timeout",
        "startup_timeout",
        type=click.FloatRange(min=0, min_open=True),
        metavar="SECONDS",
        help="How long the client should wait for the bridge to start and answer initialize, written where the "
        "client has a per-server setting (default: --launch-timeout + 15 with --launch, 45 with --command).",
    )(function)


def _entry(
    client: str,
    command_path: str | None,
    bridge_args: tuple[str, ...],
    *,
    reveal: bool,
    link: bool = False,
    startup_timeout: float | None = None,
    wsl: tuple[str, str] | None = None,
    say: Callable[[str], None] | None = None,
) -> Any:
    """The server entry for these bridge arguments, validated like the bridge would
    (``bridge.clients.clienttable.client_entry`` decides what the client's entry carries). For a
    link, every --token-env variable is named in ``env`` with a placeholder, set or not, and
    nothing of this machine's environment goes in. ``say`` gets each line for stderr (a
    warning, a note) instead of stderr itself: ``config install`` shows them only once the
    entry is written, so that a refusal is all a refused install prints."""
    from ..clients.clienttable import (
        ClientConfigError,
        ServerEntry,
        client_entry,
        list_pages_remark,
        startup_timeout_for,
        tool_timeout_for,
    )
    from ..clients.command import bridge_command, command_warnings, isolate_python, resolve_command
    from ..clients.stablepath import stable_path
    from ..core.config import DEFAULT_LAUNCH_TIMEOUT_SECONDS, DEFAULT_REQUEST_TIMEOUT_SECONDS

    say = say if say is not None else _stderr

    def warn(message: str) -> None:
        say(f"warning: {message}")

    args, remarks = _stable_launch(list(bridge_args))
    for remark in remarks:
        warn(remark)
    if command_path is None:
        options = parse_bridge_args(args)
        build_config(options, require_env=False)
        pages = list_pages_remark(client, args)
        if pages is not None and not link:
            warn(pages)
        if options["url"] is None and options["discovery_file"] is None and options["app_name"] and options["launch"] is None:
            from ..app.discovery import default_discovery_path, unpublished_app_hint

            hint = unpublished_app_hint(options["app_name"], default_discovery_path(options["app_name"]))
            if hint is not None:
                warn(f"{hint}: check the spelling of --app-name, or start the app once and run `mcp-app-bridge check` with these options")
        if options["launch"] is not None:
            for warning in _launch_warnings(options["launch"]):
                warn(warning)
        command = bridge_command()
        command[0], remarks = stable_path(command[0], what="the bridge")
        for remark in remarks:
            warn(remark)
        if startup_timeout is None and options["launch"] is not None:
            startup_timeout = startup_timeout_for(options["launch_timeout_seconds"])
        tool_timeout = tool_timeout_for(
            options["request_timeout_seconds"], options["launch_timeout_seconds"] if options["launch"] is not None else None
        )
    else:
        try:
            path, warnings = resolve_command(command_path)
        except ClientConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="--command") from None
        path, remarks = stable_path(path, what="--command")
        command = [path]
        args, absolute = _absolute_file_arguments(args)
        remarks = [*remarks, *absolute]
        warnings += remarks + command_warnings([path, *args])
        for warning in warnings:
            warn(warning)
        if startup_timeout is None:  # an app's own entry may launch the app (its default bound)
            startup_timeout = startup_timeout_for(DEFAULT_LAUNCH_TIMEOUT_SECONDS)
        tool_timeout = tool_timeout_for(DEFAULT_REQUEST_TIMEOUT_SECONDS, DEFAULT_LAUNCH_TIMEOUT_SECONDS)
    argv = isolate_python([*command, *args])
    wsl_remarks: list[str] = []
    if wsl is not None and command_path is None:  # inside WSL: the Windows bridge, through interop
        from ..clients.wsl import windows_entry, windows_path

        argv, _env, wsl_remarks = windows_entry(wsl[0], args, {}, (), wsl[1])
        say(
            f"inside WSL ({wsl[1]}): the entry runs the Windows bridge {windows_path(wsl[0], wsl[1])} through WSL "
            "interop, so that it runs beside the Windows app (--linux-bridge for an app inside WSL)"
        )
    for remark in wsl_remarks:
        warn(remark)
    variables = _token_variables(args)
    if link:
        placeholders = {variable: f"<the value of {variable}>" for variable in variables}
        return ServerEntry(command=argv[0], args=tuple(argv[1:]), env=placeholders)
    fix = "lower --launch-timeout to {seconds:g} or less"
    if command_path is not None:  # the app's own --mcp-stdio: its bound is set in the app's code
        fix = (
            "have the app's --mcp-stdio wait {seconds:g} s or less for the app to start "
            "(BridgeConfig(launch_timeout_seconds=...) in the app's code)"
        )
    entry, remarks = client_entry(
        client,
        argv,
        token_variables=variables,
        startup_timeout_seconds=startup_timeout,
        tool_timeout_seconds=tool_timeout,
        launch_timeout_fix=fix,
    )
    for remark in remarks:
        warn(remark)
    if wsl is not None and command_path is None:
        from ..clients.wsl import windows_entry

        env = windows_entry(wsl[0], [], entry.env, entry.passed_env, wsl[1])[1]
        entry = dataclasses.replace(entry, env=env)
    if not reveal:
        env = {name: f"<the value of {name}>" if name in variables else value for name, value in entry.env.items()}
        entry = dataclasses.replace(entry, env=env)
    return entry


def _absolute_file_arguments(args: list[str]) -> tuple[list[str], list[str]]:
    """The app's arguments (after ``--`` with ``--command``) with each that names an existing
    file by a relative path made absolute, and what to tell the user: the client starts
    the entry in another folder (its own, or the user's home), where ``script.py`` is not.
    Options (``-…``) and words that name no file here are kept as written."""
    rewritten, remarks = [], []
    for arg in args:
        if arg and not arg.startswith("-") and not os.path.isabs(arg) and os.path.isfile(arg):
            absolute = os.path.abspath(arg)
            remarks.append(
                f"the argument {arg} names a file in this folder; the entry has {absolute}, "
                "since the client starts it from another folder"
            )
            arg = absolute
        rewritten.append(arg)
    return rewritten, remarks


def _refuse_unset_token_variables(client: str, target: Path, args: list[str]) -> None:
    """``config install`` for a client that takes a ``--token-env`` token only as a value in
    its entry (a desktop app, not started from a shell), with the variable not set here:
    the entry would have no token and the bridge would refuse to start. Nothing is
    written, and the user is told how to go on (docs/clients.md, "A token")."""
    from ..clients.clienttable import CLIENT_INFO, client_run
    from .buildconfig import check_variable_name

    if client_run(client).env_passing != "literal":
        return  # the client passes the variable from its own environment
    unset = [variable for variable in _token_variables(args) if not os.environ.get(variable)]
    if not unset:
        return
    for variable in unset:
        check_variable_name(variable)
    variable, title = unset[0], CLIENT_INFO[client].title
    setting = f'$env:{variable} = "<the token>"' if os.name == "nt" else f"export {variable}='<the token>'"
    raise click.ClickException(
        f"{variable} is not set here, and {title} gets a --token-env token only from its entry's env block "
        f"(it is not started from your shell), so the entry would have no token and the bridge would refuse to start. "
        f"{target} was not changed. Set it in this shell and run the same command again: {setting}"
    )


def _stable_launch(args: list[str]) -> tuple[list[str], list[str]]:
    """``args`` with the ``--launch`` program at its stable path, and what to tell the user
    (``bridge.clients.stablepath.stable_launch_command``); the rest is kept as written."""
    from ..clients.stablepath import stable_launch_command

    for index, arg in enumerate(args):
        if arg == "--launch" and index + 1 < len(args):
            at, value, prefix = index + 1, args[index + 1], ""
        elif arg.startswith("--launch="):
            at, value, prefix = index, arg.split("=", 1)[1], "--launch="
        else:
            continue
        rewritten, remarks = stable_launch_command(value, windows=os.name == "nt")
        return [*args[:at], prefix + rewritten, *args[at + 1 :]], remarks
    return args, []


def _launch_warnings(launch: str) -> list[str]:
    """Warnings for ``--launch CMD``: its program is missing here (a path that does not
    exist, a bare name not on PATH), as ``--command`` warns for its own."""
    import shutil

    from .options import split_command

    program = split_command(launch)[0]  # (the bridge options were checked: not empty)
    separators = [sep for sep in (os.sep, os.altsep) if sep]
    if not any(sep in program for sep in separators):
        if shutil.which(program) is None:
            return [f"the --launch program {program!r} is not on PATH here; give its full path, or the bridge cannot start the app"]
        return []
    path = os.path.abspath(program)
    if not os.path.exists(path):
        return [f"the --launch program {path} does not exist (yet); the bridge cannot start the app until it does"]
    if os.path.isdir(path) or (os.name == "posix" and not os.access(path, os.X_OK)):
        return [f"the --launch program {path} is not an executable file; the bridge cannot start the app with it"]
    return []


def _fail(exc: Exception, target: Path | None = None) -> click.ClickException:
    tail = f" {target} was not changed." if target is not None else ""
    return click.ClickException(f"{exc}.{tail}")


def _target(client: str, path: Path | None) -> Path:
    """The file to edit: ``--path``, else the client's own (``config_location``), saying on
    stderr which file the app reads and why where that is not plain (Windows Claude Desktop's
    MSIX package), and warning of a file beside it that the app ignores.

    Raises:
        click.ClickException: the file cannot be told (several packages); nothing changed.
    """
    from ..clients.clienttable import CLIENT_INFO, ClientConfigError, config_location

    if path is not None:
        return path
    try:
        location = config_location(client)
    except ClientConfigError as exc:
        raise click.ClickException(f"{exc}. Nothing was changed.") from None
    if location.reason:
        click.echo(f"{CLIENT_INFO[client].title} reads {location.path}: {location.reason}.", err=True)
    for ignored in location.ignored:
        _warn(f"{ignored} exists too, but {CLIENT_INFO[client].title} does not read it; entries there have no effect")
    return location.path


@config.command(
    "print", context_settings=_ENTRY_CONTEXT, short_help="Print the client's document holding just this entry."
)
@_entry_options
@click.option("--show-secrets", is_flag=True, help="Print the values of --token-env variables instead of placeholders.")
@_startup_timeout_option
@_wsl_options
def config_print(
    client: str,
    name: str,
    command_path: str | None,
    bridge_args: tuple[str, ...],
    show_secrets: bool,
    startup_timeout: float | None,
    windows_exe: str | None,
    linux_bridge: bool,
) -> None:
    """Print the client's configuration document holding just this entry (JSON, or TOML for Codex)."""
    from ..clients.clienttable import ClientConfigError, entry_document
    from ..clients.files import render_document

    if client == "claude-desktop":
        try:
            _target(client, None)  # which file the app reads (the packaged one on Windows), on stderr
        except click.ClickException as exc:  # several packages: printing changes nothing, so say it and go on
            _warn(exc.message.removesuffix(" Nothing was changed."))
    wsl = _wsl_side(windows_exe, linux_bridge)
    entry = _entry(client, command_path, bridge_args, reveal=show_secrets, startup_timeout=startup_timeout, wsl=wsl)
    try:
        document = entry_document(client, name, entry)
    except ClientConfigError as exc:
        raise _fail(exc) from None
    click.echo(render_document(client, document), nl=False)


@config.command("install", context_settings=_ENTRY_CONTEXT, short_help="Add the entry to the client's config file.")
@_entry_options
@click.option(
    "--force", is_flag=True, help="Replace an existing entry of that name; edit the file even if it is read-only."
)
@click.option(
    "--path", "path", type=_PATH, metavar="FILE", help="The client's config file (default: its usual place on this OS)."
)
@_startup_timeout_option
@_wsl_options
def config_install(
    client: str,
    name: str,
    command_path: str | None,
    bridge_args: tuple[str, ...],
    force: bool,
    path: Path | None,
    startup_timeout: float | None,
    windows_exe: str | None,
    linux_bridge: bool,
) -> None:
    """Add the entry to the client's config file, editing it in place (comments and layout
    kept); the previous file is kept as <file>.bak (mode 0600)."""
    from ..clients.clienttable import ClientConfigError, EntryExistsError, next_step
    from ..clients.files import install_entry

    target = _target(client, path)
    if "--force" in bridge_args:
        if command_path is None:
            raise click.UsageError("put --force before --: it is an option of config install, not of the bridge")
        _warn(f"--force after -- goes to {command_path} as its own argument; to replace an existing entry, put --force before --")
    wsl = _wsl_side(windows_exe, linux_bridge)
    _refuse_unset_token_variables(client, target, list(bridge_args))
    said: list[str] = []  # shown once the entry is written: a refused install prints only the refusal
    try:
        entry = _entry(client, command_path, bridge_args, reveal=True, startup_timeout=startup_timeout, wsl=wsl, say=said.append)
        replaced = install_entry(target, client, name, entry, force=force, warn=lambda message: said.append(f"warning: {message}"))
    except EntryExistsError as exc:
        raise _fail(ClientConfigError(f"an entry called {exc.name!r} exists already; replace it with --force"), target) from None
    except ClientConfigError as exc:
        raise _fail(exc, target) from None
    for line in said:
        _stderr(line)
    click.echo(f"{'replaced' if replaced else 'added'} {name!r} in {target}; {next_step(client, name, target)}")
    from .statefolder import current_package, prepare_state_folder

    state_line = prepare_state_folder(package=current_package())  # Windows: in the real profile, outside a package
    if state_line:
        click.echo(state_line, err=True)
    if client == "qwen-code":
        _warn_project_entry_hides(name)
    if command_path is None:
        _warn_what_the_client_loses(client, name, list(bridge_args))


def _warn_what_the_client_loses(client: str, name: str, args: list[str]) -> None:
    """Warn when the client will not be shown the app's tools whole: the tool filter leaves
    none, or a tool is past the client's limits (a name too long with this entry's name, and
    then a shorter ``--name`` to use). The app is never asked: installing edits a file and
    connects to nothing (a client's own trust step comes before anything reaches the app, and
    installing runs none of an entry's programs). The list the app's catalog keeps is read
    when there is one; else nothing is said, and ``check --client`` asks the app.
    docs/clients.md, "What each client sees"."""
    from .toolreport import cataloged_tools, filter_report, limits_report

    try:
        config = build_config(parse_bridge_args(args))
    except click.ClickException:
        return  # (an unset --token-env here: the app could not be asked as the client will)
    listing = cataloged_tools(config, "no catalog")
    if listing.problem is not None:
        return
    _lines, shown, problem = filter_report(config, listing.tools)
    if problem is not None:
        _warn(problem)
    lines, _lost, _suggestion = limits_report(client, name, shown, listing.repeated_cursor)
    for line in lines:
        _warn(line)


def _warn_project_entry_hides(name: str) -> None:
    """Qwen Code (0.24.4) also reads Claude Code's project file, ``.mcp.json`` in the folder it
    starts in (not its parents): an entry of the same name there takes the place of the user
    entry and shows "Pending approval" until approved. Warn when this folder has one."""
    import json
    import stat

    project_file = Path.cwd() / ".mcp.json"
    # Opened without blocking (a FIFO cannot hang the command) or following a symlink; only a
    # regular file of at most 1 MiB is read.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(project_file, flags)
    except OSError:
        return
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 1024 * 1024:
            return
        servers = json.loads(os.read(descriptor, info.st_size + 1)).get("mcpServers")
    except (OSError, ValueError, AttributeError):
        return
    finally:
        os.close(descriptor)
    if isinstance(servers, dict) and name in servers:
        _warn(
            f"{project_file} (Claude Code's project file, which Qwen Code reads too) has an entry {name!r} as well: "
            f"Qwen Code started in this folder shows that one, \"Pending approval\", instead of this one. "
            f"Give this entry another --name, or remove that one (config remove --client claude-code --name {name})"
        )


@config.command("remove", context_settings=_CONTEXT, short_help="Remove the entry from the client's config file.")
@_client_option()
@click.option("--name", required=True, metavar="NAME", help="The server's name in the client.")
@click.option(
    "--path", "path", type=_PATH, metavar="FILE", help="The client's config file (default: its usual place on this OS)."
)
@click.option("--force", is_flag=True, help="Edit the file even if it is read-only (it stays read-only).")
def config_remove(client: str, name: str, path: Path | None, force: bool) -> None:
    """Remove the entry from the client's config file. The previous file is kept as
    <file>.bak (0600) with the removed entry's env values blanked."""
    from ..clients.clienttable import ClientConfigError
    from ..clients.files import uninstall_entry

    target = _target(client, path)
    try:
        uninstall_entry(target, name, client, force=force)
    except ClientConfigError as exc:
        raise _fail(exc, target) from None
    click.echo(f"removed {name!r} from {target}")


@config.command("link", context_settings=_ENTRY_CONTEXT, short_help="Print a one-click install link (VS Code, Cursor).")
@_entry_options
def config_link(client: str, name: str, command_path: str | None, bridge_args: tuple[str, ...]) -> None:
    """Print the client's install URL for the entry. No secret value goes into it: VS Code
    asks for each --token-env value at install; Cursor's link leaves it out (with a warning)."""
    from ..clients.clienttable import ClientConfigError
    from ..clients.links import LINK_CLIENTS, install_link

    if client not in LINK_CLIENTS:
        raise click.BadParameter(
            f"{client} takes no install link; choose {' or '.join(LINK_CLIENTS)}, or use `config install`",
            param_hint="--client",
        )
    try:
        link, warnings = install_link(client, name, _entry(client, command_path, bridge_args, reveal=False, link=True))
    except ClientConfigError as exc:
        raise _fail(exc) from None
    for warning in warnings:
        _warn(warning)
    click.echo(link)


@config.command("list", context_settings=_CONTEXT, short_help="List every client entry that runs the bridge.")
def config_list() -> None:
    """List every entry, in every client's file at its usual place, that runs the bridge:
    the clients that read the file, the name, the bridge arguments (no env values) and the
    file. An entry in a file two clients read (a project's .mcp.json: claude-code and
    vscode-agent-project) is one row naming both. An app's own entry (--command … --
    --mcp-stdio) is listed as such. `check --all` walks each."""
    from .entrywalk import bridge_args_of, bridge_entries

    shown = 0
    for clients, path, name, entry, problem in bridge_entries():
        client = ", ".join(clients)
        if problem is not None:
            _warn(f"{client}: {problem}")
            continue
        args = bridge_args_of(entry)
        if args is None and "--mcp-stdio" not in (entry.get("args") or []):
            continue
        shown += 1
        what = " ".join(_masked(args)) if args is not None else f"the app's own {entry.get('command')} --mcp-stdio"
        click.echo(f"{client}\t{name}\t{what}\t({path})")
    if shown == 0:
        click.echo("no client entry runs mcp-app-bridge here")


def _masked(args: list[str]) -> list[str]:
    """Bridge arguments as shown: a ``--header``'s value (it may hold a credential) as ``NAME: …``."""
    shown = []
    for index, arg in enumerate(args):
        if index and args[index - 1] == "--header":
            arg = arg.split(":", 1)[0] + ": …"
        elif arg.startswith("--header="):
            arg = arg.split(":", 1)[0] + ": …"
        shown.append(arg)
    return shown


@config.command("path", context_settings=_CONTEXT, short_help="Print where the client keeps its MCP configuration.")
@_client_option()
def config_path_command(client: str) -> None:
    """Print where the client keeps its MCP configuration on this OS (on Windows, the packaged
    Claude Desktop's own file when there is one; why, on stderr)."""
    click.echo(str(_target(client, None)))
