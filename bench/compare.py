"""Side-by-side benchmark: the bridge against a direct HTTP client, its frozen build and peer bridges.

    python bench/compare.py [--quick] [--mode json|sse] [--out bench/results]

A benchmark, not a test: not part of the pytest run, asserts nothing about speed, talks to
127.0.0.1 only and stops by itself (every phase has a deadline, the whole run a budget).

It starts the example MCP server (``examples/app_server.py``, the official SDK under
uvicorn, JSON or SSE responses) once, then runs every contender through the same rounds,
interleaved (round r runs all contenders, in an order rotated by r):

- cold start: spawn → ``initialize`` reply (several per round), then idle RSS of the tree;
- warm-up: 100 sequential ``echo`` calls and 200 with 32 in flight (not measured);
- sequential: 1,000 ``tools/call`` echo (``--seq-calls``), one at a time: p50, p99, and the CPU time
  (utime + stime) of the contender's process tree over the phase, per 1,000 calls;
- pipelined: 2,000 echo calls with 32 in flight: calls per second;
- large: a 1 MiB reply (``large``), an 8 MiB request (``size``), a 16 MiB reply;
- peak RSS of the tree (sum of VmHWM), then EOF on stdin and the exit.

Every reply is checked (id, and the echoed text or the size). Stdio contenders get
pre-serialized newline-delimited JSON-RPC lines over raw pipes; the direct contender, the
floor, is a hand-written keep-alive HTTP/1.1 client in this process (``_direct.py``).
Figures are medians over rounds with the ratio to direct; the results go to
``<out>/latest.md``, ``latest.json`` and a chart ``latest.png`` (``latest-sse.*`` for SSE).
See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import selectors
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import _proc  # noqa: E402
from _direct import DirectClient  # noqa: E402
from _peers import PEERS, default_cache, prepare  # noqa: E402

MiB = 1 << 20
PROTOCOL_VERSION = "2025-06-18"
IN_FLIGHT = 32
WARMUP_SEQ, WARMUP_PIPE = 100, 200
SEQ_CALLS, PIPE_CALLS = 1000, 2000
LARGE = (("reply_1m", "large", 1 * MiB), ("request_8m", "size", 8 * MiB), ("reply_16m", "large", 16 * MiB))
IDLE_SETTLE = 0.5  # seconds after the handshake before idle RSS is read
DEADLINES = {"start": 30.0, "seq": 120.0, "pipe": 120.0, "large": 60.0, "stop": 5.0}


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


INIT = line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
INITIALIZED = line({"jsonrpc": "2.0", "method": "notifications/initialized"})


def call_line(ident: int, tool: str, arguments: dict[str, Any]) -> bytes:
    return line({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})


def echo_batch(first_id: int, count: int) -> tuple[list[bytes], dict[int, str]]:
    texts = {first_id + i: f"bench echo {first_id + i:06d} \u2713 caf\u00e9" for i in range(count)}
    return [call_line(ident, "echo", {"text": text}) for ident, text in texts.items()], texts


def check(reply: bytes, expected: dict[int, Any]) -> str | None:
    """None when ``reply`` answers one of ``expected`` (id → text, or ("len", n) / ("size", n))
    correctly; else what is wrong. Pops the id, so duplicates are caught."""
    try:
        message = json.loads(reply)
    except ValueError:
        return f"not JSON: {reply[:120]!r}"
    ident = message.get("id")
    if ident not in expected:
        return f"unexpected id {ident!r}: {reply[:160]!r}"
    want = expected.pop(ident)
    if "error" in message:
        return f"error reply: {str(message['error'].get('message'))[:160]}"
    result = message.get("result") or {}
    try:
        text = result["content"][0]["text"]
    except (KeyError, IndexError, TypeError):
        return f"no text content: {reply[:160]!r}"
    if result.get("isError"):
        return f"tool error: {text[:160]}"
    if isinstance(want, tuple):
        kind, n = want
        got = len(text) if kind == "len" else int(text)
        return None if got == n else f"{kind} {got} != {n}"
    return None if text == want else f"text {text[:60]!r} != {want[:60]!r}"


def check_all(replies: list[bytes], expected: dict[int, Any]) -> None:
    for reply in replies:
        problem = check(reply, expected)
        if problem:
            raise RuntimeError(problem)
    if expected:
        raise RuntimeError(f"{len(expected)} replies missing")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# -- contenders -------------------------------------------------------------------------------


class Watchdog:
    """Kills the armed contender's process group when its deadline passes, so a blocking
    pipe read in the timed loops costs nothing and still cannot hang the run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._target: tuple[float, int] | None = None
        self.fired = False
        threading.Thread(target=self._watch, daemon=True).start()

    def arm(self, seconds: float, pgid: int) -> None:
        with self._lock:
            self._target, self.fired = (time.monotonic() + seconds, pgid), False

    def disarm(self) -> None:
        with self._lock:
            self._target = None

    def _watch(self) -> None:
        while True:
            time.sleep(0.2)
            with self._lock:
                if self._target and time.monotonic() > self._target[0]:
                    self.fired = True
                    kill_group(self._target[1])
                    self._target = None


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass


