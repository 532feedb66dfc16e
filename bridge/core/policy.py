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
- **429 or 503 with ``Retry-After``** (RFC 9110 §10.2.3, §15.6.4; RFC 6585 §4: the app
  says it did not act on the request, and when to come back) → wait that long, send again,
  once, whatever the method. Only when the delay fits: at most
  :data:`MAX_RETRY_AFTER_SECONDS`, and less than what is left of the request's timeout;
  otherwise the error is answered at once, naming the Retry-After. Without the field, a
  429 or 503 is final.
- **the connection broke after the request was sent** (``StreamClosedError``: the app may
  have acted on it) → send again once, only for an idempotent method
  (:func:`is_idempotent`: reading or listing, ``ping``, ``server/discover``,
  ``completion/complete``). A ``tools/call`` is never sent twice: the tool may have run.
- anything else — a timeout, an HTTP error, a reply that is not JSON-RPC — is final. A
  timeout is never retried, idempotent or not: the request's time is spent.

Each recovery happens at most once per message, and they combine: an app that was down
and comes back with a new session is recovered by relaunch, then rebuild. A recovery that
itself fails ends the flow with the recovery's own error (the tools listing excepted: see
above).

Every retry in the bridge and its bound, readable in one place. The flow drives the first
six; the others are performed where their state lives, with the bound named here:

| what failed                           | what is tried                      | how often                        | where        |
|---------------------------------------|------------------------------------|----------------------------------|--------------|
| 401                                   | refresh the token, send again      | once per message                 | this flow    |
| connection refused                    | ``ensure_running``, send again     | once per message                 | this flow    |
| session gone (not 2026-07-28)         | replay ``initialize``, send again  | once per message                 | this flow    |
| -32020 on a 2026-07-28 ``tools/call`` | list the tools, send again         | once; ``MAX_LIST_PAGES`` pages   | this flow    |
| 429/503 with ``Retry-After``          | wait, send again                   | once; ``MAX_RETRY_AFTER_SECONDS``| this flow    |
| connection broke after sending        | send again (idempotent methods)    | once per message                 | this flow    |
| SSE reply stream broke (with ids)     | GET with ``Last-Event-ID``         | ``MAX_RESUME_ATTEMPTS``          | replies.py   |
| GET stream delivered nothing          | reconnect after a growing delay    | ``MAX_LISTEN_FAILURES`` in a row | listen.py, legacyapp.py |
| ``subscriptions/listen`` ended        | open it again after a growing delay| while the client listens         | modernapp.py |
| ``input_required`` with no questions  | send again after a short delay     | ``MAX_INPUT_ROUNDS``             | modernapp.py |
| a token fetch or app start failed     | those who waited get that failure  | never re-run for them            | tokens, launcher |
| a launch failed                       | launch again after a growing delay | each request after the delay     | launcher.py  |
| a named pipe busy (Windows)           | open it again after a growing delay| within the connect timeout       | pipelink.py  |
| a named-pipe accept failed (the app)  | accept again after a growing delay | while the app serves             | pipeserver.py |

Each growing delay is one :class:`Backoff` (first, factor, cap), named below.
``MAX_LIST_PAGES`` is ``bridge/core/quirks.py``'s: the most pages of one list the bridge
reads, merged for the client or listed again here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from typing import NamedTuple

from .errors import (
    AppUnreachableError,
    AuthRejectedError,
    HTTPStatusError,
    SessionLostError,
    StreamClosedError,
    UpstreamError,
)
from .methods import IDEMPOTENT_METHODS

