"""Time one large JSON reply at a time, many times, through the bridge and direct.

    python bench/large_reply.py [--calls 15] [--size-mib 16] [--mode json|sse]
                                [--extra LABEL=COMMAND ...] [--timeline]

``compare.py`` takes one 16 MiB reply per round, so a before/after of that figure needs
many runs; this script starts the benchmark's server once, one bridge per contender
(``python -m bridge`` of this checkout, plus each ``--extra`` started as ``COMMAND --url
URL``) and the in-process direct client, then sends ``--calls`` ``large`` calls to each in
turn (interleaved, so load drifts hit all alike), every reply checked as compare.py does.
It prints per contender the median and the quartiles of the round trip, and the ratio to
direct's median.

``--timeline-root DIR`` adds the bridge of another checkout (``PYTHONPATH=DIR``).
``--timeline`` runs the bridges (this checkout's and ``--timeline-root``'s) with timestamps at
each step of the reply path (``_timeline.py``: the body read, the check, the line, the
stdout write), and prints the median milliseconds of each step, measured from the
harness's write of the request.
Loopback only; the server and bridges are stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compare  # noqa: E402


def main() -> int:
    compare.exit_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--size-mib", type=float, default=16)
    parser.add_argument("--mode", choices=("json", "sse"), default="json")
    parser.add_argument("--extra", action="append", default=[], metavar="LABEL=COMMAND")
    parser.add_argument("--timeline", action="store_true")
    parser.add_argument("--timeline-root", type=Path, default=None,
                        help="one more bridge, from this checkout (e.g. a worktree of an older commit), "
                             "interleaved; with --timeline it is timed step by step too")
    args = parser.parse_args()
    size = int(args.size_mib * compare.MiB)
    compare.WATCHDOG = compare.Watchdog()
    log_dir = Path(os.environ.get("TMPDIR", "/tmp"))
    server, url = compare.start_server(args.mode)
    contenders: list[object] = [compare.Direct()]
    timelines: dict[str, Path] = {}  # contender name → its timeline file
    bridges: list[tuple[str, Path | None]] = [("python -m bridge", None)]
    if args.timeline_root is not None:
        bridges.append((f"{args.timeline_root.name} (--timeline-root)", args.timeline_root))
    for name, root in bridges:
        argv = [sys.executable, "-m", "bridge", "--url", "{url}"]
        env: dict[str, str] = {}
        if args.timeline:
            timelines[name] = log_dir / f"large-reply-timeline-{os.getpid()}-{len(timelines)}.txt"
            argv = [sys.executable, str(HERE / "_timeline.py"), "--url", "{url}"]
            env = {"BRIDGE_TIMELINE": str(timelines[name])}
        if root is not None:  # its bridge package first, not this checkout's (the working directory)
            env.update(PYTHONPATH=str(root.resolve()), PYTHONSAFEPATH="1")
        contenders.append(compare.Stdio(name, "", argv, env, log_dir))
    for extra in args.extra:
        label, _, command = extra.partition("=")
        contenders.append(compare.Stdio(label, "", [command, "--url", "{url}"], {}, log_dir))
    times: dict[str, list[float]] = {c.name: [] for c in contenders}  # type: ignore[attr-defined]
    cpus: dict[str, list[float]] = {c.name: [] for c in contenders}  # type: ignore[attr-defined]
    marks: dict[str, list[tuple[float, float]]] = {name: [] for name in timelines}
    ident = 10
    try:
        for contender in contenders:
            contender.start(url)  # type: ignore[attr-defined]
            contender.notify(compare.INITIALIZED)  # type: ignore[attr-defined]
            for _ in range(3):  # warm-up
                ident += 1
                contender.arm("large")  # type: ignore[attr-defined]
                reply = contender.call(compare.call_line(ident, "large", {"size_bytes": size}))  # type: ignore[attr-defined]
                assert compare.check(reply, {ident: ("len", size)}) is None
        for _ in range(args.calls):
            for contender in contenders:
                ident += 1
                data = compare.call_line(ident, "large", {"size_bytes": size})
                contender.arm("large")  # type: ignore[attr-defined]
                cpu_before = contender.cpu()  # type: ignore[attr-defined]
                started = time.perf_counter()
                reply = contender.call(data)  # type: ignore[attr-defined]
                elapsed = time.perf_counter() - started
                cpus[contender.name].append(contender.cpu() - cpu_before)  # type: ignore[attr-defined]
                problem = compare.check(reply, {ident: ("len", size)})
                if problem:
                    raise RuntimeError(f"{contender.name}: {problem}")  # type: ignore[attr-defined]
                times[contender.name].append(elapsed)  # type: ignore[attr-defined]
                if contender.name in marks:  # type: ignore[attr-defined]
                    marks[contender.name].append((started, started + elapsed))  # type: ignore[attr-defined]
    finally:
        for contender in contenders:
            contender.stop()  # type: ignore[attr-defined]
        compare.kill_group(server.pid, signal.SIGTERM)
        server.wait(timeout=10)
    floor = statistics.median(times["direct"])
    print(f"{args.calls} × {args.size_mib:g} MiB `large` replies ({args.mode}), interleaved; round trip in ms "
          "(median [q1, q3]), ratio to direct, CPU ms per call (mean: /proc counts 10 ms ticks; direct: this whole process)")
    for name, samples in times.items():
        q1, median, q3 = statistics.quantiles(samples, n=4)
        print(f"  {name:24s} {median * 1000:7.1f} [{q1 * 1000:6.1f}, {q3 * 1000:6.1f}]  {median / floor:4.2f}× direct"
              f"  CPU {statistics.fmean(cpus[name]) * 1000:6.1f}")
    for name, path in timelines.items():
        print_timeline(name, path, marks[name])
    return 0


def print_timeline(name: str, path: Path, marks: list[tuple[float, float]]) -> None:
    """Median ms from the harness's request write to each step the bridge logged."""
    steps: dict[str, list[float]] = {}
    rows = [line.rpartition(" ") for line in path.read_text().splitlines() if line.strip()]
    for started, ended in marks:
        seen: set[str] = set()
        for step, stamp in ((step, float(stamp)) for step, _, stamp in rows):
            if started <= stamp <= ended and step not in seen:  # the first of each step
                seen.add(step)
                steps.setdefault(step, []).append((stamp - started) * 1000)
        steps.setdefault("harness has the line", []).append((ended - started) * 1000)
    print(f"timeline of {name} (median ms after the request was written):")
    for step, values in sorted(steps.items(), key=lambda item: statistics.median(item[1])):
        print(f"  {statistics.median(values):7.1f}  {step} (n={len(values)})")


if __name__ == "__main__":
    sys.exit(main())