WATCHDOG: Watchdog | None = None
#: The server's Unix-socket endpoint (``http+unix://…``), once it listens; "" where there is none.
UNIX_URL = ""


class Direct:
    """The floor: raw HTTP/1.1 in this process (no child process, so no RSS or tree CPU)."""

    in_process = True

    def __init__(self) -> None:
        self.name, self.version = "direct", "raw keep-alive HTTP/1.1 client, in process"
        self.client: DirectClient | None = None

    def start(self, url: str) -> float:
        self.client = DirectClient(url, timeout=DEADLINES["large"])
        started = time.perf_counter()
        reply = self.client.initialize(INIT, INITIALIZED)
        elapsed = time.perf_counter() - started
        if b'"result"' not in reply:
            raise RuntimeError(f"initialize: {reply[:200]!r}")
        return elapsed

    def notify(self, data: bytes) -> None:
        pass  # initialized was sent by initialize()

    def arm(self, phase: str) -> None:
        pass

    def call(self, data: bytes) -> bytes:
        assert self.client is not None
        return self.client.call(data)

    def pipelined(self, lines: list[bytes]) -> list[bytes]:
        assert self.client is not None
        return self.client.pipelined(lines, IN_FLIGHT, time.perf_counter() + DEADLINES["pipe"])

    def cpu(self) -> float:
        return time.process_time()

    def rss(self) -> int | None:
        return None

    def peak_rss(self) -> int | None:
        return None

    def stop(self) -> float | None:
        if self.client is not None:
            self.client.close()
            self.client = None
        return None