__all__ = [
    "Action",
    "Send",
    "RefreshToken",
    "EnsureRunning",
    "RebuildSession",
    "RelistTools",
    "WaitThenSend",
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
    "MAX_RETRY_AFTER_SECONDS",
    "RETRY_AFTER_STATUSES",
    "retry_after_seconds",
    "is_idempotent",
    "Backoff",
    "LISTEN_RETRY_MAX_SECONDS",
    "GET_STREAM_BACKOFF",
    "SUBSCRIPTIONS_LISTEN_BACKOFF",
    "INPUT_POLL_BACKOFF",
    "LAUNCH_RETRY_BACKOFF",
    "PIPE_BUSY_BACKOFF",
    "PIPE_ACCEPT_BACKOFF",
]

#: Tries to resume a broken SSE response stream by GET + ``Last-Event-ID`` (both official
#: SDKs use 2; ``bridge/streamable/replies.py``).
MAX_RESUME_ATTEMPTS = 2
#: Tries in a row that delivered nothing before the GET stream gives up (``bridge/streamable/listen.py``).
MAX_LISTEN_FAILURES = 5
#: The longest ``Retry-After`` delay the bridge waits before sending once more (seconds).
MAX_RETRY_AFTER_SECONDS = 60.0
#: The statuses whose ``Retry-After`` is honoured: 429 Too Many Requests (RFC 6585 §4) and
#: 503 Service Unavailable (RFC 9110 §15.6.4).
RETRY_AFTER_STATUSES = frozenset({429, 503})


class Backoff(NamedTuple):
    """A growing wait between tries (httpcore's ``exponential_backoff``, with a cap):
    ``first_seconds``, times ``factor`` at each step, at most ``cap_seconds``."""

    first_seconds: float
    factor: float
    cap_seconds: float

    def seconds(self, step: int) -> float:
        """The wait at ``step`` (0: the first wait; a negative step counts as 0), in seconds."""
        return min(self.first_seconds * self.factor ** max(step, 0), self.cap_seconds)


#: The longest wait before a listening stream that ended is opened again (seconds): the
#: GET stream, a ``subscriptions/listen``, and a server's SSE ``retry``.
LISTEN_RETRY_MAX_SECONDS = 30.0
#: The GET stream's reconnect after tries that delivered nothing (``streamable/listen.py``,
#: ``serve/legacyapp.py``): 1 s (both official SDKs' default), ×1.5 each time, at most 30 s.
GET_STREAM_BACKOFF = Backoff(1.0, 1.5, LISTEN_RETRY_MAX_SECONDS)
#: A translated 2025-era client's ``subscriptions/listen`` that ended (``serve/modernapp.py``).
SUBSCRIPTIONS_LISTEN_BACKOFF = Backoff(1.0, 2.0, LISTEN_RETRY_MAX_SECONDS)
#: An ``input_required`` result with state alone: the app is not done yet; as the official
#: SDKs, wait a little before the next round (``serve/modernapp.py``).
INPUT_POLL_BACKOFF = Backoff(0.05, 2.0, 0.25)
#: After a failed launch, no new attempt for this long (``app/launcher.py``): 5, 10, 20, 40,
#: then 60 s each time.
LAUNCH_RETRY_BACKOFF = Backoff(5.0, 2.0, 60.0)
#: A busy named pipe (``transport/pipelink.py``; asyncio's ``CONNECT_PIPE_INIT_DELAY`` and
#: ``CONNECT_PIPE_MAX_DELAY``).
PIPE_BUSY_BACKOFF = Backoff(0.001, 2.0, 0.1)
#: The app's named-pipe accept loop after failures in a row, from the second
#: (``appserver/pipeserver.py``; the first is tried again at once).
PIPE_ACCEPT_BACKOFF = Backoff(0.05, 2.0, 5.0)


class _Marker:
    """A field-less action or outcome: one instance each (below), compared by identity. (A
    plain class: a dataclass would cost 0.2 ms of every start.)"""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _OneValue:
    """An action with one value, compared and hashed by its class and that value. (A plain
    class: a dataclass loads :mod:`inspect` and :mod:`ast` at every start.)"""

    __slots__ = ()
    #: The value's name (the subclass's one slot).
    _FIELD = ""

    def _value(self) -> object:
        return getattr(self, self._FIELD)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _OneValue)
        return bool(other._value() == self._value())

    def __hash__(self) -> int:
        return hash((type(self), self._value()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._FIELD}={self._value()!r})"


