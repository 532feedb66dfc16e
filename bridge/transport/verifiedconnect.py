"""Resolve once, connect to each address in turn, keep the first connection verified to be the app's.

A name such as ``localhost`` resolves to more than one address (``::1`` and ``127.0.0.1``).
The app usually listens on one of them; any local user may listen on the other. A
credential must go only on a socket verified to be the app's (docs/security.md), so whoever opens a
connection to the app (the own pool, ``pool.py``; the auth route's httpx client,
``httpx_adapter.py``; ``check``) does this:

1. resolve the host once (:func:`resolve_addresses`; an IP literal is used as it is);
2. connect to each address in the resolver's order; on the first connection made, run
   the listener check (``bridge/app/listener.py``) on that very socket;
3. a connection refused, or one whose listener is not verified (another user's socket,
   not the discovery file's pid), is closed before a byte is written and the next
   address is tried; the first verified connection is the one the request is sent on.

When no address gives a verified connection, :func:`pick_failure` chooses what the caller
raises. When some address refused the connection (nothing listens there), it is the
connection failure: the app is not running, and ``--launch`` may start it there (a
squatter on ``[::1]`` must not keep the app from being started on ``127.0.0.1``). Else it
is the first refusal by the listener check, in address order (``listener_unverified``, or
the recoverable "the app is exiting"). Nothing has been sent on any socket.

:func:`verified_probe` answers the launcher's question (does the app accept connections?)
the same way: an address counts only when its listener passes the check.
"""

from __future__ import annotations

import asyncio
import inspect
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from ..core.errors import AppUnreachableError, ListenerUnverifiedError
from ..system.cancelscope import fail_after

__all__ = ["resolve_addresses", "pick_failure", "note_skipped", "skipped_note", "verified_probe", "VERIFY_REFUSALS"]

log = logging.getLogger("bridge.listener")

#: What the listener check raises for one address (then the next one is tried).
VERIFY_REFUSALS: tuple[type[ListenerUnverifiedError], type[AppUnreachableError]] = (ListenerUnverifiedError, AppUnreachableError)


async def resolve_addresses(host: str, port: int) -> list[str]:
    """The addresses to try for ``host``, in the resolver's order, without duplicates.

    An IP literal (``127.0.0.1``, ``::1``, ``[::1]``) is returned as it is, without asking
    the resolver. A name is resolved once, for TCP.

    Raises:
        OSError: the name does not resolve (``socket.gaierror``).
    """
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return [str(ipaddress.ip_address(bare.split("%", 1)[0])) if "%" not in bare else bare]
    except ValueError:
        pass
    infos = await asyncio.get_running_loop().getaddrinfo(bare, port, type=socket.SOCK_STREAM)
    addresses: list[str] = []
    for _family, _kind, _proto, _name, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def pick_failure(refusals: Sequence[BaseException], *, nothing_listens_somewhere: bool) -> BaseException | None:
    """What to raise when no address gave a verified connection: ``None`` when some address
    refused the connection or there was no refusal (the caller raises its connection
    failure: the app is not running there, and may be started), else the first refusal by
    the listener check (address order)."""
    if nothing_listens_somewhere or not refusals:
        return None
    return refusals[0]


def skipped_note(skipped: Sequence[str]) -> str:
    """`` (skipped: ADDRESS, …: not the app's)`` for a connection-failure message, or ``""``."""
    return f" (skipped {', '.join(skipped)}: its listener is not the app's)" if skipped else ""


def verified_probe(verify: Callable[[Any], object], *, timeout_seconds: float = 1.0) -> Callable[[str], Awaitable[bool]]:
    """An ``async (url) -> bool`` for the launcher: whether some address of ``url``'s host
    accepts a connection whose listener passes ``verify`` (a listener that is not the app's
    does not count; one that is exiting does, as a plain TCP probe would say). Each address
    is bounded by ``timeout_seconds``."""

    async def probe(url: str) -> bool:
        parts = urlsplit(url)
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with fail_after(timeout_seconds):
                addresses = await resolve_addresses(host, port)
        except (OSError, TimeoutError):
            return False
        loop = asyncio.get_running_loop()
        for address in addresses:
            sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                with fail_after(timeout_seconds):
                    await loop.sock_connect(sock, (address, port))
            except (OSError, TimeoutError):
                sock.close()
                continue
            except BaseException:
                sock.close()
                raise
            try:
                outcome = verify(sock)
                if inspect.isawaitable(outcome):
                    await outcome
            except ListenerUnverifiedError:
                continue
            except AppUnreachableError:
                return True  # exiting: the app is there (its restart is waited for elsewhere)
            finally:
                sock.close()
            return True
        return False

    return probe


def note_skipped(address: str, port: int, exc: BaseException) -> None:
    """Log an address skipped because its listener is not the app's (no secret in it)."""
    log.warning("skipped %s port %d: %s", address, port, exc)
