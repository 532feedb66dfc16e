"""The official conformance suite's client requirement sets, direct and through the bridge.

``@modelcontextprotocol/conformance`` (pinned in ``tests/interop/package.json``) freezes, per
dated spec revision, the client scenarios that revision requires (``conformance list --client
--requirements <revision>``), and runs them at that revision's wire: the initialize handshake
for 2025-11-25, stateless requests with per-request ``_meta`` for 2026-07-28. For each
revision in ``REVISIONS`` the CLI runs its set (``conformance client --requirements <revision>``)
against ``tests/interop/conformance_client.py``, the official Python SDK's client, once speaking
Streamable HTTP itself (``direct``, the control) and once speaking stdio to the bridge
(``bridge``). Each scenario's mock server gives each run a verdict; the bridge's must equal the
control's.

``EXPECTED`` lists every scenario of each set, with what the control must give:

- ``PASS``: every check a success (or skipped: a path the scenario offers and the client did
  not need), and one check of the client's own, ``client-completed``: every step it took worked.
- ``FAIL`` with the reason, printed. The ``auth/*`` scenarios need an OAuth client. The bridge
  has none, its tokens come from the app (docs/discovery.md, "Tokens"), so the same client logic
  has none direct either. Through the bridge the app's 401 must be answered with the bridge's
  own ``auth_rejected`` error, promptly, not by a timeout. And ``sep-2322-client-request-state``
  finds a gap of the SDK's own (``SDK_NO_RESULT_TYPE``).

Scenarios the set runs without scoring them (``extension``, ``added-after-release``) are
compared the same way; ``NOT_SCORED`` names them, and the CLI's own list must match.
``TIMING_CHECKS`` are left out of the equality, with the reason, and printed.

A verdict is ``PASS`` (every check a success or skipped), ``WARN`` (warnings, no failure) or
``FAIL``, followed by each check that is not ``INFO`` as ``id=STATUS``.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest
from interop.harness import CONFORMANCE_CLI, NODE, node_env, require_packages, side_by_side
from interop.peers import INTEROP_DIR, VIA, Via

pytestmark = pytest.mark.interop

CLIENT = INTEROP_DIR / "conformance_client.py"

REVISIONS = ("2025-11-25", "2026-07-28")
"""The requirement sets of the pinned CLI (``conformance list --help`` names them)."""

PASSES = "expected PASS"
SDK_NO_RESULT_TYPE = (
    "expected FAIL: only client-completed fails, the server's checks all pass. The SDK (2.3) "
    "rejects the last tool's result, which has no resultType, as invalid; the MRTR page of "
    "2026-07-28 says a client MUST take a missing resultType as complete"
)
NO_OAUTH = (
    "expected FAIL: an OAuth client's flow; the bridge has none (its tokens come from the app), "
    "so neither has the control"
)

_AUTH_BOTH = (
    "auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
    "auth/basic-cimd", "auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
    "auth/pre-registration",
)
_AUTH_2026 = (
    "auth/resource-mismatch", "auth/offline-access-scope", "auth/offline-access-not-supported",
    "auth/authorization-server-migration", "auth/iss-supported", "auth/iss-not-advertised",
    "auth/iss-supported-missing", "auth/iss-wrong-issuer", "auth/iss-unexpected", "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
)
_AUTH_EXTENSIONS = (
    "auth/client-credentials-jwt", "auth/client-credentials-basic", "auth/enterprise-managed-authorization",
    "auth/dpop", "auth/dpop-nonce", "auth/wif-jwt-bearer",
)

EXPECTED: dict[str, dict[str, str]] = {
    "2025-11-25": {
        **dict.fromkeys(("initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"), PASSES),
        **dict.fromkeys(_AUTH_BOTH, NO_OAUTH),
        **dict.fromkeys(_AUTH_EXTENSIONS, NO_OAUTH),
        "json-schema-2020-12-preservation": PASSES,
    },
    "2026-07-28": {
        **dict.fromkeys(
            (
                "tools_call", "request-metadata", "http-standard-headers",
                "http-custom-headers", "http-invalid-tool-headers", "json-schema-ref-no-deref",
            ),
            PASSES,
        ),
        "sep-2322-client-request-state": SDK_NO_RESULT_TYPE,
        **dict.fromkeys(_AUTH_BOTH, NO_OAUTH),
        **dict.fromkeys(_AUTH_2026, NO_OAUTH),
        **dict.fromkeys(_AUTH_EXTENSIONS, NO_OAUTH),
        "json-schema-2020-12-preservation": PASSES,
    },
}
"""Every client scenario each requirement set runs, with what the control must give and why."""

NOT_SCORED: dict[str, str] = {
    **dict.fromkeys(_AUTH_EXTENSIONS, "extension"),
    "json-schema-2020-12-preservation": "added-after-release",
}
"""The scenarios both sets run and report without scoring, with the CLI's reason."""

