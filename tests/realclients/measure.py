"""Measure how each pinned AI client ends its MCP servers (its "kill pattern").

    python tests/realclients/measure.py [RUNS]      # default 5 runs per client; Linux only
    python tests/realclients/measure.py budget      # how long each client waits for `initialize`

For each client: a fresh home, ``config install --command tests/realclients/siglog.py -- LOG``,
the user's one-time trust step, then the client's own check (``claude/gemini/qwen mcp list``,
Codex ``app-server`` ``mcpServerStatus/list``). ``siglog.py`` ignores every catchable signal,
so the log shows the client's whole escalation. Prints, per run, each event after the
client's first stop action (signal or stdin EOF), in ms, and the variables the server got.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from realclients.harness import CLIENTS, Home, check, config_install, fresh_home, trust  # noqa: E402

SIGLOG = Path(__file__).resolve().parent / "siglog.py"


def one_run(
    client: str, root: Path, *extra: str, setting: dict[str, object] | None = None, **env: str
) -> tuple[list[dict[str, object]], float, bool]:
    home = fresh_home(root, **env)
    log = root / "siglog.jsonl"
    config_install(home, client, "siglog", ["--command", str(SIGLOG), "--", str(log), *extra])
    if setting:
        _set_entry_members(home, client, setting)
    trust(home, client, "siglog")
    status = check(home, client, "siglog")
    time.sleep(5.0)  # Qwen Code escalates over 4 s after its check returns
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return events, status.seconds, status.connected


def describe(events: list[dict[str, object]]) -> tuple[str, int]:
    stops = [e for e in events if e["ev"] in ("signal", "stdin-eof", "group-member-signal", "dead")]
    if not stops:
        return "no stop seen (left running)", 0
    t0 = float(stops[0]["t"])  # type: ignore[arg-type]
    parts = []
    for event in stops:
        label = {
            "signal": str(event.get("sig")),
            "group-member-signal": f"group:{event.get('sig')}",
            "stdin-eof": "EOF",
            "dead": "gone(SIGKILL)",
        }[str(event["ev"])]
        parts.append(f"{label}@{(float(event['t']) - t0) * 1000:.1f}ms")  # type: ignore[arg-type]
    if not any(e["ev"] == "dead" for e in stops):
        parts.append("never killed (outlives the client)")
    start = next((e for e in events if e["ev"] == "start"), {})
    return ", ".join(parts), len(start.get("env", []))  # type: ignore[arg-type]


def _set_entry_members(home: Home, client: str, members: dict[str, object]) -> None:
    """Add per-server settings (e.g. a start-up timeout) to the installed entry."""
    if client == "codex":
        import tomlkit

        path = Path(home.env["HOME"]) / ".codex" / "config.toml"
        document = tomlkit.parse(path.read_text())
        document["mcp_servers"]["siglog"].update(members)
        path.write_text(tomlkit.dumps(document))
        return
    path = {
        "claude-code": home.project / ".mcp.json",
        "gemini-cli": Path(home.env["HOME"]) / ".gemini" / "settings.json",
        "qwen-code": Path(home.env["HOME"]) / ".qwen" / "settings.json",
    }[client]
    document = json.loads(path.read_text())
    document["mcpServers"]["siglog"].update(members)
    path.write_text(json.dumps(document, indent=2))


#: Per-server start-up settings tried in `budget` mode (what `config install` could write).
SETTINGS: dict[str, tuple[dict[str, object], dict[str, str]]] = {
    "claude-code": ({}, {"MCP_TIMEOUT": "20000"}),
    "gemini-cli": ({"timeout": 20000}, {}),
    "qwen-code": ({"timeout": 20000}, {}),
    "codex": ({"startup_timeout_sec": 20}, {}),
}


def budget() -> None:
    """How long each client waits for an `initialize` reply that never comes, by default and
    with its per-server setting (or environment variable) at 20 s."""
    for client in CLIENTS:
        for label, (setting, env) in (("default", ({}, {})), ("20 s setting", SETTINGS[client])):
            with tempfile.TemporaryDirectory(prefix=f"budget-{client}-") as folder:
                events, seconds, connected = one_run(
                    client, Path(folder), "--silent-initialize", setting=setting, **env
                )
                asked = next((float(e["t"]) for e in events if e.get("method") == "initialize"), None)  # type: ignore[arg-type]
                stop = next((float(e["t"]) for e in events if e["ev"] in ("signal", "stdin-eof", "dead")), None)  # type: ignore[arg-type]
                waited = f"{stop - asked:.2f} s" if asked is not None and stop is not None else "no stop seen"
                print(
                    f"{client:12} {label:13} {setting or env or ''}: gave up on initialize after {waited} "
                    f"(check {seconds:.1f} s, {'connected?!' if connected else 'not connected'})",
                    flush=True,
                )
                _end(events)


def _end(events: list[dict[str, object]]) -> None:
    """A server that outlives its client is ended here (its watcher ends its child)."""
    if sys.platform == "win32":  # (also tells mypy --platform what follows)
        raise NotImplementedError("POSIX signals")
    for event in events:
        if event["ev"] == "start":
            try:
                os.kill(int(str(event["pid"])), signal.SIGKILL)
            except OSError:
                pass


def main() -> None:
    if sys.argv[1:] == ["budget"]:
        budget()
        return
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for client in CLIENTS:
        for number in range(runs):
            with tempfile.TemporaryDirectory(prefix=f"measure-{client}-") as folder:
                events, seconds, connected = one_run(client, Path(folder))
                pattern, variables = describe(events)
                methods = [e.get("method") for e in events if e["ev"] == "recv"]
                print(
                    f"{client:12} run {number + 1}: {'connected' if connected else 'NOT connected'}, check {seconds:.2f} s; "
                    f"{variables} variables; received {methods}; stop: {pattern}",
                    flush=True,
                )
                if number == 0:
                    start = next((e for e in events if e["ev"] == "start"), {})
                    print(f"{'':12} variables: {' '.join(cast('list[str]', start.get('env', [])))}", flush=True)
                _end(events)


if __name__ == "__main__":
    main()
