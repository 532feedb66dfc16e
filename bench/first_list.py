"""Spawn to the first ``tools/list`` reply, with the app down and its catalog cached.

A benchmark, not a test: it prints a Markdown table and asserts nothing about speed.

    python bench/first_list.py [--rounds 20] [--onefile build/out/mcp-app-bridge]
        [--onedir build/out/mcp-app-bridge-onedir/mcp-app-bridge] [--out bench/results] [--extra LABEL=COMMAND]

What an AI client's start costs when the bridge answers it from the catalog (docs/behaviour.md,
"Lazy launch"): clients start servers far more often than users call tools, and Codex gives an
uncached server 1 s (openai/codex#31641). Setup, once: the example app
(``examples/app_server.py``) is started through a bridge's ``--launch`` in a private state
folder, lists its tools (the catalog is written), and is stopped; its discovery file is gone.

Contenders, interleaved round by round: the bare Python process (``bench/_bare.py``, the same
interpreter answering canned replies: the floor), the console script (``mcp-app-bridge``
beside this interpreter), and, when built, the one-file executable and the one-folder build
(``build/mcp-app-bridge.spec``). Each gets ``--discovery-file`` and ``--launch`` as a client
entry written by ``config install`` would give them. Per round and contender, two starts:

- a 2025-era client: spawn, ``initialize``, its reply (timed: "initialize"), then
  ``notifications/initialized`` and ``tools/list``, its reply (timed from the spawn:
  "first tools/list");
- a 2026-07-28 client: spawn, ``server/discover``, its reply (timed: "server/discover").

Then stdin closes; the CPU time of the start's whole life (``wait4``) is read, which moves
far less with the machine's load than the wall time. The app must never be started: the
launches are counted, and a run that launched it stops with an error.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def line(message: dict[str, object]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


INITIALIZE = line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
INITIALIZED = line({"jsonrpc": "2.0", "method": "notifications/initialized"})
TOOLS_LIST = line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
DISCOVER = line({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": META}})


def read_reply(proc: subprocess.Popen[bytes], request_id: int) -> dict[str, object]:
    assert proc.stdout is not None
    while True:
        raw = proc.stdout.readline()
        if not raw:
            raise SystemExit(f"{proc.args}: stdout closed before the reply to {request_id}")
        message = json.loads(raw)
        if message.get("id") == request_id:
            if "result" not in message:
                raise SystemExit(f"{proc.args}: no result for {request_id}: {message}")
            return message


def finish(proc: subprocess.Popen[bytes]) -> float:
    """Close stdin, reap (5 s, then SIGKILL); the CPU seconds of the start's whole life."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    deadline = time.monotonic() + 5
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            proc.stdout.close()
            return usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            proc.kill()
            deadline = float("inf")
        time.sleep(0.002)


def spawn_and_ask(command: list[str], env: dict[str, str], first: bytes) -> tuple[subprocess.Popen[bytes], float]:
    """Spawn ``command``, write ``first`` (a request with id 0) and read its reply; return the
    process and the spawn's ``perf_counter`` time."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None
    proc.stdin.write(first)
    proc.stdin.flush()
    read_reply(proc, 0)
    return proc, started


def legacy_start(command: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(initialize reply, first tools/list reply, CPU) in seconds, from the spawn."""
    proc, started = spawn_and_ask(command, env, INITIALIZE)
    initialized = time.perf_counter() - started
    assert proc.stdin is not None
    proc.stdin.write(INITIALIZED + TOOLS_LIST)
    proc.stdin.flush()
    read_reply(proc, 1)
    listed = time.perf_counter() - started
    return initialized, listed, finish(proc)


