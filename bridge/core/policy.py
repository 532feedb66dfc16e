"""The recovery policy for one message: what to try after which failure, and how often.

Pure: imports only the standard library. Shaped like httpx's ``Auth.auth_flow``: a
generator that yields the next action and is sent the outcome, so the decisions can be
tested without any I/O and the driver (``bridge/serve/driver.py``) only performs actions. As httpx's
flow yields the request itself, an action carries what the driver needs to perform it
(the token or session generation that failed), taken from the error that asked for it.

Rules (docs/discovery.md, "Tokens", "Starting the app" and "App restarts"):

- **401** → refresh the token once, send again. A second 401 ends it (``auth_rejected``).
- **connection refused** (nothing reached the app) → ``ensure_running`` once (start the
  app, wait until it listens), send again. Still refused → ``app_unreachable``.
- **session gone** (404 on a request that carried a session id, or the app's "unknown
  session" 400) → rebuild the MCP session once, send again. Again → ``session_lost``.
- **header mismatch** (2026-07-28: a ``tools/call`` answered with error -32020, the app's
  tool schemas changed since the client listed them) → list the tools again once, send
  again. If the listing fails, or the app still says so, the client gets the app's reply.
- anything else — a timeout, a reset mid-exchange, an HTTP error — is final: a request that
  may have reached the app is never sent twice.

Each recovery happens at most once per message, and they combine: an app that was down
and comes back with a new session is recovered by relaunch, then rebuild. A recovery that
itself fails ends the flow with the recovery's own error (the tools listing excepted: see
above).

Every retry in the bridge and its bound, readable in one place. The flow drives the first
four; the others are performed where their state lives, with the bound named here:

| what failed                           | what is tried                      | how often                        | where        |
|---------------------------------------|------------------------------------|----------------------------------|--------------|
| 401                                   | refresh the token, send again      | once per message                 | this flow    |
| connection refused                    | ``ensure_running``, send again     | once per message                 | this flow    |
| session gone (not 2026-07-28)         | replay ``initialize``, send again  | once per message                 | this flow    |
| -32020 on a 2026-07-28 ``tools/call`` | list the tools, send again         | once; ``MAX_TOOL_PAGES`` pages   | this flow    |
| SSE reply stream broke (with ids)     | GET with ``Last-Event-ID``         | ``MAX_RESUME_ATTEMPTS``          | replies.py   |
| GET stream delivered nothing          | reconnect after a growing delay    | ``MAX_LISTEN_FAILURES`` in a row | listen.py    |
| a token fetch or app start failed     | those who waited get that failure  | never re-run for them            | tokens, launcher |
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from .errors import AppUnreachableError, AuthRejectedError, SessionLostError, UpstreamError

__all__ = [
    "Action",
    "Send",
    "RefreshToken",
    "EnsureRunning",
    "RebuildSession",
    "RelistTools",
    "SEND",
    "ENSURE_RUNNING",
    "RELIST_TOOLS",
    "HeaderMismatch",
    "HEADER_MISMATCH_REPLY",
    "AttemptOutcome",
    "Flow",
    "forward_flow",
    "MAX_RESUME_ATTEMPTS",
    "MAX_LISTEN_FAILURES",
    "MAX_TOOL_PAGES",
]

#: Tries to resume a broken SSE response stream by GET + ``Last-Event-ID`` (both official
#: SDKs use 2; ``bridge/streamable/replies.py``).
MAX_RESUME_ATTEMPTS = 2
#: Tries in a row that delivered nothing before the GET stream gives up (``bridge/streamable/listen.py``).
MAX_LISTEN_FAILURES = 5
#: Pages of ``tools/list`` read when the tools are listed again after a header mismatch.
MAX_TOOL_PAGES = 50


class _Marker:
    """A field-less action or outcome: one instance each (below), compared by identity. (A
    plain class: a dataclass would cost 0.2 ms of every start.)"""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Send(_Marker):
    """POST the message (again)."""


@dataclass(frozen=True)
class RefreshToken:
    """Get a fresh token (single-flight across concurrent requests).

    ``used_generation``: the token generation the rejected request carried (a refresh
    since then makes this one a no-op); ``None`` when the error did not say: the token
    current now is replaced.
    """

    used_generation: int | None


class EnsureRunning(_Marker):
    """Make sure the app runs and accepts connections (single-flight across bridges)."""


@dataclass(frozen=True)
class RebuildSession:
    """Replay the client's ``initialize`` to get a new MCP session (single-flight).

    ``lost_generation``: the session generation the failed request carried (a rebuild
    since then makes this one a no-op); ``None`` when the error did not say: the session
    current now is rebuilt.
    """

    lost_generation: int | None


class RelistTools(_Marker):
    """List the app's tools again (privately) to learn their header annotations anew."""


class HeaderMismatch(_Marker):
    """An outcome of a ``Send``: it worked, but the app's reply is error -32020."""


Action = Send | RefreshToken | EnsureRunning | RebuildSession | RelistTools
SEND, ENSURE_RUNNING, RELIST_TOOLS = Send(), EnsureRunning(), RelistTools()
HEADER_MISMATCH_REPLY = HeaderMismatch()

#: What the driver sends back: ``None`` (the action worked), the ``UpstreamError`` it
#: raised, or, for a ``Send`` whose reply is a header mismatch, :data:`HEADER_MISMATCH_REPLY`.
AttemptOutcome = UpstreamError | HeaderMismatch | None
#: The generator type: yields actions, is sent outcomes, returns when the last ``Send``'s
#: reply is the answer, raises the final error.
Flow = Generator[Action, AttemptOutcome, None]


def forward_flow(*, can_rebuild: bool = True, can_relist: bool = False) -> Flow:
    """Return the flow for one message.

    Args:
        can_rebuild: whether a lost session may be rebuilt for this message (not for the
            replayed ``initialize`` of a rebuild itself, nor in the stateless era).
        can_relist: whether a header mismatch is recovered by listing the tools again (a
            2026-07-28 ``tools/call``); otherwise that reply is the answer.

    Raises (from the generator, to the driver):
        UpstreamError: the error that ends the flow: the last send's, or a recovery's.
    """
    tried: set[type[Action]] = set()
    while True:
        outcome = yield SEND
        if outcome is None:
            return
        if isinstance(outcome, HeaderMismatch):
            if not can_relist or RelistTools in tried:
                return  # the app's -32020 reply is the answer
            tried.add(RelistTools)
            if (yield RELIST_TOOLS) is not None:
                return  # listing failed: the client gets the app's reply (the driver logs why)
            continue
        recovery = _recovery_for(outcome)
        if recovery is None or type(recovery) in tried or (isinstance(recovery, RebuildSession) and not can_rebuild):
            raise outcome
        tried.add(type(recovery))
        recovery_error = yield recovery
        if recovery_error is not None:
            assert isinstance(recovery_error, UpstreamError), "a recovery's outcome is None or its error"
            raise recovery_error


def _recovery_for(error: UpstreamError) -> Action | None:
    if not error.recoverable:
        return None
    if isinstance(error, AuthRejectedError):
        return RefreshToken(error.token_generation)
    if isinstance(error, AppUnreachableError):
        return ENSURE_RUNNING
    if isinstance(error, SessionLostError):
        return RebuildSession(error.session_generation)
    return None