class Send(_Marker):
    """POST the message (again)."""


class RefreshToken(_OneValue):
    """Get a fresh token (single-flight across concurrent requests).

    ``used_generation``: the token generation the rejected request carried (a refresh
    since then makes this one a no-op); ``None`` when the error did not say: the token
    current now is replaced.
    """

    __slots__ = ("used_generation",)
    _FIELD = "used_generation"

    def __init__(self, used_generation: int | None) -> None:
        self.used_generation = used_generation


class EnsureRunning(_Marker):
    """Make sure the app runs and accepts connections (single-flight across bridges)."""


class RebuildSession(_OneValue):
    """Replay the client's ``initialize`` to get a new MCP session (single-flight).

    ``lost_generation``: the session generation the failed request carried (a rebuild
    since then makes this one a no-op); ``None`` when the error did not say: the session
    current now is rebuilt.
    """

    __slots__ = ("lost_generation",)
    _FIELD = "lost_generation"

    def __init__(self, lost_generation: int | None) -> None:
        self.lost_generation = lost_generation


class RelistTools(_Marker):
    """List the app's tools again (privately) to learn their header annotations anew."""


class WaitThenSend(_OneValue):
    """Wait ``delay_seconds`` (the app's ``Retry-After``), then the flow sends again."""

    __slots__ = ("delay_seconds",)
    _FIELD = "delay_seconds"

    def __init__(self, delay_seconds: float) -> None:
        self.delay_seconds = delay_seconds


class HeaderMismatch(_Marker):
    """An outcome of a ``Send``: it worked, but the app's reply is error -32020."""


Action = Send | RefreshToken | EnsureRunning | RebuildSession | RelistTools | WaitThenSend
SEND, ENSURE_RUNNING, RELIST_TOOLS = Send(), EnsureRunning(), RelistTools()
HEADER_MISMATCH_REPLY = HeaderMismatch()

#: What the driver sends back: ``None`` (the action worked), the ``UpstreamError`` it
#: raised, or, for a ``Send`` whose reply is a header mismatch, :data:`HEADER_MISMATCH_REPLY`.
AttemptOutcome = UpstreamError | HeaderMismatch | None
#: The generator type: yields actions, is sent outcomes, returns when the last ``Send``'s
#: reply is the answer, raises the final error.
Flow = Generator[Action, AttemptOutcome, None]


def forward_flow(
    *,
    can_rebuild: bool = True,
    can_relist: bool = False,
    idempotent: bool = False,
    remaining_seconds: Callable[[], float] | None = None,
) -> Flow:
    """Return the flow for one message.

    Args:
        can_rebuild: whether a lost session may be rebuilt for this message (not for the
            replayed ``initialize`` of a rebuild itself, nor in the stateless era).
        can_relist: whether a header mismatch is recovered by listing the tools again (a
            2026-07-28 ``tools/call``); otherwise that reply is the answer.
        idempotent: whether the message may be sent again after its connection broke
            once it was sent (:func:`is_idempotent` of its method).
        remaining_seconds: what is left of the request's timeout, in seconds, when asked;
            ``None``: no ``Retry-After`` is waited for (a message owed no reply).

    Raises (from the generator, to the driver):
        UpstreamError: the error that ends the flow: the last send's, or a recovery's.
    """
    tried: set[type[Action] | type[UpstreamError]] = set()
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
        if isinstance(outcome, HTTPStatusError) and outcome.retry_after_seconds is not None:
            if WaitThenSend in tried:
                raise outcome
            delay = outcome.retry_after_seconds
            left = remaining_seconds() if remaining_seconds is not None else None
            if delay > MAX_RETRY_AFTER_SECONDS or left is None or delay >= left:
                raise _not_waited(outcome, delay, left)
            tried.add(WaitThenSend)
            yield WaitThenSend(delay)
            continue
        if isinstance(outcome, StreamClosedError) and outcome.recoverable:
            if not idempotent or StreamClosedError in tried:
                raise outcome  # it may have reached the app: only a read is sent twice
            tried.add(StreamClosedError)
            continue
        recovery = _recovery_for(outcome)
        if recovery is None or type(recovery) in tried or (isinstance(recovery, RebuildSession) and not can_rebuild):
            raise outcome
        tried.add(type(recovery))
        recovery_error = yield recovery
        if recovery_error is not None:
            assert isinstance(recovery_error, UpstreamError), "a recovery's outcome is None or its error"
            raise recovery_error


