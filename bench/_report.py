"""The Markdown table and the PNG chart of a compare.py run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The start-up and per-call targets (the project's tracker, "Start like a bare Python
# process"): each read from one run, as (what, the figure's reading, the limit, met?).
BRIDGE, FROZEN, BARE, PEER = "python -m bridge", "frozen mcp-app-bridge", "bare Python process", "mcp-stdio"


def targets(report: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """Each target with this run's figure; only those whose contenders ran."""
    summary = report["summary"]
    sse = report["mode"] == "sse"
    rows: list[tuple[str, str, str, bool]] = []

    def figure(name: str, key: str) -> float | None:
        value = summary.get(name, {}).get(key)
        return float(value) if value is not None else None

    def ratio(name: str, key: str) -> float | None:
        value = summary.get(name, {}).get("ratios", {}).get(key)
        return float(value) if value is not None else None

    bridge_cold, bare_cold, peer_cold = figure(BRIDGE, "cold_s"), figure(BARE, "cold_s"), figure(PEER, "cold_s")
    if bridge_cold and peer_cold:
        rows.append(("cold start ahead of mcp-stdio", f"{bridge_cold * 1000:.0f} against {peer_cold * 1000:.0f} ms",
                     "ahead", bridge_cold < peer_cold))
    if bridge_cold and bare_cold:
        rows.append(("cold start × the bare process", f"{bridge_cold / bare_cold:.1f}×", "≤ 2.5×", bridge_cold / bare_cold <= 2.5))
    frozen_cold = figure(FROZEN, "cold_s")
    if frozen_cold and bridge_cold:
        rows.append(("frozen cold start × `python -m bridge`", f"{frozen_cold / bridge_cold:.2f}×", "≤ 1.3×",
                     frozen_cold / bridge_cold <= 1.3))
    for name, limit in ((BRIDGE, 20), (FROZEN, 24)):
        idle = figure(name, "idle_rss_kib")
        if idle:
            rows.append((f"idle RSS, {name}", f"{idle / 1024:.1f} MiB", f"≤ {limit} MiB", idle / 1024 <= limit))
    p50 = ratio(BRIDGE, "seq_p50_s")
    if p50 is not None:
        limit = 1.3 if sse else 1.4
        rows.append(("seq p50 × direct", f"{p50:.2f}×", f"≤ {limit}×", p50 <= limit))
    cpu, peer_cpu = figure(BRIDGE, "cpu_per_1k_s"), figure(PEER, "cpu_per_1k_s")
    if cpu and peer_cpu:
        rows.append(("CPU per call × mcp-stdio's", f"{cpu / peer_cpu:.2f}× ({cpu:.2f} against {peer_cpu:.2f} s)", "≤ 0.4×",
                     cpu / peer_cpu <= 0.4))
    pipe = ratio(BRIDGE, "pipe_calls_per_s")
    if pipe is not None:
        rows.append(("pipelined, % of direct", f"{pipe * 100:.0f} %", "≥ 100 %", pipe >= 1.0))
    large = ratio(BRIDGE, "reply_16m_s")
    if large is not None:
        rows.append(("16 MiB reply × direct", f"{large:.2f}×", "≤ 1.4×", large <= 1.4))
    return rows


TIME_COLUMNS = (  # key, heading, unit
    ("cold_s", "cold start to `initialize` reply", "ms"),
    ("seq_p50_s", "seq echo p50", "ms"),
    ("seq_p99_s", "seq echo p99", "ms"),
    ("pipe_calls_per_s", "pipelined, 32 in flight", "calls/s"),
    ("reply_1m_s", "1 MiB reply", "ms"),
    ("request_8m_s", "8 MiB request", "ms"),
    ("reply_16m_s", "16 MiB reply", "ms"),
)
RESOURCE_COLUMNS = (
    ("idle_rss_kib", "idle RSS (tree)", "MiB"),
    ("peak_rss_kib", "peak RSS (tree, Σ VmHWM)", "MiB"),
    ("cpu_per_1k_s", "CPU s per 1,000 calls (tree)", "s"),
    ("exit_s", "exit after stdin EOF", "ms"),
)
NOTE_KEYS = {"reply_1m_s": "reply_1m", "request_8m_s": "request_8m", "reply_16m_s": "reply_16m"}


