"""The recovery policy for one message: what to try after which failure, and how often.

Pure: imports only the standard library. Shaped like httpx's ``Auth.auth_flow``: a
generator that yields the next action and is sent the outcome, so the decisions can be
tested without any I/O and the driver (``session.py``) only performs actions.

Rules (DESIGN.md §2.8–§2.10, SPEC-CHECKLIST D3):

- **401** → refresh the token once, send again. A second 401 ends it (``auth_rejected``).
- **connection refused** (nothing reached the app) → ``ensure_running`` once (start the
  app, wait until it listens), send again. Still refused → ``app_unreachable``.
- **session gone** (404 on a request that carried a session id, or the app's "unknown
  session" 400) → rebuild the MCP session once, send again. Again → ``session_lost``.
- anything else — a timeout, a reset mid-exchange, an HTTP error — is final: a request that
  may have reached the app is never sent twice.

Each recovery happens at most once per message, and they combine: an app that was down
and comes back with a new session is recovered by relaunch, then rebuild. A recovery that
itself fails ends the flow with the recovery's own error.
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
    "SEND",
    "REFRESH_TOKEN",
    "ENSURE_RUNNING",
    "REBUILD_SESSION",
    "Flow",
    "forward_flow",
]


@dataclass(frozen=True)
class Send:
    """POST the message (again)."""


@dataclass(frozen=True)
class RefreshToken:
    """Get a fresh token (single-flight across concurrent requests)."""


@dataclass(frozen=True)
class EnsureRunning:
    """Make sure the app runs and accepts connections (single-flight across bridges)."""


@dataclass(frozen=True)
class RebuildSession:
    """Replay the client's ``initialize`` to get a new MCP session (single-flight)."""


Action = Send | RefreshToken | EnsureRunning | RebuildSession
SEND, REFRESH_TOKEN, ENSURE_RUNNING, REBUILD_SESSION = Send(), RefreshToken(), EnsureRunning(), RebuildSession()

#: The generator type: yields actions, is sent ``None`` (the action worked) or the
#: ``UpstreamError`` it raised, returns when a ``Send`` worked, raises the final error.
Flow = Generator[Action, UpstreamError | None, None]

_RECOVERY: tuple[tuple[type[UpstreamError], Action], ...] = (
    (AuthRejectedError, REFRESH_TOKEN),
    (AppUnreachableError, ENSURE_RUNNING),
    (SessionLostError, REBUILD_SESSION),
)


def forward_flow(*, can_rebuild: bool = True) -> Flow:
    """Return the flow for one message.

    Args:
        can_rebuild: whether a lost session may be rebuilt for this message (not for the
            replayed ``initialize`` of a rebuild itself, nor in the stateless era).

    Raises (from the generator, to the driver):
        UpstreamError: the error that ends the flow: the last send's, or a recovery's.
    """
    tried: set[Action] = set()
    while True:
        error = yield SEND
        if error is None:
            return
        recovery = _recovery_for(error)
        if recovery is None or recovery in tried or (recovery == REBUILD_SESSION and not can_rebuild):
            raise error
        tried.add(recovery)
        recovery_error = yield recovery
        if recovery_error is not None:
            raise recovery_error


def _recovery_for(error: UpstreamError) -> Action | None:
    if not error.recoverable:
        return None
    for error_type, action in _RECOVERY:
        if isinstance(error, error_type):
            return action
    return None