AUTH_REJECTED_LOG = "requires authentication (HTTP 401)"
"""What the bridge logs when it answers a request with its ``auth_rejected`` error. The client
does not always end on that error: at 2026-07-28 the SDK's probe gets it, the SDK falls back
to ``initialize``, and three of the scenario servers refuse that with -32020, direct too."""

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

SCENARIO_TIMEOUT_MS = 150_000
"""The CLI's bound on one client run (the client bounds itself at 60 s once its imports are
done). Generous: a set runs its clients in parallel, some 40 SDK clients (and as many bridges)
at once, and on a loaded 2-core machine importing the SDK alone takes seconds."""
CLI_TIMEOUT_SECONDS = 400.0
"""Bound on one CLI run of a whole requirement set."""


def client_command(via: Via) -> str:
    """The ``--command`` for the CLI; it splits it on spaces and runs it through a shell."""
    return shlex.join([sys.executable, str(CLIENT), via])


def run_cli(via: Via, out_dir: Path, *selection: str) -> subprocess.CompletedProcess[str]:
    """Run ``conformance client`` with `selection` (``--requirements R``, ``--scenario X``) for `via`."""
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
_NOT_SCORED_LINE = re.compile(r"^\s+[✓✗] (\S+) \(([\w-]+)\)$", re.MULTILINE)
"""A line of the CLI's "Not scored for <revision>" list: ``✗ auth/dpop (extension)``."""


class Run(NamedTuple):
    """One scenario's run one way: its checks (id, status), the client's own included, and its stderr."""

    checks: list[tuple[str, str]]
    stderr: str


class SetRun(NamedTuple):
    """One requirement set's CLI run one way."""

    scenarios: dict[str, Run]
    not_scored: dict[str, str]
    """What the CLI printed as run but not scored, with its reason."""
    output: str
    """The CLI's stdout: its summary of each scenario."""
    seconds: float


def results(out_dir: Path, via: Via) -> dict[str, Run]:
    """Per scenario run under `out_dir`: its non-INFO checks, ``client-completed`` last, and the client's stderr."""
    found: dict[str, Run] = {}
    for checks_file in sorted(out_dir.rglob("checks.json")):
        folder = checks_file.parent
        scenario = _RUN_STAMP.sub("", folder.relative_to(out_dir).as_posix())
        checks = [(check["id"], check["status"]) for check in json.loads(checks_file.read_text()) if check["status"] != "INFO"]
        stderr = (folder / "stderr.txt").read_text(encoding="utf-8", errors="replace") if (folder / "stderr.txt").exists() else ""
        # One check of the client's own: every step worked (it prints "failed:" if not).
        completed = "FAILURE" if f"{via}: {scenario}: failed:" in stderr else "SUCCESS"
        found[scenario] = Run([*checks, ("client-completed", completed)], stderr)
    return found


def run_set(revision: str, out_dir: Path, via: Via) -> SetRun:
    started = time.monotonic()
    run = run_cli(via, out_dir, "--requirements", revision)
    seconds = time.monotonic() - started
    found = results(out_dir, via)
    assert found, f"{via}: no scenario of --requirements {revision} ran; CLI output:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    not_scored = dict(_NOT_SCORED_LINE.findall(run.stdout.partition(f"Not scored for {revision}")[2]))
    return SetRun(found, not_scored, run.stdout, seconds)