def _number(value: float, unit: str) -> str:
    if unit == "ms":
        ms = value * 1000
        return f"{ms:.2f} ms" if ms < 10 else f"{ms:,.0f} ms"
    if unit == "calls/s":
        return f"{value:,.0f} calls/s"
    if unit == "MiB":
        return f"{value / 1024:.0f} MiB"
    return f"{value:.2f} s"


def _cell(figures: dict[str, Any], key: str, unit: str, is_direct: bool) -> str:
    value = figures.get(key)
    if value is None:
        note = figures.get("notes", {}).get(NOTE_KEYS.get(key, ""), "")
        if note:
            return "refused" if "error" in note or "too large" in note.lower() else "wrong reply"
        return "—" if is_direct and unit in ("MiB",) else "failed"
    text = _number(value, unit)
    ratio = figures.get("ratios", {}).get(key)
    if is_direct or ratio is None or key in ("exit_s", "cpu_per_1k_s"):  # direct's CPU is not a bridge's
        return text
    if key == "pipe_calls_per_s":
        return f"{text} ({ratio * 100:.0f} %)"
    return f"{text} ({ratio:.1f}×)"


def markdown(report: dict[str, Any], chart: str | None) -> str:
    machine, summary = report["machine"], report["summary"]
    mode = "JSON" if report["mode"] == "json" else "SSE"
    out = [
        f"## Side by side: {mode} replies, {report['rounds']} round{'s' if report['rounds'] != 1 else ''} "
        f"interleaved ({report['date']})",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['os']}; Python {machine['python']}, "
        f"Node {machine['node']}; load average {report.get('load_average_at_start', '?')} at the start, "
        f"{machine.get('load_average', '?')} at the end. Server: the example app (`examples/app_server.py`'s app, official MCP SDK "
        f"{machine['mcp_sdk']}) under uvicorn {machine['uvicorn']} via `bench/_server.py`, {mode} replies, loopback. Command: `{report['command'].strip()}` "
        f"({report['wall_s']:.0f} s wall). Medians over rounds (cold start: over "
        f"{report['cold_starts_per_round']} starts per round); in brackets the ratio to direct "
        "(pipelined: % of direct).",
        "",
        "| contender | " + " | ".join(heading for _, heading, _ in TIME_COLUMNS) + " |",
        "|---" * (len(TIME_COLUMNS) + 1) + "|",
    ]
    for name, figures in summary.items():
        cells = [_cell(figures, key, unit, name == "direct") for key, _, unit in TIME_COLUMNS]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out += ["", "| contender | " + " | ".join(heading for _, heading, _ in RESOURCE_COLUMNS) + " |",
            "|---" * (len(RESOURCE_COLUMNS) + 1) + "|"]
    for name, figures in summary.items():
        if name == "direct":
            cpu = figures.get("cpu_per_1k_s")
            out.append(f"| direct | — (in process) | — | {cpu:.2f} s (this process: client + harness) | — |"
                       if cpu is not None else "| direct | — | — | — | — |")
            continue
        cells = [_cell(figures, key, unit, False) for key, _, unit in RESOURCE_COLUMNS]
        if figures.get("exit_killed"):
            cells[-1] = f"{cells[-1] if figures.get('exit_s') is not None else 'never'}; killed {figures['exit_killed']}× after 5 s"
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out += ["", "Contenders:"]
    for name, meta in report["contenders"].items():
        out.append(f"- **{name}**: {meta['version']}")
    for name, reason in report["unavailable"].items():
        out.append(f"- **{name}**: unavailable: {reason}")
    problems = []
    for name, figures in summary.items():
        for key, note in figures.get("notes", {}).items():
            problems.append(f"- {name}, {key}: {note}")
        for error in figures.get("errors", []):
            problems.append(f"- {name} ({len(report['raw'][name]) - figures['rounds_ok']} of "
                            f"{len(report['raw'][name])} rounds): {error}")
    if problems:
        out += ["", "Refusals and failures:", *problems]
    rows = targets(report)
    if rows:
        out += ["", "Against the targets (this run):", "", "| target | this run | limit | met |", "|---|---|---|---|"]
        out += [f"| {what} | {value} | {limit} | {'yes' if met else 'no'} |" for what, value, limit, met in rows]
    if chart:
        out += ["", f"![ratios to direct]({chart})"]
    return "\n".join(out) + "\n"


