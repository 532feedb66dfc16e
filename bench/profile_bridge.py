"""Profile ``python -m bridge`` on the sequential echo phase with py-spy (sampling, no code change).

    pip install py-spy
    python bench/profile_bridge.py [--calls 3000] [--mode json|sse] [--native] [--out bench/results]

Starts the benchmark's MCP server, spawns the bridge, warms it up, then attaches
``py-spy record`` to the bridge while the harness sends ``--calls`` sequential echo
calls (the same lines and checks as compare.py), and stops it. Writes the collapsed stacks
(``profile-<mode>.txt``, loadable in speedscope) and prints what costs the most per call:
functions by inclusive and by self time, and time by package (``bridge``, ``httpx``,
``httpcore``, ``h11``, ``anyio``, ``asyncio``, …). Only samples where the bridge was on CPU
count (py-spy leaves idle threads out), so ms per call is the bridge's CPU time per call.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compare  # noqa: E402

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]*)(?::\d+)?\)$")


def package_of(path: str) -> str:
    """py-spy's short file name ("httpx/_client.py", "threading.py") → a package name."""
    if not path or path.startswith("<"):
        return "native/other"
    head, _, rest = path.partition("/")
    if not rest:
        return Path(head).stem
    return f"bridge.{Path(rest).stem}" if head == "bridge" else head


def summarize(collapsed: Path, calls: int, rate: int, top: int) -> str:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    packages: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = 0
    for row in collapsed.read_text().splitlines():
        stack, _, count_text = row.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        parts = stack.split(";")
        if parts[0].startswith("thread ("):
            threads[parts.pop(0).partition(": ")[2] or "?"] += count
        frames = []
        for part in parts:
            match = FRAME.match(part)
            func, file = (match.group("func"), match.group("file")) if match else (part, "")
            frames.append((f"{func} ({Path(file).name})" if file else func, package_of(file)))
        for name in {name for name, _ in frames}:
            inclusive[name] += count
        own[frames[-1][0]] += count
        # the package that holds the innermost Python frame (native frames charge their caller)
        python_frames = [pkg for _, pkg in frames if pkg != "native/other"]
        packages[python_frames[-1] if python_frames else "native/other"] += count
    per_call = 1000.0 / rate / calls  # ms per call for one sample
    lines = [f"{total} on-CPU samples at {rate} Hz over {calls} calls = "
             f"{total * per_call:.3f} ms of bridge CPU per call", "", "by thread:"]
    lines += [f"  {n * per_call:7.3f} ms/call  {100 * n / total:5.1f} %  {name}" for name, n in threads.most_common(top)]
    lines += ["", "by package (innermost Python frame):"]
    lines += [f"  {n * per_call:7.3f} ms/call  {100 * n / total:5.1f} %  {name}" for name, n in packages.most_common(top)]
    lines += ["", "inclusive (function and what it calls):"]
    lines += [f"  {n * per_call:7.3f} ms/call  {100 * n / total:5.1f} %  {name}" for name, n in inclusive.most_common(top)]
    lines += ["", "self:"]
    lines += [f"  {n * per_call:7.3f} ms/call  {100 * n / total:5.1f} %  {name}" for name, n in own.most_common(top)]
    return "\n".join(lines)


def main() -> int:
    compare.exit_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    parser.add_argument("--mode", choices=("json", "sse"), default="json")
    parser.add_argument("--native", action="store_true", help="include C frames (py-spy --native)")
    parser.add_argument("--all-threads", action="store_true",
                        help="sample every thread py-spy sees as active (default: only the one holding the GIL)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(py_spy).exists():
        raise SystemExit("py-spy is not installed: pip install py-spy")

    compare.WATCHDOG = compare.Watchdog()
    args.out.mkdir(parents=True, exist_ok=True)
    collapsed = args.out / f"profile-{args.mode}.txt"
    server, url = compare.start_server(args.mode)
    bridge = compare.Stdio("python -m bridge", "", [sys.executable, "-m", "bridge", "--url", "{url}"], {}, args.out)
    bridge.log_path = args.out / "profile-bridge.stderr"
    try:
        bridge.start(url)
        bridge.notify(compare.INITIALIZED)
        lines, expected = compare.echo_batch(1, 300)
        compare.check_all([bridge.call(each) for each in lines], expected)
        assert bridge.proc is not None
        spy = subprocess.Popen([py_spy, "record", "--pid", str(bridge.proc.pid), "--rate", str(args.rate),
                                "--format", "raw", "--output", str(collapsed), "--threads",
                                *(["--native"] if args.native else []), *([] if args.all_threads else ["--gil"])],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)  # py-spy attaches
        lines, expected = compare.echo_batch(1000, args.calls)
        bridge.arm("seq")
        cpu_before = bridge.cpu()
        started = time.perf_counter()
        replies = [bridge.call(each) for each in lines]
        elapsed = time.perf_counter() - started
        cpu = bridge.cpu() - cpu_before
        spy.send_signal(signal.SIGINT)
        _, spy_err = spy.communicate(timeout=60)
        compare.check_all(replies, expected)
    finally:
        bridge.stop()
        compare.kill_group(server.pid, signal.SIGTERM)
        server.wait(timeout=10)
    if not collapsed.exists():
        raise SystemExit(f"py-spy wrote nothing: {spy_err.decode(errors='replace')[-500:]}")
    print(f"{args.calls} sequential echo calls through python -m bridge ({args.mode} replies) under py-spy: "
          f"{elapsed / args.calls * 1000:.3f} ms per call wall, bridge tree CPU {cpu / args.calls * 1000:.3f} ms per call "
          f"(/proc; sampling slows it)\ncollapsed stacks: {collapsed}\n")
    print(summarize(collapsed, args.calls, args.rate, args.top))
    print("\n(--gil: samples of the thread holding the GIL only; time in syscalls with the GIL released is not seen)"
          if not args.all_threads else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