class Stdio:
    """A bridge process driven over raw pipes with pre-serialized JSON-RPC lines."""

    in_process = False

    def __init__(self, name: str, version: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name, self.version, self.argv = name, version, argv
        self.env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}  # loopback: no proxies
        self.env.update(env, NO_PROXY="127.0.0.1,localhost,::1", PYTHONDONTWRITEBYTECODE="1")
        self.log_path = log_dir / (name.replace(" ", "_").replace("/", "_") + ".stderr")
        self.proc: subprocess.Popen[bytes] | None = None
        self.buf = bytearray()

    def start(self, url: str) -> float:
        argv = [part.replace("{url}", url).replace("{unix_url}", UNIX_URL) for part in self.argv]
        assert WATCHDOG is not None
        with open(self.log_path, "ab") as log:
            started = time.perf_counter()
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         bufsize=0, cwd=ROOT, env=self.env, start_new_session=True)
        self.wfd, self.rfd = self.proc.stdin.fileno(), self.proc.stdout.fileno()  # type: ignore[union-attr]
        self.buf = bytearray()
        self.arm("start")
        self._write(INIT)
        reply = self._readline()
        elapsed = time.perf_counter() - started
        if b'"result"' not in reply:
            raise RuntimeError(f"initialize: {reply[:200]!r}")
        return elapsed

    def arm(self, phase: str) -> None:
        assert WATCHDOG is not None and self.proc is not None
        WATCHDOG.arm(DEADLINES[phase], self.proc.pid)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.wfd, view):]

    def _readline(self) -> bytes:
        buf, scan = self.buf, 0
        while True:
            end = buf.find(b"\n", scan)
            if end >= 0:
                reply = bytes(buf[:end])
                del buf[: end + 1]
                return reply
            scan = len(buf)
            chunk = os.read(self.rfd, 4 * MiB)
            if not chunk:
                raise RuntimeError("timed out (killed)" if WATCHDOG and WATCHDOG.fired else "stdout closed")
            buf += chunk

    def notify(self, data: bytes) -> None:
        self._write(data)

    def call(self, data: bytes) -> bytes:
        self._write(data)
        return self._readline()

    def pipelined(self, lines: list[bytes]) -> list[bytes]:
        replies: list[bytes] = []
        following, total, in_flight = 0, len(lines), 0
        out = b""
        selector = selectors.DefaultSelector()
        os.set_blocking(self.wfd, False)
        try:
            selector.register(self.rfd, selectors.EVENT_READ, "read")
            waiting_to_write = False
            while len(replies) < total:
                if in_flight < IN_FLIGHT and following < total:
                    take = min(IN_FLIGHT - in_flight, total - following)
                    out += b"".join(lines[following : following + take])
                    following += take
                    in_flight += take
                if out:
                    try:
                        out = out[os.write(self.wfd, out):]
                    except BlockingIOError:
                        pass
                if bool(out) != waiting_to_write:  # wait for room in the pipe only while bytes wait
                    if out:
                        selector.register(self.wfd, selectors.EVENT_WRITE, "write")
                    else:
                        selector.unregister(self.wfd)
                    waiting_to_write = bool(out)
                events = selector.select(timeout=DEADLINES["pipe"])
                if not events:
                    raise RuntimeError("pipelined phase timed out")
                if any(key.data == "read" for key, _ in events):
                    chunk = os.read(self.rfd, 4 * MiB)
                    if not chunk:
                        raise RuntimeError("timed out (killed)" if WATCHDOG and WATCHDOG.fired else "stdout closed")
                    buf = self.buf
                    buf += chunk
                    start = 0
                    while True:
                        end = buf.find(b"\n", start)
                        if end < 0:
                            break
                        replies.append(bytes(buf[start:end]))
                        start = end + 1
                        in_flight -= 1
                    del buf[:start]
        finally:
            selector.close()
            os.set_blocking(self.wfd, True)
        return replies

    def cpu(self) -> float:
        assert self.proc is not None
        return _proc.cpu_seconds(self.proc.pid)

    def rss(self) -> int | None:
        assert self.proc is not None
        return _proc.rss_kib(self.proc.pid)

    def peak_rss(self) -> int | None:
        assert self.proc is not None
        return _proc.peak_rss_kib(self.proc.pid)

    def stop(self) -> float | None:
        """EOF on stdin, wait for the exit; the seconds it took, None if it had to be killed."""
        if self.proc is None:
            return None
        if WATCHDOG is not None:
            WATCHDOG.disarm()
        proc, self.proc = self.proc, None
        exited: float | None = None
        started = time.perf_counter()
        try:
            proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            proc.wait(timeout=DEADLINES["stop"])
            exited = time.perf_counter() - started
        except subprocess.TimeoutExpired:
            kill_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                kill_group(proc.pid)
                proc.wait()
        kill_group(proc.pid)  # anything of its tree left behind
        proc.stdout.close()  # type: ignore[union-attr]
        return exited

    def stderr_tail(self) -> str:
        try:
            return self.log_path.read_bytes()[-300:].decode("utf-8", "replace").strip().replace("\n", " / ")
        except OSError:
            return ""