def verdict(checks: list[tuple[str, str]], ignore: set[str] | frozenset[str] = frozenset()) -> str:
    kept = [(check_id, status) for check_id, status in checks if check_id not in ignore]
    statuses = {status for _, status in kept}
    overall = "FAIL" if "FAILURE" in statuses else "WARN" if "WARNING" in statuses else "PASS"
    return " ".join([overall, *(f"{check_id}={status}" for check_id, status in kept)])


def run_both(revision: str, out_dir: Path) -> dict[Via, SetRun]:
    """`revision`'s requirement set, run direct, then through the bridge (one at a time: each run
    already starts some 40 clients at once, and a 2-core machine has no room for twice that)."""
    return {via: run_set(revision, out_dir / via, via) for via in VIA}


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("revision", REVISIONS)
def test_requirement_set_through_the_bridge_equals_direct(revision: str, tmp_path: Path) -> None:
    require_packages()
    runs = run_both(revision, tmp_path)
    timing = set(TIMING_CHECKS)
    rows, mismatches, control_faults = [], [], []
    for scenario, expected in EXPECTED[revision].items():
        direct_run, bridge_run = (runs[via].scenarios.get(scenario, Run([("not run", "FAILURE")], "")) for via in VIA)
        direct, bridged = verdict(direct_run.checks, timing), verdict(bridge_run.checks, timing)
        label = scenario + (f" ({NOT_SCORED[scenario]}, not scored)" if scenario in NOT_SCORED else "")
        rows.append((label, direct, bridged))
        wanted = expected.split(":")[0].removeprefix("expected ")
        failing = [check_id for check_id, status in direct_run.checks if status == "FAILURE"]
        if direct.split()[0] != wanted or (expected == SDK_NO_RESULT_TYPE and failing != ["client-completed"]):
            control_faults.append(f"{scenario}: the control gave {direct}, {expected}\n{direct_run.stderr[-2000:]}")
        if bridged != direct:
            mismatches.append(f"{scenario}: bridge {bridged} != direct {direct}\nbridge client's stderr (its log):\n{bridge_run.stderr[-3000:]}")
        elif expected == NO_OAUTH and AUTH_REJECTED_LOG not in bridge_run.stderr:
            mismatches.append(f"{scenario}: the bridge did not answer the app's 401 with auth_rejected:\n{bridge_run.stderr[-3000:]}")
    seconds = " + ".join(f"{via} {runs[via].seconds:.0f} s" for via in VIA)
    print(side_by_side(f"conformance client --requirements {revision} ({seconds})", rows, width=70))
    for via in VIA:
        timed = [verdict([check for check in run.checks if check[0] in timing]) for run in runs[via].scenarios.values()]
        timed = [text[5:] for text in timed if text != "PASS"]
        if timed:
            print(f"  timing, not compared ({via}): {'; '.join(timed)}")
    if "sse-retry" in EXPECTED[revision]:
        for check_id, reason in TIMING_CHECKS.items():
            print(f"  - {check_id}: {reason}")
    expected_failures = sorted({reason for reason in EXPECTED[revision].values() if reason.startswith("expected FAIL")})
    for reason in expected_failures:
        names = [name for name, why in EXPECTED[revision].items() if why == reason]
        print(f"  {', '.join(names) if len(names) < 3 else f'{len(names)} scenarios'}: {reason}")
    assert sorted(runs["direct"].scenarios) == sorted(EXPECTED[revision]), f"the pinned suite's requirement set changed:\n{runs['direct'].output[-3000:]}"
    assert runs["direct"].not_scored == NOT_SCORED, f"the set's unscored scenarios changed: {runs['direct'].not_scored}"
    assert not control_faults, "\n\n".join(control_faults)
    assert not mismatches, "\n\n".join(mismatches)


def test_the_pinned_cli_offers_exactly_these_requirement_sets() -> None:
    """A later pin with another dated set must add it to `REVISIONS` (and `EXPECTED`), not leave it unrun."""
    require_packages()
    listed = subprocess.run(
        [str(NODE), str(CONFORMANCE_CLI), "list", "--help"], env=node_env(), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    found = re.search(r"Requirement sets available:\s*([\d\-,\s]+)", listed)
    assert found, f"no list of requirement sets in `conformance list --help`:\n{listed}"
    assert tuple(re.findall(r"\d{4}-\d{2}-\d{2}", found.group(1))) == REVISIONS
