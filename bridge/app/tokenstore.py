"""The bearer token in use: fetched lazily, cached, refreshed single-flight (docs/discovery.md, "Tokens").

``tokens.py`` says where a token comes from; this store, which token the next request
carries and when to fetch another. No token ever appears in a message, a log line or an
exception: failures name the source and the reason only.
"""

from __future__ import annotations

import asyncio

from ..core.config import DEFAULT_APP_NAME, DEFAULT_TOKEN_TIMEOUT_SECONDS, in_sentence
from ..core.errors import AppUnreachableError, AuthRejectedError
from ..system.cancelscope import current_time, fail_after
from .tokens import TokenContext, TokenSource, TokenSourceError, TokenSourceUnreachableError, header_safe

__all__ = ["TokenStore"]


class TokenStore:
    """The current token: fetched lazily, cached, refreshed single-flight.

    Args:
        source: where tokens come from, or ``None`` for no authentication.
        timeout_seconds: bound on one fetch; a source that hangs fails the request.
        app_name: how the app is named in error messages.

    Attributes:
        generation: increases whenever the cached token is replaced; a request remembers
            the generation it used so that N requests rejected together cause one refresh.
    """

    def __init__(self, source: TokenSource | None, *, timeout_seconds: float = DEFAULT_TOKEN_TIMEOUT_SECONDS, app_name: str = DEFAULT_APP_NAME) -> None:
        self._source = source
        self._timeout_seconds = timeout_seconds
        self._app = app_name
        self._token: str | None = None
        self._fetched = False
        self._lock = asyncio.Lock()
        self._last_failure: tuple[float, str] | None = None  # when the last fetch failed, and why
        self.generation = 0

    @property
    def has_source(self) -> bool:
        """Whether a token source is configured."""
        return self._source is not None

    @property
    def source_description(self) -> str:
        """How the token source is named in messages ("no token source" when none)."""
        return self._source.description if self._source is not None else "no token source"

    async def current(self, context: TokenContext) -> tuple[str | None, int]:
        """Return ``(token or None, generation)``, fetching on first use.

        Raises:
            AuthRejectedError: (not recoverable) the source failed or timed out.
        """
        if not self._fetched:
            arrived = current_time()
            async with self._lock:
                if not self._fetched:
                    await self._fetch(context, arrived)
        return self._token, self.generation

    async def refresh(self, context: TokenContext, used_generation: int) -> None:
        """Replace the token after the app rejected the one of ``used_generation``.

        Single-flight: if another request refreshed since, this returns at once and the
        caller retries with that newer token.

        Raises:
            AuthRejectedError: (not recoverable) no source, or the source failed.
        """
        arrived = current_time()
        async with self._lock:
            if self.generation != used_generation:
                return
            if self._source is None:
                raise AuthRejectedError(
                    f"{self._app} requires authentication (HTTP 401) and no token source is configured; "
                    "use --token-env, --token-file, --token-command, --auth-url or the discovery file.",
                    recoverable=False,
                )
            await self._fetch(context, arrived)

    async def _fetch(self, context: TokenContext, arrived: float) -> None:
        if self._last_failure is not None and self._last_failure[0] >= arrived:
            # Waited while a fetch failed: the same answer, not one more fetch after another.
            raise self._failure(self._last_failure[1])
        try:
            await self._fetch_now(context)
        except AuthRejectedError as exc:
            self._last_failure = (current_time(), exc.reason_text)
            raise

    async def _fetch_now(self, context: TokenContext) -> None:
        token: str | None = None
        if self._source is not None:
            try:
                with fail_after(self._timeout_seconds):
                    token = await self._source.fetch(context)
            except TimeoutError:
                raise self._failure(f"the {self._source.description} did not answer within {self._timeout_seconds:g} s") from None
            except TokenSourceUnreachableError as exc:
                raise AppUnreachableError(f"{self._app} is not running ({exc}).") from None
            except TokenSourceError as exc:
                raise self._failure(str(exc)) from None
        if token is not None and not header_safe(token):
            assert self._source is not None
            raise self._failure(f"the token from the {self._source.description} is not printable ASCII without spaces")
        self._token = token
        self._fetched = True
        self.generation += 1

    def _failure(self, reason: str) -> AuthRejectedError:
        return AuthRejectedError(
            f"Could not get a token for {in_sentence(self._app)}: {reason}.", recoverable=False, reason_text=reason
        )
