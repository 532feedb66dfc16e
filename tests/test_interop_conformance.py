"""The official conformance suite's client scenarios, direct and through the bridge.

``@modelcontextprotocol/conformance`` (pinned in ``tests/interop/package.json``) starts a mock
MCP server for each client scenario and runs the client under test against it:
``tests/interop/conformance_client.py``, the official Python SDK's client, once speaking
Streamable HTTP itself (``direct``, the control) and once speaking stdio to the bridge
(``bridge``). The server's checks give each run a verdict; the bridge's must equal the control's.

- ``CORE_SCENARIOS`` run one at a time, each with its own CLI run per way.
- ``AUTH_SCENARIOS`` (OAuth flows) run in parallel, one CLI run per suite of ``AUTH_SUITES`` per way,
  and are expected to fail both ways: the bridge has no OAuth flow, its tokens come from
  the app (docs/discovery.md, "Tokens"), so the same client logic has none direct either. Through the
  bridge each must fail with the bridge's own ``auth_rejected`` error, promptly, not by a timeout.
- ``TIMING_CHECKS`` are left out of the equality, with the reason, and printed.

A verdict is ``PASS`` (every check a success), ``WARN`` (warnings, no failure) or ``FAIL``,
followed by each check that is not ``INFO`` as ``id=STATUS``. For the core scenarios one check
of the client's own is added, ``client-completed``: every step it took worked.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from interop.harness import CONFORMANCE_CLI, NODE, node_env, require_packages, side_by_side
from interop.peers import INTEROP_DIR, VIA, Via

pytestmark = pytest.mark.interop

CLIENT = INTEROP_DIR / "conformance_client.py"

CORE_SCENARIOS = ("initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry")

NO_OAUTH = "expected FAIL: the bridge has no OAuth flow (its tokens come from the app), so neither has the control"
AUTH_SCENARIOS: dict[str, str] = {
    name: NO_OAUTH
    for name in (
        "auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
        "auth/basic-cimd", "auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
        "auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
        "auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
        "auth/pre-registration", "auth/2025-03-26-oauth-metadata-backcompat",
        "auth/2025-03-26-oauth-endpoint-fallback", "auth/offline-access-scope",
        "auth/offline-access-not-supported", "auth/client-credentials-jwt", "auth/client-credentials-basic",
        "auth/cross-app-access-complete-flow",
    )
}
AUTH_SCENARIOS["auth/resource-mismatch"] = (
    "expected PASS: its one check is that the client does not go on to authorize against a "
    "mismatched resource, and a client without an OAuth flow never does"
)

AUTH_SUITES = ("auth", "backcompat", "draft", "extensions")
"""The suites that together hold every ``auth/*`` client scenario of the pinned CLI, and nothing else."""

TIMING_CHECKS: dict[str, str] = {
    "client-sse-retry-timing": (
        "sse-retry: the delay between the server cutting the POST stream and the next GET "
        "(500 ms, -50/+200) depends on timing, not behaviour; a loaded machine changes it"
    ),
    "client-sse-last-event-id": (
        "sse-retry: this server answers the pending call on whichever GET comes next. When the "
        "client's ordinary GET stream (opened after initialize, no Last-Event-ID) reaches it after "
        "the tools/call, the result arrives there before the resume is due, and the check warns; "
        "which comes first is a race, not behaviour"
    ),
}
"""Checks of timing-dependent scenarios that are printed, not compared. What stays compared for
``sse-retry``: the reconnect, and that the client got its result (``client-completed``)."""

SCENARIO_TIMEOUT_MS = 90_000
"""The CLI's bound on one client run (the client bounds itself at 60 s). Generous: a suite runs
its clients in parallel, and on a loaded 2-core machine importing the SDK alone takes seconds."""
CLI_TIMEOUT_SECONDS = 240.0
"""Bound on one CLI run."""


def client_command(via: Via) -> str:
    """The ``--command`` for the CLI; it splits it on spaces and runs it through a shell."""
    return shlex.join([sys.executable, str(CLIENT), via])


def run_cli(via: Via, out_dir: Path, *selection: str) -> subprocess.CompletedProcess[str]:
    """Run ``conformance client`` with `selection` (``--scenario X`` or ``--suite S``) for `via`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    command = [
        str(NODE), str(CONFORMANCE_CLI), "client", "--command", client_command(via), *selection,
        "--timeout", str(SCENARIO_TIMEOUT_MS), "-o", str(out_dir),
    ]
    return subprocess.run(
        command, cwd=out_dir, env=node_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=CLI_TIMEOUT_SECONDS,
    )


_RUN_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
"""The ``-<ISO timestamp>`` the CLI appends to each scenario's result folder."""


def run_both(out_dir: Path, *selection: str) -> dict[Via, subprocess.CompletedProcess[str]]:
    """`run_cli` for both ways at once (each CLI run has its own mock servers), results in ``out_dir/<way>``."""
    with ThreadPoolExecutor(len(VIA)) as pool:
        futures = {via: pool.submit(run_cli, via, out_dir / via, *selection) for via in VIA}
        return {via: future.result() for via, future in futures.items()}


def results(out_dir: Path) -> dict[str, tuple[list[tuple[str, str]], str]]:
    """Per scenario run under `out_dir`: its non-INFO checks (id, status) and the client's stderr."""
    found: dict[str, tuple[list[tuple[str, str]], str]] = {}
    for checks_file in sorted(out_dir.rglob("checks.json")):
        folder = checks_file.parent
        scenario = _RUN_STAMP.sub("", folder.relative_to(out_dir).as_posix())
        checks = [(check["id"], check["status"]) for check in json.loads(checks_file.read_text()) if check["status"] != "INFO"]
        stderr = (folder / "stderr.txt").read_text(encoding="utf-8", errors="replace") if (folder / "stderr.txt").exists() else ""
        found[scenario] = (checks, stderr)
    return found


def verdict(checks: list[tuple[str, str]], ignore: set[str] | frozenset[str] = frozenset()) -> str:
    kept = [(check_id, status) for check_id, status in checks if check_id not in ignore]
    statuses = {status for _, status in kept}
    overall = "FAIL" if "FAILURE" in statuses else "WARN" if "WARNING" in statuses else "PASS"
    return " ".join([overall, *(f"{check_id}={status}" for check_id, status in kept)])


@pytest.fixture(scope="module")
def checked() -> None:
    require_packages()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("scenario", CORE_SCENARIOS)
def test_core_scenario_verdict_through_the_bridge_equals_direct(checked: None, scenario: str, tmp_path: Path) -> None:
    runs = {}
    for via, run in run_both(tmp_path, "--scenario", scenario).items():
        found = results(tmp_path / via)
        assert scenario in found, f"{via}: no checks.json for {scenario}; CLI output:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        checks, stderr = found[scenario]
        # The server's checks, and one of the client's own: every step worked (it prints "failed:" if not).
        completed = "FAILURE" if f"{via}: {scenario}: failed:" in stderr else "SUCCESS"
        runs[via] = ([*checks, ("client-completed", completed)], stderr)
    timing = set(TIMING_CHECKS)
    direct, bridged = (verdict(runs[via][0], timing) for via in VIA)
    timed = {via: verdict([check for check in runs[via][0] if check[0] in timing]) for via in VIA}
    print(side_by_side(f"conformance client scenario {scenario}", [(scenario, direct, bridged)], width=110))
    if any(check_id in text for text in timed.values() for check_id in timing):
        print(f"  timing, not compared: direct {timed['direct'][5:]} | bridge {timed['bridge'][5:]}")
        for check_id, reason in TIMING_CHECKS.items():
            print(f"  - {check_id}: {reason}")
    assert direct.startswith("PASS"), f"the control itself does not pass {scenario}: {direct}\n{runs['direct'][1][-3000:]}"
    assert bridged == direct, f"{scenario}: bridge {bridged} != direct {direct}\nbridge client's stderr (its log):\n{runs['bridge'][1][-4000:]}"


@pytest.fixture(scope="module")
def auth_runs(checked: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Via, dict[str, tuple[list[tuple[str, str]], str]]]]:
    runs: dict[Via, dict[str, tuple[list[tuple[str, str]], str]]] = {via: {} for via in VIA}
    for suite in AUTH_SUITES:
        out_dir = tmp_path_factory.mktemp(suite)
        for via, run in run_both(out_dir, "--suite", suite).items():
            ran = results(out_dir / via)
            assert ran, f"{via}: no scenario of --suite {suite} ran; CLI output:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
            runs[via].update(ran)
    yield runs


@pytest.mark.timeout(900)
def test_auth_scenarios_fail_the_same_way_direct_and_through_the_bridge(auth_runs: dict[Via, dict[str, tuple[list[tuple[str, str]], str]]]) -> None:
    rows = []
    for name in AUTH_SCENARIOS:
        direct, bridged = (verdict(auth_runs[via].get(name, ([("not run", "FAILURE")], ""))[0]) for via in VIA)
        rows.append((name, direct, bridged))
    print(side_by_side("conformance auth scenarios (listed in AUTH_SCENARIOS with the reason each is expected)", rows, width=70))
    assert sorted(auth_runs["direct"]) == sorted(AUTH_SCENARIOS), "the pinned suite's auth scenarios changed"
    for name, direct, bridged in rows:
        expected = AUTH_SCENARIOS[name].split(":")[0].removeprefix("expected ")
        assert direct.split()[0] == expected, f"{name}: the control gave {direct}, {AUTH_SCENARIOS[name]}"
        assert bridged == direct, f"{name}: bridge {bridged} != direct {direct}\n{auth_runs['bridge'][name][1][-3000:]}"
        if expected == "FAIL":
            stderr = auth_runs["bridge"][name][1]
            assert "auth_rejected" in stderr, f"{name}: the bridge did not report the app's 401 as auth_rejected:\n{stderr[-3000:]}"
