"""Cold start to the first reply: spawn the bridge, send ``initialize`` at once, time the reply.

A benchmark, not a test: it prints a Markdown table and asserts nothing about speed.

    python bench/cold_start.py [--rounds 20] [--exe build/out/mcp-app-bridge]

Contenders, interleaved round by round in one run against one example app on 127.0.0.1:
a bare Python process that answers on stdio (``bench/_bare.py``, the floor), ``python -m
bridge`` (this interpreter) and, when it exists, the frozen executable. Each
round measures wall time from ``Popen`` to the complete ``initialize`` reply line on
stdout, then the resident memory of the bridge's whole process tree (the one-file build
is two processes) while idle after the handshake, then closes stdin and waits for exit,
and reads the CPU time the tree used over its whole life (start, handshake, 0.3 s idle,
exit; ``wait4``): on a loaded machine that moves far less than the wall time.
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INIT = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
        }
    ).encode()
    + b"\n"
)


def start_app(mode: str) -> tuple[subprocess.Popen[bytes], str]:
    app = subprocess.Popen(
        # bench/_server.py: the example app's server with TCP_NODELAY on (see its docstring).
        [sys.executable, str(ROOT / "bench" / "_server.py")] + (["--sse"] if mode == "sse" else []),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert app.stdout is not None
    line = app.stdout.readline().decode().strip()
    if not line.startswith("LISTENING "):
        app.kill()
        raise SystemExit(f"the example app did not start: {line!r}")
    return app, line.split(" ", 1)[1]


def tree_rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` and its children (Linux /proc), in KiB; 0 where unavailable."""
    total = 0
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(child) for child in children.read_text().split()]
    for each in pids:
        try:
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def wait_cpu_seconds(proc: subprocess.Popen[bytes], timeout: float) -> float:
    """Reap ``proc`` (at most ``timeout`` seconds, then SIGKILL) and return the CPU time
    (user + system) it and every descendant it reaped used over its whole life, from
    ``wait4(2)``: unlike wall time, this hardly moves with the machine's load."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            proc.kill()
            deadline = float("inf")
        time.sleep(0.005)


def one_round(command: list[str], url: str) -> tuple[float, int, float]:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*command, "--url", url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INIT)
    proc.stdin.flush()
    reply = proc.stdout.readline()
    elapsed = time.perf_counter() - started
    if b'"result"' not in reply:
        proc.kill()
        raise SystemExit(f"{command}: no initialize result: {reply[:200]!r}")
    time.sleep(0.3)  # idle after the handshake
    rss = tree_rss_kib(proc.pid)
    proc.stdin.close()
    cpu = wait_cpu_seconds(proc, 10)
    proc.stdout.close()
    return elapsed, rss, cpu


def main() -> int:
    # SIGTERM ends the run through the finally block: the server is stopped, not left behind.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--exe", type=Path, default=ROOT / "build" / "out" / "mcp-app-bridge")
    parser.add_argument("--mode", choices=("sse", "json"), default="sse", help="the app answers with SSE (default) or JSON")
    parser.add_argument("--extra", action="append", metavar="LABEL=COMMAND",
                        help="one more contender, started as COMMAND --url URL (repeatable)")
    args = parser.parse_args()

    # The floor: the same interpreter, reading one line and answering it (bench/_bare.py).
    contenders = {
        "bare Python process (floor)": [sys.executable, str(ROOT / "bench" / "_bare.py")],
        "python -m bridge": [sys.executable, "-m", "bridge"],
    }
    if args.exe.exists():
        contenders["frozen one-file executable"] = [str(args.exe)]
    else:
        print(f"(no frozen executable at {args.exe}; build it to include it)", file=sys.stderr)
    for extra in args.extra or []:
        label, _, command = extra.partition("=")
        contenders[label] = shlex.split(command)

    # Bytecode written as installing a wheel does: with PYTHONDONTWRITEBYTECODE set (or a
    # stale __pycache__) `python -m bridge` would compile its modules at every start.
    import compileall

    compileall.compile_dir(str(ROOT / "bridge"), quiet=1)
    app, url = start_app(args.mode)
    try:
        for command in contenders.values():  # warm the page cache once, untimed
            one_round(command, url)
        times: dict[str, list[float]] = {name: [] for name in contenders}
        rss: dict[str, list[int]] = {name: [] for name in contenders}
        cpu: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(args.rounds):
            for name, command in contenders.items():
                elapsed, kib, seconds = one_round(command, url)
                times[name].append(elapsed)
                rss[name].append(kib)
                cpu[name].append(seconds)
    finally:
        app.terminate()
        app.wait(timeout=10)

    print(f"Cold start to the `initialize` reply ({args.mode.upper()} replies), {args.rounds} rounds interleaved "
          f"({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}):\n")
    print("| contender | median | p90 | × the bare process | CPU of the whole run (median) | × the bare process "
          "| idle RSS of the process tree (median) |")
    print("|---|---|---|---|---|---|---|")
    floor = statistics.median(next(iter(times.values())))
    cpu_floor = statistics.median(next(iter(cpu.values())))
    for name in contenders:
        ordered = sorted(times[name])
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        cpu_median = statistics.median(cpu[name])
        print(f"| {name} | {statistics.median(ordered) * 1000:.0f} ms | {p90 * 1000:.0f} ms "
              f"| {statistics.median(ordered) / floor:.2f}× | {cpu_median * 1000:.0f} ms | {cpu_median / cpu_floor:.2f}× "
              f"| {statistics.median(rss[name]) / 1024:.1f} MiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
