"""The token command (``--token-command``): its process is bounded (time, output) and never
left running, and what it prints on stderr never reaches a reply.

A failing credential helper often prints the very secret it failed to use ("invalid API
key sk-…"). Its stderr goes only to the log, at debug level and masked; the reply names
the exit status and says where to look.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path

import pytest
from support.helpers import URL, RunBridge, request_line
from support.mcp_app import McpApp

from bridge.app import tokencommand
from bridge.app.tokencommand import MAX_COMMAND_STDERR_BYTES, MAX_TOKEN_OUTPUT_BYTES, CommandTokenSource, mask_secrets
from bridge.app.tokens import TokenContext, TokenSourceError

pytestmark = pytest.mark.anyio


def _cut_keyword() -> tuple[str, str]:
    """A keyword cut off by the 1 KiB tail: the tail starts inside ``token=``."""
    secret = "mellonfriend"
    tail = f"en={secret} was refused "
    return "x" * 3000 + " tok" + tail + "y" * (MAX_COMMAND_STDERR_BYTES - len(tail)), secret


#: (what the command writes to stderr, the secret in it): the shapes of a round of trying
#: a failing helper's stderr against the old redaction (which let 10 of 18 through).
SECRET_SHAPES = [
    ('{"access_token": "ya29.a0AfB_byC"}', "ya29.a0AfB_byC"),
    ("request to https://alice:hunter2horse@login.example.com/ failed", "hunter2horse"),
    ("Cookie: session=qwertyuiopas", "qwertyuiopas"),
    ("invalid API key sk-proj-abcdefghij", "sk-proj-abcdefghij"),
    ("Get-Secret: cannot bind -Token Xyzzyplugh", "Xyzzyplugh"),
    ("rejected: a1B2c3", "a1B2c3"),  # 6 characters
    ("pin 84920173 expired", "84920173"),  # all digits
    ("credential aBcDeFgHiJkLmNoP refused", "aBcDeFgHiJkLmNoP"),  # all letters
    ("refused p@ss:w0rd!x", "p@ss:w0rd!x"),  # punctuation inside
    ("Authorization: Bearer abcdefghijkl", "abcdefghijkl"),
    ("password=hunter", "hunter"),
    ("X-Api-Key: zyxwvutsrq", "zyxwvutsrq"),
    ('{"refresh_token":"1//0gLmNoPqR"}', "1//0gLmNoPqR"),
    ("gh: ghp_16C7e42F292c6912E7710c838347Ae178B4a is revoked", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl expired", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"),
    ("--token=mellon given twice", "mellon"),
    ("secret: QUIETLYWHISPERINGSECRET", "QUIETLYWHISPERINGSECRET"),
    _cut_keyword(),
]


def _failing(stderr_text: str, status: int = 1) -> CommandTokenSource:
    script = f"import sys; sys.stderr.write({stderr_text!r}); sys.exit({status})"
    return CommandTokenSource([sys.executable, "-c", script], timeout_seconds=30)


@pytest.mark.process
@pytest.mark.parametrize(("stderr_text", "secret"), SECRET_SHAPES, ids=[str(n) for n in range(1, len(SECRET_SHAPES) + 1)])
async def test_a_failing_commands_stderr_never_reaches_the_reply_nor_the_default_log(
    stderr_text: str, secret: str, run_bridge: RunBridge, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)  # the bridge's default --log-level
    async with run_bridge(McpApp(token="good", stateless=True), token_source=_failing(stderr_text, 3)) as h:
        h.stdin.feed(request_line(1))
        (reply,) = await h.stdout.wait_for(1)
    message = reply["error"]["message"]
    assert reply["error"]["data"]["reason"] == "auth_rejected"
    assert "the token command exited with status 3" in message and "the log" in message
    assert secret not in json.dumps(reply) and secret not in caplog.text
    assert "token command" in caplog.text  # the failure itself is logged, its stderr not


@pytest.mark.process
@pytest.mark.parametrize(("stderr_text", "secret"), SECRET_SHAPES, ids=[str(n) for n in range(1, len(SECRET_SHAPES) + 1)])
async def test_at_debug_level_the_log_has_the_stderr_masked(
    stderr_text: str, secret: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(TokenSourceError):
        await _failing(stderr_text).fetch(_context())
    assert "its stderr ended" in caplog.text and "[masked]" in caplog.text
    assert secret not in caplog.text


@pytest.mark.process
async def test_at_debug_level_the_log_keeps_the_stderr_readable(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(TokenSourceError) as raised:
        await _failing("keychain: the item could not be found in the keychain (status 44)").fetch(_context())
    assert "keychain" not in str(raised.value)
    assert "the item could not be found in the keychain (status 44)" in caplog.text


def test_masking_keeps_prose_and_masks_values() -> None:
    assert mask_secrets("cat: '/home/me/tok': No such file or directory") == "cat: '/[masked]': No such file or directory"
    assert mask_secrets("exit status 127 at line 3") == "exit status 127 at line 3"
    assert mask_secrets("Bearer abc, then token: xyz") == "Bearer [masked], then token: [masked]"


@pytest.mark.process
@pytest.mark.posix_only("cat")
async def test_a_command_written_for_a_shell_gets_the_hint_without_its_stderr() -> None:
    """`--token-command 'cat ~/tok'` fails because no shell expands `~`: the error says so
    and suggests `sh -c`; what cat said is in the log only."""
    from bridge.cli.options import split_command

    with pytest.raises(TokenSourceError) as raised:
        await CommandTokenSource(split_command("cat ~/tok")).fetch(_context())
    message = str(raised.value)
    assert "exited with status 1" in message and "No such file" not in message and "the log" in message
    assert "without a shell" in message and "'~/tok'" in message and "sh -c" in message
    with pytest.raises(TokenSourceError) as raised:  # already a shell: no hint
        await CommandTokenSource(["sh", "-c", "echo nope >&2; exit 3"]).fetch(_context())
    assert "without a shell" not in str(raised.value)


@pytest.mark.process
async def test_a_command_that_cannot_start_says_why() -> None:
    with pytest.raises(TokenSourceError, match="token command could not be started"):
        await CommandTokenSource(["/nonexistent/token-helper"]).fetch(_context())


@pytest.mark.process
async def test_the_output_is_capped_in_both_directions_as_it_arrives(caplog: pytest.LogCaptureFixture) -> None:
    """8 MiB on each pipe: the command is never blocked on a full pipe, the token is the
    first 64 KiB and the log has the last 1 KiB of stderr."""
    caplog.set_level(logging.DEBUG)
    script = (
        "import sys\n"
        "for _ in range(128): sys.stdout.write('t' * 65536); sys.stderr.write('e' * 65536)\n"
        "sys.stderr.write(' the end'); sys.stdout.flush(); sys.exit(0)\n"
    )
    token = await CommandTokenSource([sys.executable, "-c", script], timeout_seconds=60).fetch(_context())
    assert token == "t" * MAX_TOKEN_OUTPUT_BYTES
    script = script.replace("sys.exit(0)", "sys.exit(5)")
    with pytest.raises(TokenSourceError, match="status 5"):
        await CommandTokenSource([sys.executable, "-c", script], timeout_seconds=60).fetch(_context())
    logged = caplog.records[-1].getMessage()
    assert logged.endswith("[masked] the end") and len(logged) < MAX_COMMAND_STDERR_BYTES


@pytest.mark.process
@pytest.mark.parametrize("ending", ["timeout", "cancelled"])
async def test_a_command_that_hangs_is_killed_and_reaped(ending: str, tmp_path: Path) -> None:
    """Its own timeout, or the fetch cancelled (the request's exchange, the token bound,
    the shutdown): the process is killed and waited for, never left behind."""
    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    source = CommandTokenSource([sys.executable, "-c", script], timeout_seconds=1 if ending == "timeout" else 60)
    if ending == "timeout":
        with pytest.raises(TokenSourceError, match="did not finish within 1 s"):
            await source.fetch(_context())
    else:
        fetch = asyncio.get_running_loop().create_task(source.fetch(_context()))
        while not pid_file.exists() or not pid_file.read_text():
            await asyncio.sleep(0.01)
        fetch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fetch
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # killed, and reaped: no zombie keeps the pid
        os.kill(pid, 0) if os.name != "nt" else _windows_alive(pid)


@pytest.mark.process
async def test_its_own_timeout_holds_in_a_task_that_carries_a_cancel_request() -> None:
    """A fetch in a task that was cancelled once and went on (a clean-up after ^C) still
    ends at its own bound, with its own message. (A bare ``asyncio.timeout`` there let its
    own cancellation escape as ``CancelledError`` on Python 3.11.0-3.11.2,
    python/cpython#102780: the caller got no error it could report.)"""
    source = CommandTokenSource([sys.executable, "-c", "import time; time.sleep(60)"], timeout_seconds=0.5)

    async def carried_on() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass  # carried on: the task's request stays counted
        with pytest.raises(TokenSourceError, match="did not finish within 0.5 s"):
            await source.fetch(_context())

    task = asyncio.get_running_loop().create_task(carried_on())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.wait_for(task, 30)


@pytest.mark.process
async def test_a_cancelled_fetch_bounds_the_reap_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A killed command that is never reaped (a process stuck in the kernel, played by a
    ``wait`` that never returns), after the fetch was cancelled: the reap's bound holds in
    the task being cancelled, and the log says so. (A bare ``asyncio.timeout`` there let
    its own cancellation escape on Python 3.11.0-3.11.2, python/cpython#102780: no line.)"""
    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    source = CommandTokenSource([sys.executable, "-c", script], timeout_seconds=60)
    fetch = asyncio.get_running_loop().create_task(source.fetch(_context()))
    while not pid_file.exists() or not pid_file.read_text():
        await asyncio.sleep(0.01)

    async def never_reaped(self: asyncio.subprocess.Process) -> int:
        await asyncio.Event().wait()
        return 0

    monkeypatch.setattr(tokencommand, "KILL_REAP_SECONDS", 0.05)
    monkeypatch.setattr(asyncio.subprocess.Process, "wait", never_reaped)
    fetch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(fetch, 10)
    assert "did not end within 0.05 s of being killed" in caplog.text


def _windows_alive(pid: int) -> None:
    import psutil  # type: ignore[import-untyped,unused-ignore]

    if psutil.pid_exists(pid):
        return
    raise ProcessLookupError(pid)


def _context() -> TokenContext:
    return TokenContext(base_url=URL)  # (no HTTP exchange: the token command needs none)