# -- one round of one contender ---------------------------------------------------------------


def run_round(contender: Direct | Stdio, url: str, cold_starts: int, ids: list[int]) -> dict[str, Any]:
    """All phases for one contender; figures in seconds, KiB, calls/s. Phases after a
    failure are skipped (the contender is stopped); a refused large message is noted."""
    result: dict[str, Any] = {"cold_s": [], "exit_s": [], "notes": {}}

    def next_ids(count: int) -> int:
        first = ids[0]
        ids[0] += count
        return first

    phase = "start"
    try:
        for _ in range(cold_starts - 1):  # extra cold starts: spawn, initialize, EOF
            result["cold_s"].append(contender.start(url))
            result["exit_s"].append(contender.stop())
        result["cold_s"].append(contender.start(url))
        contender.notify(INITIALIZED)
        time.sleep(IDLE_SETTLE)
        result["idle_rss_kib"] = contender.rss()

        phase = "warm-up"
        contender.arm("seq")
        lines, expected = echo_batch(next_ids(WARMUP_SEQ), WARMUP_SEQ)
        check_all([contender.call(each) for each in lines], expected)
        contender.arm("pipe")
        lines, expected = echo_batch(next_ids(WARMUP_PIPE), WARMUP_PIPE)
        check_all(contender.pipelined(lines), expected)

        phase = "sequential"
        lines, expected = echo_batch(next_ids(SEQ_CALLS), SEQ_CALLS)
        latencies, replies = [], []
        contender.arm("seq")
        cpu_before = contender.cpu()
        clock = time.perf_counter
        for each in lines:
            started = clock()
            replies.append(contender.call(each))
            latencies.append(clock() - started)
        cpu_after = contender.cpu()
        check_all(replies, expected)
        result["seq_p50_s"] = statistics.median(latencies)
        result["seq_p99_s"] = percentile(latencies, 0.99)
        result["cpu_per_1k_s"] = (cpu_after - cpu_before) * 1000 / SEQ_CALLS

        phase = "pipelined"
        lines, expected = echo_batch(next_ids(PIPE_CALLS), PIPE_CALLS)
        contender.arm("pipe")
        started = time.perf_counter()
        replies = contender.pipelined(lines)
        elapsed = time.perf_counter() - started
        check_all(replies, expected)
        result["pipe_calls_per_s"] = PIPE_CALLS / elapsed

        for key, tool, size in LARGE:
            phase = key
            ident = next_ids(1)
            if tool == "large":
                data, want = call_line(ident, "large", {"size_bytes": size}), ("len", size)
            else:
                data, want = call_line(ident, "size", {"text": "x" * size}), ("size", size)
            contender.arm("large")
            started = time.perf_counter()
            reply = contender.call(data)
            elapsed = time.perf_counter() - started
            problem = check(reply, {ident: want})
            if problem:
                result["notes"][key] = problem
            else:
                result[key + "_s"] = elapsed
        result["peak_rss_kib"] = contender.peak_rss()
    except Exception as exc:  # the contender failed this round: say where and why, go on
        reason = f"{phase}: {type(exc).__name__}: {exc}"
        if isinstance(contender, Stdio) and contender.stderr_tail():
            reason += f" [stderr: {contender.stderr_tail()}]"
        result["error"] = reason
    finally:
        result["exit_s"].append(contender.stop())
    return result


# -- the run ----------------------------------------------------------------------------------


