"""The token command: a command's stdout, run without a shell and bounded in time, as the
bearer token (``--token-command CMD``; docs/discovery.md, "Tokens"; docs/security.md).

A module of its own so that a start without ``--token-command`` loads none of it: the
process machinery, the masking of what a failing command printed.
"""

from __future__ import annotations

import logging
import os
import re
import string
import subprocess
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..core.config import DEFAULT_TOKEN_TIMEOUT_SECONDS
from .tokens import TokenContext, TokenSourceError

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "CommandTokenSource",
    "KILL_REAP_SECONDS",
    "MAX_COMMAND_STDERR_BYTES",
    "MAX_TOKEN_OUTPUT_BYTES",
    "mask_secrets",
]

log = logging.getLogger("bridge.tokens")


class CommandTokenSource:
    """Run a command (no shell) and take its stdout, stripped, as the token.

    Args:
        argv: the command and its arguments.
        timeout_seconds: the command is killed (and reaped) after this long, and so it is
            when the fetch is cancelled.

    A failure's message names the exit status, the timeout or why the command could not
    start, never what the command printed: its stderr (the last
    :data:`MAX_COMMAND_STDERR_BYTES`) goes only to the log, at debug level and masked
    (:func:`mask_secrets`), since a failing credential helper may print the very secret
    it failed to use.
    """

    def __init__(self, argv: Sequence[str], timeout_seconds: float = DEFAULT_TOKEN_TIMEOUT_SECONDS) -> None:
        self.argv = list(argv)
        self.timeout_seconds = timeout_seconds
        self.description = "token command"

    async def fetch(self, context: TokenContext) -> str | None:
        import asyncio  # not at import time: the serving start imports asyncio first, without ssl (cli/diagnostics.py)

        from ..system.cancelscope import fail_after  # (its asyncio: not at import time, as above)

        stdout = bytearray()
        stderr = bytearray()
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        except OSError as exc:
            raise TokenSourceError(f"the {self.description} could not be started: {exc.strerror}{self._shell_hint()}") from None
        token = None
        try:
            assert process.stdout is not None and process.stderr is not None
            with fail_after(self.timeout_seconds):
                await asyncio.gather(
                    _collect(process.stdout, stdout, MAX_TOKEN_OUTPUT_BYTES, keep_end=False),
                    _collect(process.stderr, stderr, MAX_COMMAND_STDERR_BYTES, keep_end=True),
                )
                returncode = await process.wait()
            if returncode != 0:
                raise TokenSourceError(f"the {self.description} exited with status {returncode}{self._see_log(stderr)}")
            token = stdout.decode("utf-8", "replace").strip()
            if not token:
                raise TokenSourceError(f"the {self.description} printed no token{self._see_log(stderr)}")
            return token
        except TimeoutError:
            raise TokenSourceError(
                f"the {self.description} did not finish within {self.timeout_seconds:g} s{self._see_log(stderr)}"
            ) from None
        finally:
            if process.returncode is None:  # timed out or cancelled: never left running
                await _kill(process)
            if not token and stderr:
                log.debug("the %s failed; its stderr ended: %s", self.description, _masked_stderr(stderr, stdout))

    def _see_log(self, stderr: bytearray) -> str:
        return ("; its stderr is in the log at --log-level debug" if stderr else "") + self._shell_hint()

    def _shell_hint(self) -> str:
        """A hint when the command looks written for a shell, which it never runs in."""
        runs_a_shell = os.path.basename(self.argv[0]).lower().removesuffix(".exe") in _SHELLS
        shell_words = [] if runs_a_shell else [word for word in self.argv if _looks_like_shell(word)]
        if not shell_words:
            return ""
        example = "cmd /c \"…\"" if os.name == "nt" else "sh -c '…'"
        return (
            f". The command runs without a shell, so {mask_secrets(shell_words[0])!r} is passed as it is: "
            f"`~`, `$VAR`, pipes, redirections and wildcards are not expanded. To use a shell, "
            f"give --token-command \"{example}\""
        )


#: The most of a token command's stdout kept (bytes); a token is far shorter.
MAX_TOKEN_OUTPUT_BYTES = 64 * 1024
#: How much of the end of a failing token command's stderr goes into the log (bytes).
MAX_COMMAND_STDERR_BYTES = 1024
#: After a kill, the longest wait for the process to be reaped (seconds).
KILL_REAP_SECONDS = 5.0