def modern_start(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(server/discover reply, CPU) in seconds, from the spawn."""
    proc, started = spawn_and_ask(command, env, DISCOVER)
    discovered = time.perf_counter() - started
    return discovered, finish(proc)


def launches(started_file: Path) -> list[int]:
    return [int(pid) for pid in started_file.read_text().split()] if started_file.exists() else []


def warm_catalog(bridge: list[str], args: list[str], env: dict[str, str], started_file: Path, discovery: Path) -> None:
    """Launch the app through a bridge, list its tools and ask a 2026-07-28 ``server/discover``
    (the catalog keeps both eras' answers), stop it."""
    legacy_start([*bridge, *args, "--launch-timeout", "60"], env)
    modern_start([*bridge, *args], env)  # the app is up: it answers, and the catalog keeps it
    for pid in launches(started_file):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 20
    while discovery.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if discovery.exists():
        raise SystemExit("the example app did not stop")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> int:
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--onefile", type=Path, default=ROOT / "build" / "out" / "mcp-app-bridge")
    parser.add_argument("--onedir", type=Path, default=ROOT / "build" / "out" / "mcp-app-bridge-onedir" / "mcp-app-bridge")
    parser.add_argument("--out", type=Path, default=None, help="also write first-list.md and first-list.json there")
    parser.add_argument("--extra", action="append", metavar="LABEL=COMMAND",
                        help="one more contender, started as COMMAND --discovery-file … --launch … (repeatable)")
    args = parser.parse_args()

    # Bytecode written as installing a wheel does (bench/cold_start.py says why).
    import compileall

    compileall.compile_dir(str(ROOT / "bridge"), quiet=1)
    script = Path(sys.executable).with_name("mcp-app-bridge")
    contenders: dict[str, list[str]] = {
        "bare Python process (floor)": [sys.executable, str(ROOT / "bench" / "_bare.py")],
        "console script (mcp-app-bridge)": [str(script)],
    }
    for label, path in (("one-file executable", args.onefile), ("one-folder build", args.onedir)):
        if path.exists():
            contenders[label] = [str(path)]
        else:
            print(f"(no {label} at {path}; build it to include it: docs/frozen.md)", file=sys.stderr)
    for extra in args.extra or []:
        label, _, command = extra.partition("=")
        contenders[label] = shlex.split(command)

    with tempfile.TemporaryDirectory(prefix="first-list-") as folder:
        home = Path(folder)
        (home / "app").mkdir(mode=0o700)
        discovery, started_file = home / "app" / "mcp-endpoint.json", home / "app" / "started"
        launch = shlex.join([sys.executable, str(ROOT / "examples" / "app_server.py"), "--port", "0",
                             "--discovery-file", str(discovery), "--secret-file", str(home / "app" / "secret"),
                             "--token-in-discovery", "--started-file", str(started_file)])
        bridge_args = ["--discovery-file", str(discovery), "--launch", launch]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "MCP_APP_BRIDGE_"))}
        env |= {"XDG_STATE_HOME": str(home / "state"), "TMPDIR": str(home)}
        try:
            warm_catalog([str(script)], bridge_args, env, started_file, discovery)
            warmed = launches(started_file)
            commands = {name: [*command, *bridge_args] for name, command in contenders.items()}
            for command in commands.values():  # the page cache, once, untimed
                legacy_start(command, env)
            samples: dict[str, dict[str, list[float]]] = {
                name: {k: [] for k in ("init", "list", "discover", "cpu")} for name in commands
            }
            for number in range(args.rounds):
                names = list(commands)
                for name in names[number % len(names):] + names[: number % len(names)]:
                    initialized, listed, cpu = legacy_start(commands[name], env)
                    discovered, _ = modern_start(commands[name], env)
                    for key, value in (("init", initialized), ("list", listed), ("discover", discovered), ("cpu", cpu)):
                        samples[name][key].append(value)
                    if launches(started_file) != warmed:
                        raise SystemExit(f"{name} launched the app: the catalog did not answer its start")
        finally:
            for pid in launches(started_file):  # never left running, whatever happened
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    floor = {key: statistics.median(values) for key, values in samples["bare Python process (floor)"].items()}
    script_list = statistics.median(samples["console script (mcp-app-bridge)"]["list"])
    rows = [
        "| contender | spawn to first `tools/list` (median) | p90 | × bare | × console script | `initialize` | "
        "`server/discover` | CPU per start | × bare |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, values in samples.items():
        listed = statistics.median(values["list"])
        cpu = statistics.median(values["cpu"])
        rows.append(
            f"| {name} | {listed * 1000:.0f} ms | {percentile(values['list'], 0.9) * 1000:.0f} ms | {listed / floor['list']:.2f}× "
            f"| {listed / script_list:.2f}× | {statistics.median(values['init']) * 1000:.0f} ms "
            f"| {statistics.median(values['discover']) * 1000:.0f} ms | {cpu * 1000:.0f} ms | {cpu / floor['cpu']:.2f}× |"
        )
    heading = (f"Spawn to the first `tools/list` reply, app down, catalog cached: {args.rounds} rounds interleaved "
               f"({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
               f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}):")
    table = heading + "\n\n" + "\n".join(rows) + "\n"
    print(table)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "first-list.md").write_text(table, encoding="utf-8")
        (args.out / "first-list.json").write_text(json.dumps(samples, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
