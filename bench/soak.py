"""A fault soak: mixed concurrent calls through one bridge while the app is restarted,
moved to a new port, crashed, has its token rotated, and is paused.

    python bench/soak.py --seconds 600            # the 10-minute run of the README
    python bench/soak.py --seconds 60 --workers 4 # a quick one

Loopback only, bounded in time (``--seconds`` plus at most ``--drain-seconds``), and it
stops everything it started. What it does:

- starts the example app (``examples/app_server.py``) with a discovery file and a secret
  file: the app requires a bearer token from its auth route, and every start issues a new
  one, so every restart also rotates the token;
- starts the bridge the way an AI client does (``python -m bridge``, or ``--bridge-cmd``),
  with ``--discovery-file``, ``--auth-url /auth/token --secret-file`` and ``--launch`` set
  to a command that does nothing: the app is restarted by this script, and the bridge
  waits (up to ``--launch-timeout``) for it to listen again;
- keeps ``--workers`` requests in flight: ``echo``, ``progress`` (SSE progress events) and
  ``large`` (1 MiB replies), each worker sending its next request when its reply came;
- every ``--fault-every`` seconds injects the next fault, in turn: ``restart`` (SIGTERM,
  same port), ``crash`` (SIGKILL, same port: the discovery file stays, with a dead pid),
  ``move`` (SIGTERM, a new port published in the discovery file), ``pause`` (SIGSTOP for
  2-4 s, then SIGCONT). Restarts alternate the app between SSE and JSON replies.

It reports requests, replies, duplicates, missing replies, lines that are not valid
JSON-RPC, the error replies by reason, the maximum latency, and the bridge's RSS and open
file descriptors after the warm-up and at the end (and RSS at 20 points in between: a leak
grows steadily, while the allocator's high-water mark for 1 MiB replies levels off). It exits 1 when a reply is duplicated
or missing, a line is invalid, or the bridge did not exit 0 on stdin EOF.

A request whose reply is an error may still be right: a call that was in flight when the
app was killed may have reached it, and is never sent twice (``stream_closed``,
``timeout``). Errors that a restart alone must never cause (the app's own -32600, or
``session_lost``) are counted apart as ``restart_errors``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "examples" / "app_server.py"
FAULTS = ("restart", "crash", "move", "pause")
#: Error replies that a restart alone must never cause (the request cannot have reached the app).
RESTART_ERRORS = ("session_lost", "app_unreachable", "app_launch_failed", "auth_rejected")
LARGE_BYTES = 1 << 20


def rss_and_fds(pid: int) -> tuple[float, int]:
    """(VmRSS in MiB, open fds) of one process, from /proc."""
    rss_kib = 0
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kib = int(line.split()[1])
    return rss_kib / 1024, len(os.listdir(f"/proc/{pid}/fd"))


def valid_jsonrpc(message: Any) -> bool:
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return False
    if "method" in message:
        return isinstance(message["method"], str)
    return "id" in message and (("result" in message) != ("error" in message))


class App:
    """The example app, restarted by the fault injector."""

    def __init__(self, workdir: Path, log) -> None:
        self.discovery = workdir / "app.json"
        self.secret = workdir / "secret"
        self.log = log
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, *, new_port: bool = False) -> None:
        self.starts += 1
        port = 0 if new_port or not self.port else self.port
        mode = ["--json-response"] if self.starts % 2 == 0 else []
        command = [sys.executable, str(APP), "--port", str(port), "--discovery-file", str(self.discovery),
                   "--secret-file", str(self.secret), "--log-level", "WARNING", *mode]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the app exited with status {self.process.returncode}")
            try:
                document = json.loads(self.discovery.read_text())
                if document.get("pid") == self.process.pid:
                    host_port = document["url"].split("//", 1)[1].split("/", 1)[0]
                    self.port = int(host_port.rsplit(":", 1)[1])
                    with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                        return
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.05)
        raise RuntimeError("the app did not start within 30 s")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.random = random.Random(args.seed)
        self.next_id = 1
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.sent_at: dict[int, float] = {}
        self.replies: Counter[int] = Counter()
        self.sent = 0
        self.invalid = 0
        self.unknown_ids = 0
        self.reasons: Counter[str] = Counter()
        self.max_latency = 0.0
        self.faults: list[tuple[float, str]] = []
        self.notifications = 0

    async def read_stdout(self, stdout: asyncio.StreamReader) -> None:
        while line := await stdout.readline():
            try:
                message = json.loads(line)
            except ValueError:
                self.invalid += 1
                continue
            if not valid_jsonrpc(message):
                self.invalid += 1
                continue
            if "method" in message:
                self.notifications += 1
                continue
            request_id = message["id"]
            if not isinstance(request_id, int) or request_id not in self.sent_at:
                self.unknown_ids += 1
                continue
            self.replies[request_id] += 1
            self.max_latency = max(self.max_latency, time.monotonic() - self.sent_at[request_id])
            future = self.waiting.pop(request_id, None)
            if future is not None and not future.done():
                future.set_result(message)

    async def call(self, stdin: asyncio.StreamWriter, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = self.next_id
        self.next_id += 1
        future = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = future
        self.sent_at[request_id] = time.monotonic()
        self.sent += 1
        stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n")
        await stdin.drain()
        return await future

    async def worker(self, stdin: asyncio.StreamWriter, stop_at: float) -> None:
        while time.monotonic() < stop_at:
            pick = self.random.random()
            if pick < 0.6:
                name, arguments = "echo", {"text": f"soak {self.next_id} ✓"}
            elif pick < 0.85:
                name, arguments = "progress", {"steps": 3, "delay_seconds": 0.02}
            else:
                name, arguments = "large", {"size_bytes": LARGE_BYTES}
            params: dict[str, Any] = {"name": name, "arguments": arguments}
            if name == "progress":
                params["_meta"] = {"progressToken": f"p{self.next_id}"}
            reply = await self.call(stdin, "tools/call", params)
            if "error" in reply:
                error = reply["error"]
                data = error.get("data") if isinstance(error.get("data"), dict) else {}
                reason = data.get("reason") if data.get("source") == "bridge" else f"app {error.get('code')}"
                self.reasons[str(reason)] += 1

    def inject(self, app: App, kind: str, started: float) -> None:
        self.faults.append((round(time.monotonic() - started, 1), kind))
        if kind == "pause" and app.process is not None:
            app.process.send_signal(signal.SIGSTOP)
            time.sleep(self.random.uniform(2, 4))
            app.process.send_signal(signal.SIGCONT)
            return
        app.stop(signal.SIGKILL if kind == "crash" else signal.SIGTERM)
        time.sleep(self.random.uniform(0.2, 1.5))  # downtime
        app.start(new_port=kind == "move")

    async def faults_loop(self, app: App, stop_at: float, started: float) -> None:
        turn = 0
        while True:
            await asyncio.sleep(self.args.fault_every)
            if time.monotonic() >= stop_at:
                return
            await asyncio.to_thread(self.inject, app, FAULTS[turn % len(FAULTS)], started)
            turn += 1


async def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="soak-"))
    os.chmod(workdir, 0o700)
    log = open(workdir / "app.log", "ab")
    app = App(workdir, log)
    app.start()
    bridge_cmd = shlex.split(args.bridge_cmd) if args.bridge_cmd else [sys.executable, "-m", "bridge"]
    noop = f"{shlex.quote(sys.executable)} -c pass"
    command = [*bridge_cmd, "--app-name", "SoakApp", "--discovery-file", str(app.discovery),
               "--auth-url", "/auth/token", "--secret-file", str(app.secret),
               "--launch", noop, "--launch-timeout", str(args.launch_timeout), "--log-level", "warning"]
    bridge_log = open(workdir / "bridge.log", "ab")
    soak = Soak(args)
    proc = await asyncio.create_subprocess_exec(
        *command, cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=bridge_log,
        limit=64 << 20, start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    reader = asyncio.create_task(soak.read_stdout(proc.stdout))
    status: int | None = None
    samples: list[float] = []
    try:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}}
        await asyncio.wait_for(soak.call(proc.stdin, "initialize", init), 30)
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        started = time.monotonic()
        stop_at = started + args.seconds
        # Warm up with every worker (the pool holds its connections then) before the first reading.
        warm_up = [soak.worker(proc.stdin, time.monotonic() + 2) for _ in range(args.workers)]
        await asyncio.wait_for(asyncio.gather(*warm_up), 60)
        rss_start, fds_start = rss_and_fds(proc.pid)
        samples: list[float] = []

        async def sample_rss() -> None:  # a leak grows steadily; fragmentation levels off
            while True:
                await asyncio.sleep(args.seconds / 20)
                samples.append(round(rss_and_fds(proc.pid)[0], 1))

        sampler = asyncio.create_task(sample_rss())
        faults = asyncio.create_task(soak.faults_loop(app, stop_at, started))
        workers = [asyncio.create_task(soak.worker(proc.stdin, stop_at)) for _ in range(args.workers)]
        done, pending = await asyncio.wait(workers, timeout=args.seconds + args.drain_seconds)
        faults.cancel()
        sampler.cancel()
        for task in pending:
            task.cancel()
        for task in done:
            task.result()
        rss_end, fds_end = rss_and_fds(proc.pid)
        proc.stdin.close()
        status = await asyncio.wait_for(proc.wait(), 15)
        await asyncio.wait_for(reader, 5)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        app.stop()
    missing = sorted(set(soak.sent_at) - set(soak.replies))
    duplicates = sum(count - 1 for count in soak.replies.values() if count > 1)
    restart_errors = sum(count for reason, count in soak.reasons.items() if reason in RESTART_ERRORS or reason.startswith("app "))
    report = {
        "seconds": args.seconds,
        "workers": args.workers,
        "faults": len(soak.faults),
        "fault_kinds": dict(Counter(kind for _, kind in soak.faults)),
        "app_starts": app.starts,
        "requests": soak.sent,
        "replies": sum(soak.replies.values()),
        "duplicates": duplicates,
        "missing": len(missing),
        "invalid_lines": soak.invalid,
        "unknown_ids": soak.unknown_ids,
        "notifications": soak.notifications,
        "error_replies": dict(soak.reasons),
        "restart_errors": restart_errors,
        "max_latency_seconds": round(soak.max_latency, 2),
        "rss_mib": [round(rss_start, 1), round(rss_end, 1)],
        "rss_samples_mib": samples,
        "open_fds": [fds_start, fds_end],
        "bridge_exit_status": status,
        "logs": str(workdir),
    }
    print(json.dumps(report, indent=2))
    failed = duplicates or missing or soak.invalid or soak.unknown_ids or status != 0
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600, help="how long calls are made (default 600)")
    parser.add_argument("--workers", type=int, default=8, help="requests kept in flight (default 8)")
    parser.add_argument("--fault-every", type=float, default=20, help="seconds between faults (default 20)")
    parser.add_argument("--drain-seconds", type=float, default=120, help="bound on waiting for the last replies")
    parser.add_argument("--launch-timeout", type=float, default=60, help="the bridge's --launch-timeout")
    parser.add_argument("--bridge-cmd", help="the bridge command (default: python -m bridge)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if sys.platform != "linux":
        parser.error("the soak reads /proc: Linux only")
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