def chart(report: dict[str, Any], path: Path) -> str | None:
    """Write the PNG; returns why not when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib)"
    summary = report["summary"]
    names = [name for name in summary if name != "direct"]
    ratio_keys = [("seq_p50_s", "seq p50"), ("seq_p99_s", "seq p99"), ("pipe_calls_per_s", "pipelined\n(direct ÷ it)"),
                  ("reply_1m_s", "1 MiB reply"), ("request_8m_s", "8 MiB request"), ("reply_16m_s", "16 MiB reply")]
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]  # tab10
    figure = plt.figure(figsize=(13, 8), dpi=110)
    grid = figure.add_gridspec(2, 4, height_ratios=[1.45, 1], hspace=0.32, wspace=0.08)
    top = figure.add_subplot(grid[0, :])
    width = 0.8 / max(1, len(names))
    highest = 1.0
    for i, name in enumerate(names):
        ratios, notes = summary[name].get("ratios", {}), summary[name].get("notes", {})
        xs, ys = [], []
        for j, (key, _) in enumerate(ratio_keys):
            x = j - 0.4 + width * (i + 0.5)
            value = ratios.get(key)
            if value:
                xs.append(x)
                ys.append(1 / value if key == "pipe_calls_per_s" else value)
            else:
                why = "refused" if notes.get(key.removesuffix("_s")) else "failed"
                top.text(x, 1.03, why, rotation=90, fontsize=7, ha="center", va="bottom", color=colors[i % len(colors)])
        highest = max([highest, *ys])
        bars = top.bar(xs, ys, width, label=name, color=colors[i % len(colors)])
        top.bar_label(bars, fmt="%.1f", fontsize=7, padding=1)
    top.axhline(1.0, color="black", linewidth=1)
    p50_target = 1.3 if report["mode"] == "sse" else 1.4
    top.axhline(p50_target, color="grey", linewidth=1, linestyle="--", label=f"target for the bridge's p50 ({p50_target}×)")
    top.set_yscale("log")
    top.set_ylim(0.8, highest * 1.6)
    top.set_xlim(-0.5, len(ratio_keys) - 0.5)
    top.set_xticks(range(len(ratio_keys)), [label for _, label in ratio_keys])
    top.set_ylabel("× direct HTTP client (lower is better)")
    mode = "JSON" if report["mode"] == "json" else "SSE"
    machine = report["machine"]
    rounds = report["rounds"]
    top.set_title(f"MCP stdio bridges vs a direct HTTP client: {mode} replies, medians of {rounds} round"
                  f"{'s' if rounds != 1 else ''} ({machine['cores']} cores, Python {machine['python']}, "
                  f"Node {machine['node']})", fontsize=10, pad=26)
    top.legend(fontsize=8, ncol=len(names) + 1, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    top.grid(axis="y", which="both", alpha=0.25)
    panels = [("cold_s", "cold start to initialize reply (ms)", 1000.0, 150), ("idle_rss_kib", "idle RSS of the tree (MiB)", 1 / 1024, 20),
              ("peak_rss_kib", "peak RSS of the tree (MiB)", 1 / 1024, 120), ("cpu_per_1k_s", "CPU s per 1,000 calls", 1.0, 0.8)]
    first = None
    for k, (key, title, scale, target) in enumerate(panels):
        axis = figure.add_subplot(grid[1, k], sharey=first)
        first = first or axis
        values = [(summary[n].get(key) or 0) * scale for n in names]
        bars = axis.barh(range(len(names)), values, color=[colors[i % len(colors)] for i in range(len(names))])
        axis.bar_label(bars, labels=[("%.2f" if scale == 1.0 else "%.0f") % v if v else "n/a" for v in values],
                       fontsize=7, padding=2)
        if k == 0:
            axis.set_yticks(range(len(names)), names, fontsize=8)
            axis.invert_yaxis()
        else:
            axis.tick_params(axis="y", labelleft=False)
        axis.axvline(target, color="grey", linewidth=1, linestyle="--")
        axis.set_title(title, fontsize=9)
        axis.tick_params(axis="x", labelsize=7)
        axis.margins(x=0.28)
    figure.savefig(path, bbox_inches="tight")
    plt.close(figure)
    return None
