"""AI clients' MCP configuration files: the entry that launches the bridge, where each
client keeps its file, and a safe edit of it.

Each client's format, as its own documentation gives it (the URL is in :data:`CLIENT_INFO`
and in the tests' golden files, ``tests/golden/clients/``):

- Claude Desktop, Cursor, Windsurf, LM Studio, Gemini CLI, Qwen Code, Antigravity CLI:
  ``{"mcpServers": {NAME: {"command", "args", "env"}}}`` (Antigravity CLI exits on a JSON
  syntax error, so its file is written as strict JSON only, checked before it is replaced);
- Claude Code (project ``.mcp.json``, user ``~/.claude.json``) and VS Code's agent (workspace
  ``.mcp.json``): the same, with ``"type": "stdio"``;
- Copilot CLI and VS Code's agent (``~/.copilot/mcp-config.json``): the same, with
  ``"type": "local"`` and ``"tools": ["*"]``, as its own ``copilot mcp add`` writes it;
- VS Code (``mcp.json``): ``{"servers": {NAME: {"type": "stdio", "command", "args", "env"}}}``;
- Zed (``settings.json``): ``{"context_servers": {NAME: {"command", "args", "env"}}}``;
- Codex (``config.toml``): ``[mcp_servers.NAME]`` with ``command``, ``args``, ``env``.

``command`` is always an absolute path to a real executable (never a ``.cmd`` shim, which
Windows clients run through ``cmd.exe /C``, where spaces split arguments: punkpeye/mcp-remote#52);
every option is its own ``args`` element, so paths with spaces survive every client's way
of launching; secrets only ever go in ``env``, never in ``args``.

Writing is careful (``bridge.clients.files``): the file is edited in place, so comments,
trailing commas, key order and layout survive (JSONC and TOML alike); a file that cannot
be used, or an entry of the same name without ``force``, is refused and the file left
byte for byte unchanged; the previous file is kept as ``<file>.bak`` (0600); a symlinked
file is written through (the link stays, its target is replaced atomically).

How a client runs the entry is in :data:`CLIENT_RUNS` (:func:`client_entry` builds the
entry ``config install`` writes from it): what the client passes of its own environment
(Codex only 11 variables plus ``env_vars``; Gemini CLI drops names with TOKEN, KEY…; Claude
Code all of it), and its per-server start-up timeout (Codex ``startup_timeout_sec``, Gemini
CLI ``timeout``). Every entry ``config install`` writes carries the user's
``XDG_STATE_HOME`` (:func:`state_environment`), so the bridge finds the app's discovery
file under each of them.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core.config import DEFAULT_LAUNCH_TIMEOUT_SECONDS, DEFAULT_REQUEST_TIMEOUT_SECONDS
from .devicenames import is_device_name
from .location import AmbiguousLocation, ConfigLocation, claude_desktop_location

__all__ = [
    "CLIENTS",
    "CLIENT_INFO",
    "ClientInfo",
    "ClientConfigError",
    "EntryExistsError",
    "ServerEntry",
    "ClientRun",
    "CLIENT_RUNS",
    "client_run",
    "client_entry",
    "app_entry",
    "state_environment",
    "startup_timeout_for",
    "tool_timeout_for",
    "STARTUP_MARGIN_SECONDS",
    "config_path",
    "config_location",
    "entry_object",
    "entry_document",
    "read_servers",
    "next_step",
]


class ClientConfigError(ValueError):
    """A client configuration file cannot be used as asked. The file was not changed."""


class EntryExistsError(ClientConfigError):
    """An entry with this name is in the file already, and ``force`` was not given. The
    file was not changed.

    Args:
        name: the entry's name.
    """

    def __init__(self, name: str) -> None:
        super().__init__(f"an entry called {name!r} exists already; replace it with force=True")
        self.name = name


@dataclass(frozen=True)
class ClientInfo:
    """What one client reads.

    Attributes:
        title: the client's name for messages.
        doc_url: the client's own documentation of the format.
        syntax: ``"json"`` (strict), ``"jsonc"`` (comments and trailing commas) or ``"toml"``.
        servers_key: the top-level key holding the entries.
        stdio_type: entries carry ``"type": "stdio"``.
        remote_keys: keys that make an entry a remote (URL) one.
        rival_key: a key that, present, means the file is another client's (refused).
        bare_entries: entries with neither ``command`` nor a URL are allowed (Zed's
            extension-provided servers).
        name_pattern: names the client accepts, when it restricts them.
        stdio_type_name: the ``type`` a stdio entry carries (with ``stdio_type``).
        extra_members: further members every entry gets, after ``env`` (tuples become
            JSON arrays), e.g. Copilot CLI's ``"tools": ["*"]``.
        next_step: what the user does after ``config install`` before the client starts the
            bridge; ``{title}``, ``{name}`` and ``{folder}`` (the config file's folder) are
            filled in.
        exits_on_bad_json: a JSON syntax error in the file makes the client exit (Antigravity
            CLI): a file with comments or trailing commas is refused, and the text written is
            parsed as strict JSON before it replaces the file.
    """

    title: str
    doc_url: str
    syntax: str = "json"
    servers_key: str = "mcpServers"
    stdio_type: bool = False
    remote_keys: tuple[str, ...] = ("url",)
    rival_key: str | None = None
    bare_entries: bool = False
    name_pattern: str | None = None
    stdio_type_name: str = "stdio"
    extra_members: tuple[tuple[str, object], ...] = ()
    next_step: str = "restart {title} to use it"
    exits_on_bad_json: bool = False


_CLAUDE_CODE_DOC = "https://code.claude.com/docs/en/mcp"

# Each format was checked on 2026-12-01 against the page named beside it, as the search
# corpus holds it. Where the page itself was not in the corpus, the note says what was:
# - Claude Desktop: the MCP user quickstart is only cited by others (their copies agree);
# - Claude Code: code.claude.com/docs/en/mcp through copies (scopes: project .mcp.json,
#   user = top-level "mcpServers" of ~/.claude.json);
# - Windsurf: docs.windsurf.com is cited by others (path and "mcpServers", "serverUrl");
# - LM Studio: its docs say ~/.lmstudio/mcp.json (%USERPROFILE% on Windows); a bug report
#   (lmstudio-bug-tracker 1371) says one macOS build keeps it in ~/.cache/lm-studio instead.
# - Qwen Code: its docs page, and the docs bundled in @qwen-code/qwen-code 0.24.4 (user scope
#   ~/.qwen/settings.json, or $QWEN_HOME/settings.json; `qwen mcp add --scope user` writes there);
#   its folder trust, off unless the user turns on security.folderTrust.enabled, does not gate
#   user-level servers (seen with `qwen mcp list` 0.24.4).
# - Copilot CLI: docs.github.com (add-mcp-servers), cited through the github/docs pull requests
#   that changed it (41226: ~/.copilot; 44236: the workspace .mcp.json, loaded only in a trusted
#   folder); @github/copilot 1.0.102's own `copilot mcp add` writes "type": "local" and
#   "tools": ["*"] there, and COPILOT_HOME moves the whole ~/.copilot folder.

# - Antigravity CLI (`agy`, which replaced Gemini CLI for personal accounts in June 2026):
#   antigravity.google/docs/cli/mcp, as cited in google-antigravity/antigravity-cli issue 272 and
#   by the clients that moved (gleanwork/mcp-config 110, mrgoonie/claudekit-cli 902, speakeasy-api/
#   gram 5732): ~/.gemini/config/mcp_config.json, per workspace .agents/mcp_config.json,
#   "mcpServers" with command/args/env, "serverUrl" for a remote one. It is not on npm.
# - VS Code's agent (its Agent Host): code.visualstudio.com/docs/agent-customization/mcp-servers,
#   as quoted in neon-solutions/add-mcp issue 108 and Chemaclass/agnostic-ai issue 610: it reads a
#   workspace .mcp.json and the user's ~/.copilot/mcp-config.json natively (Copilot CLI's files
#   and format), not .vscode/mcp.json.

_ANTIGRAVITY_DOC = "https://antigravity.google/docs/cli/mcp"
_VSCODE_AGENT_DOC = "https://code.visualstudio.com/docs/agent-customization/mcp-servers"

_ANTIGRAVITY = ClientInfo(
    "Antigravity CLI (~/.gemini/config/mcp_config.json)",
    _ANTIGRAVITY_DOC,
    remote_keys=("serverUrl", "url"),
    rival_key="servers",
    exits_on_bad_json=True,
    next_step="restart Antigravity CLI (agy) to use it; its /mcp shows the server",
)

#: Every client ``config`` knows, by its ``--client`` id.
CLIENT_INFO: dict[str, ClientInfo] = {
    "claude-desktop": ClientInfo(
        "Claude Desktop", "https://modelcontextprotocol.io/quickstart/user", rival_key="servers"
    ),
    "claude-code": ClientInfo(
        "Claude Code (project .mcp.json)",
        _CLAUDE_CODE_DOC,
        stdio_type=True,
        rival_key="servers",
        # Claude Code starts a project server only once the user has trusted the folder and
        # approved the server (its start-up dialogs); until then `claude mcp list` shows it
        # as "Pending approval".
        next_step="run `claude` in {folder}, trust the folder and approve the server {name!r}; "
        "`claude mcp list` there then shows it connected",
    ),
    "claude-code-user": ClientInfo(
        "Claude Code (user scope, ~/.claude.json)",
        _CLAUDE_CODE_DOC,
        stdio_type=True,
        next_step="restart Claude Code to use it; `claude mcp list` shows it connected",
    ),
    "vscode": ClientInfo(
        "VS Code",
        "https://code.visualstudio.com/docs/copilot/guides/mcp-developer-guide",
        syntax="jsonc",
        servers_key="servers",
        stdio_type=True,
        rival_key="mcpServers",
    ),
    "cursor": ClientInfo("Cursor", "https://cursor.com/docs/mcp", rival_key="servers"),
    "codex": ClientInfo(
        "Codex",
        "https://developers.openai.com/codex/mcp",
        syntax="toml",
        servers_key="mcp_servers",
        # Codex refuses other names at start ("must match pattern ^[a-zA-Z0-9_-]+$",
        # openai/codex issue 5635).
        name_pattern=r"[A-Za-z0-9_-]+",
    ),
    "gemini-cli": ClientInfo(
        "Gemini CLI",
        "https://geminicli.com/docs/tools/mcp-server/",
        remote_keys=("url", "httpUrl"),
        # In a folder not trusted, Gemini CLI starts no MCP server at all, user-level ones included.
        next_step="restart Gemini CLI and trust the folder you start it in (its trust dialog, or /permissions); "
        "`gemini mcp list` there then shows it connected",
    ),
    "qwen-code": ClientInfo(
        "Qwen Code",
        "https://qwenlm.github.io/qwen-code-docs/en/users/features/mcp/",
        # Its folder trust (off by default) gates a folder's own settings, not this user-level
        # entry: `qwen mcp list` 0.24.4 starts it in a folder not trusted too.
        next_step="restart Qwen Code to use it; `qwen mcp list` shows it connected",
    ),
    "copilot-cli": ClientInfo(
        "Copilot CLI",
        "https://docs.github.com/en/copilot/how-tos/copilot-cli/customize-copilot/add-mcp-servers",
        stdio_type=True,
        stdio_type_name="local",
        extra_members=(("tools", ("*",)),),
        rival_key="servers",
        next_step="restart Copilot CLI and trust the folder you start it in (it asks at its first start there); "
        "`copilot mcp list` shows the entry",
    ),
    "windsurf": ClientInfo(
        "Windsurf",
        "https://docs.windsurf.com/windsurf/cascade/mcp",
        remote_keys=("serverUrl", "url"),
        rival_key="servers",
    ),
    "zed": ClientInfo(
        "Zed", "https://zed.dev/docs/ai/mcp", syntax="jsonc", servers_key="context_servers", bare_entries=True
    ),
    "lm-studio": ClientInfo("LM Studio", "https://lmstudio.ai/docs/app/mcp", rival_key="servers"),
    "antigravity": _ANTIGRAVITY,
    "antigravity-project": replace(
        _ANTIGRAVITY,
        title="Antigravity CLI (workspace .agents/mcp_config.json)",
        next_step="start Antigravity CLI (agy) in the folder that holds {folder}; its /mcp shows the server",
    ),
    "vscode-agent": ClientInfo(
        "VS Code agent (~/.copilot/mcp-config.json)",
        _VSCODE_AGENT_DOC,
        stdio_type=True,
        stdio_type_name="local",
        extra_members=(("tools", ("*",)),),
        rival_key="servers",
        next_step="restart VS Code's agent to use it (Copilot CLI reads this file too)",
    ),
    "vscode-agent-project": ClientInfo(
        "VS Code agent (workspace .mcp.json)",
        _VSCODE_AGENT_DOC,
        stdio_type=True,
        rival_key="servers",
        next_step="open {folder} in VS Code and start its agent there; Claude Code and Copilot CLI read this file too",
    ),
}

#: Client ids accepted by ``--client``.
CLIENTS = tuple(CLIENT_INFO)


@dataclass(frozen=True)
class ClientRun:
    """How a client runs a stdio server: what it passes of its own environment, and how
    long it waits for the server to start.

    Attributes:
        env_passing: how a variable of the user's environment (a ``--token-env`` token)
            reaches the bridge without its value being written into the file:
            ``"literal"``: it cannot (a desktop app, not started from the user's shell), so
            the value goes into ``env``; ``"inherit"``: the client passes its whole
            environment to the server, so nothing is written; ``"env_vars"``: the name goes
            into a list the client passes from its own environment (Codex ``env_vars``);
            ``"expand"``: ``env`` gets ``"$VAR"``, which the client expands from its own
            environment (Gemini CLI).
        startup_timeout_key: the entry's key for how long the client waits for the server
            to start and answer ``initialize``, if the client has one.
        startup_timeout_scale: that key's unit per second (1 for seconds, 1000 for ms).
        startup_timeout_floor_seconds: the least value worth writing there, when the same
            key also bounds every later request (Gemini CLI: its 600 s default).
        startup_budget_seconds: the client's fixed start-up budget, when it has no
            per-server key (Claude Code: ``MCP_TIMEOUT``, default 30 s).
        startup_budget_hint: how to raise that budget; ``{milliseconds}`` is filled in.
        startup_budget_max_seconds: the most the budget can be raised to.
        tool_timeout_key: the entry's key for how long the client waits for a tool call's
            reply, if the client has one (Codex ``tool_timeout_sec``); written sized to
            the bridge's own bound (:func:`tool_timeout_for`), so that the bridge's
            ``timeout`` reply comes first.
    """

    env_passing: str = "literal"
    startup_timeout_key: str | None = None
    startup_timeout_scale: int = 1
    startup_timeout_floor_seconds: float = 0.0
    startup_budget_seconds: float | None = None
    startup_budget_hint: str | None = None
    startup_budget_max_seconds: float | None = None
    tool_timeout_key: str | None = None


# Claude Code passes its whole environment to a stdio server, and `claude mcp get` prints
# an entry's env values in clear (anthropics/claude-code issues 30467, 64043). It has no
# per-server start-up timeout: MCP_TIMEOUT (ms, in its own environment) bounds every
# server's start, 30 s by default, and the SDK's 60 s request timeout caps it (issue 7575).
_CLAUDE_CODE_RUN = ClientRun(
    env_passing="inherit",
    startup_budget_seconds=30.0,
    startup_budget_hint="start Claude Code with MCP_TIMEOUT={milliseconds} in its environment",
    startup_budget_max_seconds=60.0,
)

#: How each client runs the bridge, where it differs from :class:`ClientRun`'s defaults
#: (a desktop app that passes nothing of the user's shell and has no start-up setting).
CLIENT_RUNS: dict[str, ClientRun] = {
    "claude-code": _CLAUDE_CODE_RUN,
    "claude-code-user": _CLAUDE_CODE_RUN,
    # A server gets only 11 variables of Codex's environment (codex-rs/rmcp-client
    # utils.rs DEFAULT_ENV_VARS: HOME LOGNAME PATH SHELL USER __CF_USER_TEXT_ENCODING LANG
    # LC_ALL TERM TMPDIR TZ), then the names in `env_vars`, then the literal `env`.
    # `startup_timeout_sec` bounds start-up, initialize and tools/list (unset: 30 s, as
    # measured with 0.169.0; its docs say 10 s); tool calls have their own `tool_timeout_sec`.
    # `tool_timeout_sec` bounds each tool call (unset: 60 s, its docs; openai/codex #3959).
    "codex": ClientRun(env_passing="env_vars", startup_timeout_key="startup_timeout_sec", tool_timeout_key="tool_timeout_sec"),
    # Its stdio servers get its environment without the names matching TOKEN, SECRET, KEY,
    # AUTH, PASSWORD, CREDENTIAL… (only PATH, HOME, LANG, SHELL, TMPDIR, USER, LOGNAME… under
    # GitHub Actions); the entry's `env` is added afterwards, each value with $VAR and ${VAR}
    # expanded from its whole environment (google-gemini/gemini-cli packages/core
    # src/tools/mcp-client.ts, src/services/environmentSanitization.ts). `timeout` (ms)
    # bounds the connection (initialize) and every request: unset, 600 s in a session but
    # 5 s in `gemini mcp list` (packages/cli/src/commands/mcp/list.ts).
    "gemini-cli": ClientRun(
        env_passing="expand",
        startup_timeout_key="timeout",
        startup_timeout_scale=1000,
        startup_timeout_floor_seconds=600.0,
    ),
    # Qwen Code passes its whole environment to a stdio server, names with TOKEN, SECRET or
    # KEY included (measured with `qwen mcp list` 0.24.4). `discoveryTimeoutMs` (ms) bounds a
    # server's start-up handshake in a session (unset: 30 s for stdio, its MCP docs); tool calls
    # have their own `timeout`. `qwen mcp list` keeps its own 10 s whatever either says.
    "qwen-code": ClientRun(env_passing="inherit", startup_timeout_key="discoveryTimeoutMs", startup_timeout_scale=1000),
    # Copilot CLI: not measured (it starts no server without a GitHub login), so the defaults:
    # the value in `env` (its `env` values are literal unless written ${VAR}), no start-up key.
}


#: The clients that read only a list's first page (they ignore ``nextCursor``): their entry
#: needs ``--merge-list-pages`` for an app that sends a list in pages. docs/clients.md, "Lists
#: in pages", has the measurements and reports these come from.
DROPS_LIST_PAGES: dict[str, str] = {
    "gemini-cli": "Gemini CLI reads only the first page of a list (0.61.0, measured)",
    "claude-desktop": "Claude Desktop reads only the first page of a list (reported: anthropics/claude-code#66537)",
    "copilot-cli": "GitHub Copilot CLI read only the first page of a list (1.0.68: github/copilot-cli#4006)",
}


def list_pages_remark(client: str, bridge_args: list[str] | tuple[str, ...]) -> str | None:
    """What to tell a user installing ``client``'s entry with ``bridge_args`` when the client
    drops a list's later pages (:data:`DROPS_LIST_PAGES`) and the entry lacks
    ``--merge-list-pages``; ``None`` otherwise."""
    why = DROPS_LIST_PAGES.get(client)
    if why is None or "--merge-list-pages" in bridge_args:
        return None
    return (
        f"{why}: if the app sends its tools (or prompts, resources) in pages, the later pages' are missing there; "
        "add --merge-list-pages to this entry (mcp-app-bridge check says whether the app pages its tools; "
        "docs/clients.md, \"Lists in pages\")"
    )


def client_run(client: str) -> ClientRun:
    """How ``client`` runs the bridge (:data:`CLIENT_RUNS`, else the defaults).

    Raises:
        ClientConfigError: an unknown client.
    """
    _info(client)
    return CLIENT_RUNS.get(client, ClientRun())


def _with_passed_env(client: str, entry: ServerEntry) -> ServerEntry:
    """``entry`` with its ``passed_env`` in ``env`` as ``"$VAR"``, for a client that expands it."""
    if client_run(client).env_passing != "expand" or not entry.passed_env:
        return entry
    env = {**entry.env, **{variable: "$" + variable for variable in entry.passed_env}}
    return replace(entry, env=env)


def _run_members(client: str, entry: ServerEntry) -> dict[str, Any]:
    """The members for how the client runs the entry: Codex's ``env_vars``, and the start-up
    timeout under the client's key (whole units, at least its floor)."""
    run = client_run(client)
    members: dict[str, Any] = {}
    if run.env_passing == "env_vars" and entry.passed_env:
        members["env_vars"] = list(entry.passed_env)
    startup = entry.startup_timeout_seconds
    tool = entry.tool_timeout_seconds
    if run.startup_timeout_floor_seconds and tool is not None and tool > run.startup_timeout_floor_seconds:
        # the key bounds every request (Gemini CLI): a tool call gets the bridge's bound too
        startup = max(startup or 0.0, tool)
    if run.startup_timeout_key and startup is not None:
        seconds = max(startup, run.startup_timeout_floor_seconds)
        members[run.startup_timeout_key] = math.ceil(seconds * run.startup_timeout_scale)
    if run.tool_timeout_key and entry.tool_timeout_seconds is not None:
        members[run.tool_timeout_key] = math.ceil(entry.tool_timeout_seconds)
    return members


def _info(client: str) -> ClientInfo:
    try:
        return CLIENT_INFO[client]
    except KeyError:
        raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}") from None


@dataclass(frozen=True)
class ServerEntry:
    """One MCP server entry: how the client launches the bridge.

    Attributes:
        command: absolute path of the executable.
        args: its arguments, one element each.
        env: environment variables for it, with their values.
        passed_env: names of variables the client passes from its own environment, so
            their values are not written (a ``--token-env`` token); how depends on the
            client (:attr:`ClientRun.env_passing`).
        startup_timeout_seconds: how long the client should wait for the server to start
            and answer ``initialize``; written where the client has a per-server key for it.
        tool_timeout_seconds: how long the client should wait for a tool call's reply;
            written where the client has a per-server key for it (``ClientRun.tool_timeout_key``).
    """

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    passed_env: tuple[str, ...] = ()
    startup_timeout_seconds: float | None = None
    tool_timeout_seconds: float | None = None


def config_location(
    client: str,
    *,
    platform: str | None = None,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
    cwd: Path | None = None,
) -> ConfigLocation:
    """:func:`config_path`, with why the client reads that file (``reason``, empty where the
    client's documented place is the only one) and the files beside it it ignores.

    Raises:
        ClientConfigError: an unknown client; on Windows, several packaged Claude Desktop
            folders that do not tell which is in use (the message lists them).
    """
    platform = sys.platform if platform is None else platform
    environ = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    if client == "claude-desktop" and platform == "win32":
        try:
            return claude_desktop_location(environ, home)
        except AmbiguousLocation as exc:
            raise ClientConfigError(str(exc)) from None
    return ConfigLocation(config_path(client, platform=platform, environ=environ, home=home, cwd=cwd, packaged=False), "")


def config_path(
    client: str,
    *,
    platform: str | None = None,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
    cwd: Path | None = None,
    packaged: bool = True,
) -> Path:
    """Where ``client`` keeps its MCP configuration on this OS (each client's docs).

    - Claude Desktop: ``~/Library/Application Support/Claude/claude_desktop_config.json``
      (macOS), ``~/.config/Claude/claude_desktop_config.json`` (Linux); on Windows the
      packaged (MSIX) app's own file,
      ``%LOCALAPPDATA%\\Packages\\Claude_<publisher id>\\LocalCache\\Roaming\\Claude\\claude_desktop_config.json``,
      when a ``Claude_*`` package folder exists (``bridge/clients/location.py``), else the
      unpackaged install's ``%APPDATA%\\Claude\\claude_desktop_config.json``
      (``packaged=False``: always that one).
    - Claude Code: the project's ``.mcp.json`` in the current folder; user scope
      ``~/.claude.json`` (every OS).
    - VS Code: the user profile's ``mcp.json`` (``…/Code/User/mcp.json``).
    - Zed: ``~/.config/zed/settings.json`` (macOS, Linux; ``$XDG_CONFIG_HOME/zed`` when set
      on Linux), ``%APPDATA%\\Zed\\settings.json`` (Windows).
    - Codex: ``$CODEX_HOME/config.toml``, ``~/.codex/config.toml`` by default.
    - Qwen Code: ``$QWEN_HOME/settings.json``, ``~/.qwen/settings.json`` by default.
    - Copilot CLI: ``$COPILOT_HOME/mcp-config.json``, ``~/.copilot/mcp-config.json`` by
      default (its workspace ``.mcp.json`` is Claude Code's format too: ``--path .mcp.json``).
    - Antigravity CLI: ``~/.gemini/config/mcp_config.json``; its workspace file
      ``.agents/mcp_config.json`` in the current folder (``antigravity-project``).
    - VS Code's agent: ``$COPILOT_HOME/mcp-config.json`` (``~/.copilot``, Copilot CLI's file);
      its workspace file ``.mcp.json`` in the current folder (``vscode-agent-project``).
    - Cursor ``~/.cursor/mcp.json``; Gemini CLI ``~/.gemini/settings.json``; Windsurf
      ``~/.codeium/windsurf/mcp_config.json``; LM Studio ``~/.lmstudio/mcp.json`` (every
      OS, ``~`` being ``%USERPROFILE%`` on Windows).
    """
    _info(client)
    platform = sys.platform if platform is None else platform
    if packaged and client == "claude-desktop" and platform == "win32":
        return config_location(client, platform=platform, environ=environ, home=home, cwd=cwd).path
    environ = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    cwd = Path.cwd() if cwd is None else cwd
    in_home = {
        "claude-code-user": (".claude.json",),
        "cursor": (".cursor", "mcp.json"),
        "gemini-cli": (".gemini", "settings.json"),
        "windsurf": (".codeium", "windsurf", "mcp_config.json"),
        "lm-studio": (".lmstudio", "mcp.json"),
    }
    if client in ("claude-code", "vscode-agent-project"):
        return cwd / ".mcp.json"
    if client == "antigravity-project":
        return cwd / ".agents" / "mcp_config.json"
    if client == "antigravity":
        return home / ".gemini" / "config" / "mcp_config.json"
    if client in in_home:
        return home.joinpath(*in_home[client])
    if client == "codex":
        return Path(environ.get("CODEX_HOME") or home / ".codex") / "config.toml"
    if client == "qwen-code":
        return Path(environ.get("QWEN_HOME") or home / ".qwen") / "settings.json"
    if client in ("copilot-cli", "vscode-agent"):
        return Path(environ.get("COPILOT_HOME") or home / ".copilot") / "mcp-config.json"
    if platform == "darwin":
        base = home / "Library" / "Application Support"
    elif platform == "win32":
        base = Path(environ.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        base = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    if client == "zed":
        if platform == "win32":
            return base / "Zed" / "settings.json"
        if platform == "darwin":
            return home / ".config" / "zed" / "settings.json"
        return base / "zed" / "settings.json"
    if client == "claude-desktop":
        return base / "Claude" / "claude_desktop_config.json"
    return base / "Code" / "User" / "mcp.json"  # vscode


def entry_object(client: str, entry: ServerEntry) -> dict[str, Any]:
    """The one entry's object, in the client's format (``type`` first where it has one)."""
    info = _info(client)
    entry = _with_passed_env(client, entry)
    obj: dict[str, Any] = {}
    if info.stdio_type:
        obj["type"] = info.stdio_type_name
    obj["command"] = entry.command
    obj["args"] = list(entry.args)
    obj.update(_run_members(client, entry))
    if entry.env:
        obj["env"] = dict(entry.env)
    for key, value in info.extra_members:
        obj[key] = list(value) if isinstance(value, tuple) else value
    return obj


def next_step(client: str, name: str, path: Path) -> str:
    """What the user does after ``config install`` wrote ``name`` into ``path``, in the
    client's own terms (approve the project server, trust the folder, restart)."""
    info = _info(client)
    return info.next_step.format(title=info.title, name=name, folder=path.parent)


def check_name(client: str, name: str) -> None:
    """Raises ClientConfigError when the client would not accept ``name``, or it is a Windows
    device name (``devicenames.is_device_name``), refused on every OS."""
    info = _info(client)
    if not name:
        raise ClientConfigError("the server's name is empty")
    if is_device_name(name):
        raise ClientConfigError(
            f"{name!r} is a Windows device name (CON, PRN, AUX, NUL, COM0-COM9, LPT0-LPT9, with or without "
            "an extension), which clients may use as a file name; give --name another name"
        )
    if info.name_pattern and re.fullmatch(info.name_pattern, name) is None:
        raise ClientConfigError(
            f"{info.title} accepts only letters, digits, '-' and '_' in a server's name, not {name!r}; "
            f"give --name {re.sub(r'[^A-Za-z0-9_-]+', '_', name)!r}"
        )


def entry_document(client: str, name: str, entry: ServerEntry) -> dict[str, Any]:
    """The whole document holding just this entry, as ``config print`` shows it."""
    check_name(client, name)
    return {_info(client).servers_key: {name: entry_object(client, entry)}}


def read_servers(document: Any, client: str | None = None) -> tuple[str, dict[str, dict[str, Any]]]:
    """Read the server entries of a client document.

    Without ``client``: accepts exactly one of ``mcpServers`` and ``servers``. With it: the
    client's own key, refusing its rival key. Infers each entry's transport (``stdio`` from
    ``command``, ``streamable-http`` from a URL key) when ``type`` is absent.

    Returns:
        ``(key, entries)`` with each entry's ``type`` filled in (a copy; the document is
        not changed).

    Raises:
        ClientConfigError: not an object, a rival key, an entry that is not an object, has
            both ``command`` and a URL, or neither (where the client needs one).
    """
    if not isinstance(document, dict):
        raise ClientConfigError("the file does not hold a JSON object")
    remote: tuple[str, ...]
    if client is None:
        keys = [key for key in ("mcpServers", "servers") if key in document]
        if len(keys) > 1:
            raise ClientConfigError('the file has both "mcpServers" and "servers"; keep the one your client reads')
        key, remote, bare = (keys[0] if keys else "mcpServers"), ("url",), False
    else:
        info = _info(client)
        key, remote, bare = info.servers_key, info.remote_keys, info.bare_entries
        if info.rival_key and info.rival_key in document:
            raise ClientConfigError(
                f'{info.title} reads "{key}", but this file has "{info.rival_key}": is it another client\'s file? '
                f"Give the right --client, or --path for another file"
            )
    servers = document.get(key, {})
    if not isinstance(servers, dict):
        raise ClientConfigError(f'"{key}" is not an object; make it one ({{}}) or remove it, then try again')
    entries: dict[str, dict[str, Any]] = {}
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise ClientConfigError(
                f"the entry {name!r} is not an object; correct or remove that entry, then try again"
            )
        url = next((k for k in remote if k in entry), None)
        if "command" in entry and url:
            raise ClientConfigError(f'the entry {name!r} has both "command" and "{url}"; keep one, then try again')
        if "command" not in entry and not url and not bare:
            raise ClientConfigError(
                f'the entry {name!r} has neither "command" nor "{remote[0]}"; correct or remove it, then try again'
            )
        inferred = "stdio" if "command" in entry else "streamable-http"
        entries[name] = {"type": entry.get("type", inferred), **entry}
    return key, entries


#: Seconds added to the app's launch bound for a client's start-up budget: the bridge's own
#: start (a frozen one unpacks first), a token, the connection and ``initialize`` once the
#: app listens.
STARTUP_MARGIN_SECONDS = 15.0


def startup_timeout_for(launch_timeout_seconds: float) -> float:
    """A client's start-up budget, in whole seconds, for a bridge that may launch the app
    within ``launch_timeout_seconds``: that plus :data:`STARTUP_MARGIN_SECONDS`."""
    return float(math.ceil(launch_timeout_seconds + STARTUP_MARGIN_SECONDS))


def tool_timeout_for(request_timeout_seconds: float, launch_timeout_seconds: float | None = None) -> float:
    """A client's tool-call budget, in whole seconds, for a bridge that answers every
    request within ``request_timeout_seconds`` (``--request-timeout``), after launching the
    app within ``launch_timeout_seconds`` when it may: their sum plus
    :data:`STARTUP_MARGIN_SECONDS`, so the bridge's own ``timeout`` reply, which names the
    cause, comes before the client gives up."""
    return float(math.ceil(request_timeout_seconds + (launch_timeout_seconds or 0.0) + STARTUP_MARGIN_SECONDS))


def state_environment(environ: Mapping[str, str] | None = None, platform: str = sys.platform) -> dict[str, str]:
    """The variables that move this user's state folder, as set here: the entry carries
    them, so the bridge a client starts finds the same discovery file and launch lock as
    the app and this shell, even when the client passes it almost no environment.

    platformdirs (``user_state_path``, where both live) reads ``XDG_STATE_HOME`` on Linux,
    the BSDs and macOS, and ``WIN_PD_OVERRIDE_LOCAL_APPDATA`` on Windows; everything else
    it derives from ``HOME`` or the Windows known folder, which every client passes (Codex
    passes only 11 variables, and not these: codex-rs/rmcp-client ``DEFAULT_ENV_VARS``).

    Returns:
        ``{name: value}`` for each of them set (not blank) in ``environ``; empty when the
        default folder is in use, which a stripped environment finds too.
    """
    environ = os.environ if environ is None else environ
    names = ("WIN_PD_OVERRIDE_LOCAL_APPDATA",) if platform == "win32" else ("XDG_STATE_HOME",)
    return {name: environ[name] for name in names if environ.get(name, "").strip()}


def client_entry(
    client: str,
    argv: Sequence[str],
    *,
    token_variables: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    platform: str = sys.platform,
    startup_timeout_seconds: float | None = None,
    tool_timeout_seconds: float | None = None,
    launch_timeout_fix: str = "lower --launch-timeout to {seconds:g} or less",
) -> tuple[ServerEntry, list[str]]:
    """The entry ``config install`` writes for ``argv`` in ``client``, and remarks to show.

    - ``env`` carries :func:`state_environment`, so the bridge finds the app's discovery
      file under any client.
    - Each of ``token_variables`` reaches the bridge the client's way
      (:attr:`ClientRun.env_passing`): named only, for a client that can pass it from its
      own environment (Claude Code, Codex, Gemini CLI); its value from ``environ``
      otherwise (the desktop apps, which are not started from the user's shell).
    - ``startup_timeout_seconds`` is kept for the client's per-server key; a client with a
      fixed, shorter budget gets a remark saying how to raise it.
    - ``tool_timeout_seconds`` is kept for the client's tool-call key (Codex).
    - ``launch_timeout_fix``: how the remark tells to shorten the launch bound, with
      ``{seconds}`` (an app's own ``--mcp-stdio`` entry has no ``--launch-timeout``).

    Raises:
        ClientConfigError: an unknown client.
    """
    info, run = _info(client), client_run(client)
    environ = os.environ if environ is None else environ
    env = state_environment(environ, platform)
    passed: list[str] = []
    remarks: list[str] = []
    for variable in token_variables:
        if run.env_passing == "literal":
            if environ.get(variable):
                env[variable] = environ[variable]
            else:
                remarks.append(
                    f"{variable} is not set here, so the entry has no value for it; "
                    "add it to the entry's env block, or the bridge will refuse to start"
                )
        else:
            passed.append(variable)
            here = "is not set here" if not environ.get(variable) else "goes into the entry by name only"
            remarks.append(
                f"{variable} {here}: {info.title} passes it to the bridge from its own environment, "
                f"so start {info.title} with {variable} set"
            )
    budget = run.startup_budget_seconds
    if startup_timeout_seconds is not None and run.startup_timeout_key is None and budget is not None:
        most = run.startup_budget_max_seconds
        needs = f"{info.title} gives a server {budget:g} s to start, and starting the app may take {startup_timeout_seconds:g} s"
        if startup_timeout_seconds > budget and most is not None and startup_timeout_seconds > most:
            remarks.append(
                f"{needs}, more than it can give ({most:g} s): "
                + launch_timeout_fix.format(seconds=most - STARTUP_MARGIN_SECONDS)
            )
        elif startup_timeout_seconds > budget and run.startup_budget_hint:
            hint = run.startup_budget_hint.format(milliseconds=math.ceil(startup_timeout_seconds * 1000))
            remarks.append(f"{needs}: {hint}, or " + launch_timeout_fix.format(seconds=budget - STARTUP_MARGIN_SECONDS))
    entry = ServerEntry(
        command=argv[0],
        args=tuple(argv[1:]),
        env=env,
        passed_env=tuple(passed),
        startup_timeout_seconds=startup_timeout_seconds,
        tool_timeout_seconds=tool_timeout_seconds,
    )
    return entry, remarks


def app_entry(
    command: str,
    args: Sequence[str] = ("--mcp-stdio",),
    *,
    launch_timeout_seconds: float = DEFAULT_LAUNCH_TIMEOUT_SECONDS,
    environ: Mapping[str, str] | None = None,
    platform: str = sys.platform,
) -> ServerEntry:
    """The entry for an app's own executable run with ``--mcp-stdio`` (a "Connect to
    Claude" button): :func:`state_environment` in ``env``, so the bridge half looks for the
    discovery file where this running app wrote it and never launches a second instance;
    and a start-up budget for its ``launch_timeout_seconds`` (the app's
    ``BridgeConfig.launch_timeout_seconds``) where the client has a key for it.

    A ``command`` inside a versioned install folder (``…\\app-1.2.3\\MyApp.exe``,
    ``…/Cellar/myapp/1.2.3/…``) is written as its stable path when one exists, as
    ``config install`` does (``bridge/clients/stablepath.py``): an update then leaves the
    entry working."""
    from .stablepath import stable_path

    command = stable_path(command, what="the app's command", environ=environ)[0]
    return ServerEntry(
        command=command,
        args=tuple(args),
        env=state_environment(environ, platform),
        startup_timeout_seconds=startup_timeout_for(launch_timeout_seconds),
        tool_timeout_seconds=tool_timeout_for(DEFAULT_REQUEST_TIMEOUT_SECONDS, launch_timeout_seconds),
    )