def start_server(mode: str) -> tuple[subprocess.Popen[bytes], str]:
    global UNIX_URL
    argv = [sys.executable, str(HERE / "_server.py")] + (["--sse"] if mode == "sse" else [])
    if hasattr(socket, "AF_UNIX") and os.name == "posix":
        argv += ["--unix", str(Path(tempfile.mkdtemp(prefix="mcp-bench-")) / "app.sock")]  # mkdtemp: 0700
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT, start_new_session=True)
    assert server.stdout is not None
    first = server.stdout.readline().decode().strip()
    if not first.startswith("LISTENING "):
        kill_group(server.pid)
        raise SystemExit(f"the example MCP server did not start: {first!r}")
    if "--unix" in argv:
        UNIX_URL = server.stdout.readline().decode().strip().split(" ", 1)[1]
    return server, first.split(" ", 1)[1]


def machine_info() -> dict[str, Any]:
    def command(*argv: str) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=ROOT).stdout.strip()
        except OSError:
            return ""

    model = ""
    try:
        model = next(row.split(":", 1)[1].strip() for row in open("/proc/cpuinfo") if row.startswith("model name"))
    except (OSError, StopIteration):
        pass
    from importlib import metadata

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    commit = command("git", "rev-parse", "--short", "HEAD")
    dirty = bool(command("git", "status", "--porcelain", "--", "bridge"))
    return {
        "cpu": model or platform.machine(),
        "cores": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "node": command("node", "--version") or "not found",
        "mcp_sdk": version("mcp"),
        "httpx": version("httpx"),
        "uvicorn": version("uvicorn"),
        "bridge": f"{version('mcp-app-bridge')} @ {commit}{' + uncommitted changes in bridge/' if dirty else ''}",
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def compile_bridge() -> None:
    """Write bridge/'s bytecode, as installing a wheel does: with PYTHONDONTWRITEBYTECODE set
    (or a stale __pycache__), ``python -m bridge`` would compile its ~60 modules at every
    start, measured here at ~100 ms of a ~150 ms cold start."""
    import compileall

    compileall.compile_dir(str(ROOT / "bridge"), quiet=1)


def build_contenders(args: argparse.Namespace, log_dir: Path) -> tuple[list[Direct | Stdio], dict[str, str]]:
    contenders: list[Direct | Stdio] = [Direct()]
    unavailable: dict[str, str] = {}
    info = machine_info()
    # The floor of any stdio process: the same interpreter answering on stdio, no network.
    contenders.append(Stdio("bare Python process", "bench/_bare.py: reads a line, answers it",
                            [sys.executable, str(HERE / "_bare.py"), "--url", "{url}"], {}, log_dir))
    contenders.append(Stdio("python -m bridge", f"mcp-app-bridge {info['bridge']}",
                            [sys.executable, "-m", "bridge", "--url", "{url}"], {}, log_dir))
    if hasattr(socket, "AF_UNIX") and os.name == "posix":
        # The same bridge and server, over the server's Unix domain socket (peer checked by the OS).
        contenders.append(Stdio("python -m bridge, Unix socket", f"mcp-app-bridge {info['bridge']}, http+unix://",
                                [sys.executable, "-m", "bridge", "--url", "{unix_url}"], {}, log_dir))
    exe = args.exe
    if exe.exists():
        built = time.strftime("%Y-%m-%d %H:%M", time.localtime(exe.stat().st_mtime))
        contenders.append(Stdio("frozen mcp-app-bridge", f"PyInstaller one-file, built {built}",
                                [str(exe), "--url", "{url}"], {}, log_dir))
    else:
        unavailable["frozen mcp-app-bridge"] = f"no executable at {exe} (build it: see README, 'Frozen')"
    for extra in args.extra or []:
        label, _, command = extra.partition("=")
        if not label or not command:
            raise SystemExit(f"--extra wants LABEL=COMMAND, got {extra!r}")
        contenders.append(Stdio(label, f"extra: {command}", [*shlex.split(command), "--url", "{url}"], {}, log_dir))
    for peer in PEERS:
        if args.no_peers or (args.only and peer.key not in args.only):
            continue
        argv, version_or_reason, env = prepare(peer, args.peers_dir, install=not args.no_install)
        if argv is None:
            unavailable[peer.label()] = version_or_reason
        else:
            contenders.append(Stdio(peer.key, f"{peer.package} {version_or_reason} ({peer.language})", argv, env, log_dir))
    if args.only:
        contenders = [c for c in contenders if c.name == "direct" or c.name in args.only
                      or (c.name == "python -m bridge" and "bridge" in args.only)
                      or (c.name == "python -m bridge, Unix socket" and ("unix" in args.only or "bridge" in args.only))
                      or (c.name == "bare Python process" and "bare" in args.only)
                      or (c.name.startswith("frozen") and "frozen" in args.only)
                      or any(c.name == extra.partition("=")[0] for extra in args.extra or [])]
    return contenders, unavailable


def summarize(rounds: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Median over rounds of each figure (cold start: over all its samples)."""
    keys = ["seq_p50_s", "seq_p99_s", "pipe_calls_per_s", "cpu_per_1k_s", "idle_rss_kib", "peak_rss_kib"]
    keys += [key + "_s" for key, _, _ in LARGE]
    summary: dict[str, dict[str, Any]] = {}
    for name, results in rounds.items():
        figures: dict[str, Any] = {}
        cold = [s for r in results for s in r["cold_s"]]
        figures["cold_s"] = statistics.median(cold) if cold else None
        exits = [s for r in results for s in r.get("exit_s", [])]
        clean = [s for s in exits if s is not None]
        figures["exit_s"] = statistics.median(clean) if clean and name != "direct" else None
        figures["exit_killed"] = len(exits) - len(clean) if name != "direct" else 0
        for key in keys:
            values = [r[key] for r in results if r.get(key) is not None]
            figures[key] = statistics.median(values) if values else None
        figures["errors"] = sorted({r["error"] for r in results if "error" in r})
        figures["notes"] = {k: v for r in results for k, v in r["notes"].items()}
        figures["rounds_ok"] = sum(1 for r in results if "error" not in r)
        summary[name] = figures
    direct = summary.get("direct", {})
    for figures in summary.values():
        ratios = {}
        for key, value in figures.items():
            base = direct.get(key)
            if key in ("errors", "notes", "rounds_ok", "exit_killed") or value is None or not base:
                continue
            ratios[key] = value / base
        figures["ratios"] = ratios
    return summary


def exit_on_sigterm() -> None:
    """SIGTERM (``timeout``, a CI runner) ends the run through the ``finally`` blocks, so the
    server and every contender are stopped, not left behind."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def main() -> int:
    global SEQ_CALLS
    exit_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 rounds, 2 cold starts each (~2 min)")
    parser.add_argument("--rounds", type=int, help="rounds (default 8; 2 with --quick)")
    parser.add_argument("--cold-starts", type=int, help="cold starts per contender per round (default 3; 2 with --quick)")
    parser.add_argument("--mode", choices=("json", "sse"), default="json", help="server replies: JSON bodies (default) or SSE")
    parser.add_argument("--out", type=Path, default=HERE / "results", help="results folder (default bench/results)")
    parser.add_argument("--budget", type=float, help="seconds; no new round starts past it (default 540; 150 with --quick)")
    parser.add_argument("--exe", type=Path, default=ROOT / "build" / "out" / "mcp-app-bridge", help="frozen executable")
    parser.add_argument("--extra", action="append", metavar="LABEL=COMMAND",
                        help="one more bridge to measure, e.g. a build of the previous commit: "
                             "before=/path/to/script (gets --url URL appended); repeatable")
    parser.add_argument("--peers-dir", type=Path, default=default_cache(),
                        help="where pinned peers are installed (default $MCP_BENCH_CACHE or ~/.cache/mcp-app-bridge-bench)")
    parser.add_argument("--no-install", action="store_true", help="use installed peers only; never pip/npm install")
    parser.add_argument("--no-peers", action="store_true", help="direct, python -m bridge and frozen only")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="contenders besides direct: bare, bridge (over TCP and, where there is one, a Unix socket), "
                             "unix (the bridge over a Unix socket only), frozen, "
                             "mcp-proxy, mcp-stdio, mcp-remote, supergateway")
    parser.add_argument("--no-chart", action="store_true", help="skip the PNG (no matplotlib needed)")
    parser.add_argument("--seq-calls", type=int, default=SEQ_CALLS,
                        help=f"calls of the sequential phase (default {SEQ_CALLS}): CPU time is counted in 10 ms "
                             "ticks, so telling builds a few percent apart in CPU per call wants 5,000 or more")
    args = parser.parse_args()
    SEQ_CALLS = args.seq_calls
    rounds_wanted = args.rounds or (2 if args.quick else 8)
    cold_starts = args.cold_starts or (2 if args.quick else 3)
    budget = args.budget or (150.0 if args.quick else 540.0)

    global WATCHDOG
    WATCHDOG = Watchdog()
    load_at_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    run_started = time.perf_counter()
    log_dir = Path(tempfile.mkdtemp(prefix="mcp-bench-logs-"))
    print("preparing contenders (peers install once into the cache) …", file=sys.stderr)
    compile_bridge()
    contenders, unavailable = build_contenders(args, log_dir)
    for name, reason in unavailable.items():
        print(f"  unavailable: {name}: {reason}", file=sys.stderr)

    server, url = start_server(args.mode)
    rounds: dict[str, list[dict[str, Any]]] = {c.name: [] for c in contenders}
    ids = [1]
    done_rounds = 0
    measure_started = time.perf_counter()
    try:
        for index in range(rounds_wanted):
            spent = time.perf_counter() - run_started
            per_round = (time.perf_counter() - measure_started) / done_rounds if done_rounds else 0.0
            if done_rounds and spent + per_round > budget:
                print(f"budget reached: stopping after {done_rounds} rounds", file=sys.stderr)
                break
            order = contenders[index % len(contenders):] + contenders[: index % len(contenders)]
            for contender in order:
                began = time.perf_counter()
                result = run_round(contender, url, cold_starts, ids)
                rounds[contender.name].append(result)
                status = result.get("error") or "ok"
                print(f"round {index + 1}/{rounds_wanted} {contender.name}: {time.perf_counter() - began:.1f} s, {status}",
                      file=sys.stderr)
            done_rounds += 1
    finally:
        kill_group(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill_group(server.pid)

    wall = time.perf_counter() - run_started
    import _report

    report = {
        "mode": args.mode,
        "rounds": done_rounds,
        "cold_starts_per_round": cold_starts,
        "wall_s": wall,
        "workload": {"seq_calls": SEQ_CALLS, "pipe_calls": PIPE_CALLS, "in_flight": IN_FLIGHT,
                     "warmup": [WARMUP_SEQ, WARMUP_PIPE], "large": [[k, t, s] for k, t, s in LARGE]},
        "machine": machine_info(),
        "load_average_at_start": load_at_start,
        "contenders": {c.name: {"version": c.version, "command": getattr(c, "argv", None)} for c in contenders},
        "unavailable": unavailable,
        "summary": summarize(rounds),
        "raw": rounds,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "command": "python bench/compare.py " + " ".join(sys.argv[1:]),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "latest" if args.mode == "json" else "latest-sse"
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=1) + "\n")
    markdown = _report.markdown(report, chart=None if args.no_chart else f"{stem}.png")
    if not args.no_chart:
        problem = _report.chart(report, args.out / f"{stem}.png")
        if problem:
            print(f"no chart: {problem}", file=sys.stderr)
            markdown = _report.markdown(report, chart=None)
    (args.out / f"{stem}.md").write_text(markdown)
    print(markdown)
    print(f"wrote {args.out / stem}.md/.json{'' if args.no_chart else '/.png'} in {wall:.0f} s "
          f"(contender logs: {log_dir})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