def is_idempotent(method: str) -> bool:
    """Whether sending ``method`` twice changes nothing in the app: ``*/list``, ``*/get``,
    ``resources/read``, ``ping``, ``server/discover`` and ``completion/complete`` (it only
    suggests values). Not ``initialize`` (a new session each time), ``tools/call`` (the tool
    runs), ``logging/setLevel``, ``resources/subscribe`` nor ``subscriptions/listen``."""
    return method.endswith(("/list", "/get")) or method in IDEMPOTENT_METHODS


def _not_waited(error: HTTPStatusError, delay: float, left: float | None) -> HTTPStatusError:
    """The error answered at once for a ``Retry-After`` the bridge does not wait for."""
    if delay > MAX_RETRY_AFTER_SECONDS:
        why = f"longer than the {MAX_RETRY_AFTER_SECONDS:g} s the bridge waits at most"
    elif left is None:
        why = "not waited for on a message owed no reply"
    else:
        why = f"longer than the {max(left, 0.0):.0f} s left of the request timeout"
    answer = HTTPStatusError(f"{error.message} That delay is {why}, so the bridge did not send it again.", error.http_status)
    answer.__cause__ = error
    return answer


_DELAY_SECONDS = re.compile(r"^[0-9]+$")
#: What a ``delay-seconds`` of more than ten significant digits reads as (RFC 9111 §1.2.2).
_LARGEST_DELAY_SECONDS = 2**31
_OBSOLETE_DATES = ("%A, %d-%b-%y %H:%M:%S GMT", "%a %b %d %H:%M:%S %Y")  # RFC 850, asctime


def retry_after_seconds(value: str, now_epoch_seconds: float) -> float | None:
    """Read a ``Retry-After`` field (RFC 9110 §10.2.3): how many seconds from now to wait.

    Args:
        value: the field's value: ``delay-seconds`` (decimal digits) or an HTTP-date (RFC
            9110 §5.6.7: IMF-fixdate, or the obsolete RFC 850 and asctime forms).
        now_epoch_seconds: the current time (``time.time()``).

    Returns:
        the delay in seconds, 0 for a date already past, ``None`` when the value is neither form.
        Digits of any length are read: more than ten significant ones read as 2**31 s.
    """
    text = value.strip()
    if _DELAY_SECONDS.match(text):
        digits = text.lstrip("0") or "0"
        # More digits than any delay worth reading: the largest (RFC 9111 §1.2.2 takes 2**31
        # for a delta-seconds past what it can hold), longer than the bridge ever waits.
        # (int() of 4,301 digits or more raises; float() of 309 or more overflows.)
        return float(int(digits)) if len(digits) <= 10 else float(_LARGEST_DELAY_SECONDS)
    # (imported here: email.utils costs some 10 ms of every start, and dates are rare)
    import email.utils
    from datetime import UTC, datetime

    when: datetime | None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        when = None
    if when is None:
        for form in _OBSOLETE_DATES:
            try:
                when = datetime.strptime(" ".join(text.split()), form)
                break
            except ValueError:
                continue
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # HTTP-dates are in GMT
    return max(0.0, when.timestamp() - now_epoch_seconds)


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