_SHELL_MARKS = ("|", ">", "<", "$", "&&", ";", "`", "*", "?", "[")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish", "cmd", "powershell", "pwsh"})
#: A word with a part ending in one of these makes the next word a value to mask
#: (``token=``, ``access_token":``, ``-Token X``, ``API key sk-…``, ``Cookie: …``, ``Bearer …``).
_SECRET_KEYWORD = re.compile(
    r"[a-z]*(?:token|secret|password|passwd|pwd|key|session|cookie|authorization|auth|bearer|basic|credentials?|pin|otp)"
)
_PUNCTUATION = string.punctuation + "“”‘’«»"


def mask_secrets(text: str) -> str:
    """``text`` with every word that may be a credential replaced by ``[masked]``.

    Words are runs without white space, judged without the punctuation around them. Masked:
    a word with a digit or with punctuation inside (``sk-…``, ``a1B2c3``, a JWT, a URL with
    its userinfo, ``session=…``, a path), except a number shorter than 6 digits (an exit
    status, a line number); a word of letters only that is 16 or longer or mixes case
    inside (``QWERTYasdfgh``); and any word after one naming a secret (``token``,
    ``password``, ``key``, ``Cookie``, ``Bearer``, …). What stays readable is prose:
    ``cat: [masked] No such file or directory``.
    """
    words = re.split(r"(\s+)", text)
    after_keyword = False
    for index in range(0, len(words), 2):
        word = words[index]
        core = word.strip(_PUNCTUATION)
        if not core:
            continue
        if after_keyword or _may_be_secret(core):
            start = word.index(core)
            words[index] = word[:start] + "[masked]" + word[start + len(core) :]
        after_keyword = any(_SECRET_KEYWORD.fullmatch(part) for part in re.split(r"[^a-z0-9]+", word.lower()))
    return "".join(words)


def _may_be_secret(core: str) -> bool:
    if core.isdigit():
        return len(core) >= 6
    if not core.isalpha():
        return True  # a digit or punctuation inside
    return len(core) >= 16 or any(a.islower() and b.isupper() for a, b in zip(core, core[1:], strict=False))


def _masked_stderr(stderr: bytearray, stdout: bytearray) -> str:
    """The stderr kept, masked, with any word of stdout (the token, or part of it) out too."""
    text = stderr.decode("utf-8", "replace").strip()
    for word in stdout.decode("utf-8", "replace").split():
        if len(word) >= 4:
            text = text.replace(word, "[masked]")
    return mask_secrets(text)


def _looks_like_shell(word: str) -> bool:
    """Whether one argument looks written for a shell: ``~/x``, ``$VAR``, ``|``, ``>f``,
    ``*.txt``… An argument with white space in it is code or text (``python -c '…'``),
    not a shell word, and never counts."""
    if not word or any(c.isspace() for c in word):
        return False
    return word.startswith("~") or any(mark in word for mark in _SHELL_MARKS)


async def _collect(stream: asyncio.StreamReader, into: bytearray, limit: int, *, keep_end: bool) -> None:
    """Read ``stream`` to its end, keeping at most ``limit`` bytes of it as they arrive: the
    first ones, or the last ones with ``keep_end``. The rest is read and dropped, so a
    chatty command never blocks on a full pipe."""
    while chunk := await stream.read(64 * 1024):
        into += chunk
        if len(into) > limit and keep_end:
            del into[: len(into) - limit]
        elif len(into) > limit:
            del into[limit:]


async def _kill(process: asyncio.subprocess.Process) -> None:
    """Kill ``process`` and wait, at most :data:`KILL_REAP_SECONDS`, until it is reaped (a
    process stuck in the kernel is left to the event loop's child watcher)."""
    from ..system.cancelscope import move_on_after  # (its asyncio: not at import time, as above)

    try:
        process.kill()
    except ProcessLookupError:
        pass  # ended meanwhile
    # Usually in a task being cancelled (the fetch's ``finally``): the scope, not a bare
    # asyncio.timeout, which on 3.11.0-3.11.2 let its own cancellation escape there.
    with move_on_after(KILL_REAP_SECONDS) as reaping:
        await process.wait()
    if reaping.cancelled_caught:
        log.warning("the token command (pid %d) did not end within %g s of being killed", process.pid, KILL_REAP_SECONDS)
