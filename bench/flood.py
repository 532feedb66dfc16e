"""Flood the bridge: N requests written at full speed while the app stalls, then recovers.

Loopback only, bounded in count (``--count``, at most 1,000,000) and time
(``--timeout-seconds``). A minimal HTTP/1.1 MCP app runs in a child process on
127.0.0.1 (this file with ``--serve``): it answers ``initialize``, accepts notifications
with 202, and holds every other request until ``--stall-seconds`` after the first one
arrived, then answers them all (and every later one at once). The bridge runs as a
subprocess (``--bridge-cmd``, ``{url}`` replaced by the app's URL), so a build from another
worktree can be measured beside this one::

    python bench/flood.py --count 100000 --stall-seconds 15 [--method ping]
    python bench/flood.py --bridge-cwd /path/to/main-checkout   # that checkout's bridge/

Reports, for the bridge process: peak RSS (``VmHWM``, MiB), CPU seconds (user + system)
and CPU per request; for the client: replies, duplicates (a second line for an id),
missing (no line within the time bound), error replies, invalid lines, and the wall
time from the first request written to the last reply read. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from typing import Any

MAX_COUNT = 1_000_000


# -- the stalling app (child process) ---------------------------------------------------------


async def _serve(stall_seconds: float) -> None:
    release_at: list[float] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                fields = {}
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    fields[name.strip().lower()] = value.strip()
                method = head.split(b" ", 1)[0]
                body = await reader.readexactly(int(fields.get("content-length", "0")))
                if method == b"GET":
                    writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                    continue
                if method != b"POST":
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                    continue
                message = json.loads(body)
                if "id" not in message or "method" not in message:
                    writer.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
                    continue
                extra = b""
                if message["method"] == "initialize":
                    result: Any = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "flood", "version": "0"}}
                    extra = b"Mcp-Session-Id: flood-1\r\n"
                else:
                    now = time.monotonic()
                    if not release_at:
                        release_at.append(now + stall_seconds)
                    if now < release_at[0]:
                        await asyncio.sleep(release_at[0] - now)
                    result = {} if message["method"] == "ping" else {"content": [{"type": "text", "text": "ok"}]}
                reply = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}, separators=(",", ":")).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + extra
                    + b"Content-Length: %d\r\n\r\n" % len(reply) + reply
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    print(f"LISTENING http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp", flush=True)
    async with server:
        await server.serve_forever()


# -- the client -------------------------------------------------------------------------------


def _proc_figures(pid: int) -> tuple[float, float]:
    """(peak RSS in MiB, CPU seconds) of a live process, from /proc."""
    peak_kib = 0
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                peak_kib = int(line.split()[1])
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return peak_kib / 1024, (int(fields[11]) + int(fields[12])) / ticks


def _request(request_id: int, method: str) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if method == "tools/call":
        message["params"] = {"name": "echo", "arguments": {"text": "flood"}}
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def run(args: argparse.Namespace) -> dict[str, Any]:
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--stall-seconds", str(args.stall_seconds)],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().decode().split()[1]
        command = shlex.split(args.bridge_cmd.replace("{url}", url).replace("{python}", sys.executable))
        bridge = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=args.bridge_cwd
        )
        try:
            return _flood(bridge, args)
        finally:
            if bridge.stdin is not None and not bridge.stdin.closed:
                try:
                    bridge.stdin.close()
                except OSError:
                    pass
            try:
                bridge.wait(timeout=10)
            except subprocess.TimeoutExpired:
                bridge.kill()
                bridge.wait()
    finally:
        server.terminate()
        server.wait(timeout=10)


def _flood(bridge: subprocess.Popen[bytes], args: argparse.Namespace) -> dict[str, Any]:
    assert bridge.stdin is not None and bridge.stdout is not None
    count = args.count
    seen = [0] * (count + 1)  # index 0: initialize
    state = {"replies": 0, "errors": 0, "invalid": 0, "last": 0.0}
    all_in = threading.Event()
    initialized = threading.Event()

    def read() -> None:
        assert bridge.stdout is not None
        for line in bridge.stdout:
            try:
                message = json.loads(line)
                request_id = message["id"]
                assert isinstance(request_id, int) and 0 <= request_id <= count
            except (ValueError, KeyError, TypeError, AssertionError):
                state["invalid"] += 1
                continue
            seen[request_id] += 1
            if request_id == 0:
                initialized.set()
                continue
            state["replies"] += 1
            state["errors"] += "error" in message
            state["last"] = time.monotonic()
            if state["replies"] >= count:
                all_in.set()
        initialized.set()
        all_in.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "0"}}}
    bridge.stdin.write(json.dumps(init).encode() + b"\n")
    bridge.stdin.flush()
    if not initialized.wait(30):
        raise SystemExit("the bridge did not answer initialize within 30 s")
    bridge.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    deadline = time.monotonic() + args.timeout_seconds
    started = time.monotonic()
    _, cpu_before = _proc_figures(bridge.pid)

    def write() -> None:
        assert bridge.stdin is not None
        try:
            for first in range(1, count + 1, 1000):
                bridge.stdin.write(b"".join(_request(i, args.method) for i in range(first, min(first + 1000, count + 1))))
            bridge.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    all_in.wait(max(0.0, deadline - time.monotonic()))
    peak_mib, cpu_after = _proc_figures(bridge.pid)
    wall = (state["last"] or time.monotonic()) - started
    time.sleep(0.2)  # a duplicate would come right behind
    duplicates = sum(max(0, n - 1) for n in seen[1:])
    missing = sum(1 for n in seen[1:] if n == 0)
    cpu = cpu_after - cpu_before
    return {
        "method": args.method,
        "count": count,
        "stall_seconds": args.stall_seconds,
        "replies": state["replies"],
        "duplicates": duplicates,
        "missing": missing,
        "error_replies": state["errors"],
        "invalid_lines": state["invalid"],
        "wall_seconds": round(wall, 2),
        "bridge_cpu_seconds": round(cpu, 2),
        "cpu_us_per_request": round(cpu / count * 1e6, 1),
        "peak_rss_mib": round(peak_mib, 1),
        "timed_out": not all_in.is_set() or missing > 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100_000, help="requests to write (at most 1,000,000)")
    parser.add_argument("--method", choices=["tools/call", "ping"], default="tools/call")
    parser.add_argument("--stall-seconds", type=float, default=15.0, help="how long the app holds every request at first")
    parser.add_argument("--timeout-seconds", type=float, default=300.0, help="bound on the whole flood")
    parser.add_argument(
        "--bridge-cmd", default="{python} -m bridge --url {url}",
        help="the bridge's command line; {url} is the app's URL, {python} this interpreter",
    )
    parser.add_argument(
        "--bridge-cwd", default=None,
        help="the bridge's working directory (python -m puts it first on sys.path: a checkout of another build)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.stall_seconds))
        return
    if not 1 <= args.count <= MAX_COUNT:
        parser.error(f"--count must be between 1 and {MAX_COUNT}")
    figures = run(args)
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:>20}: {value}")


if __name__ == "__main__":
    main()
