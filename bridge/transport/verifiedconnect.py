"""Resolve once, connect to each address in turn, keep the first connection verified to be the app's.

A name such as ``localhost`` resolves to more than one address (``::1`` and ``127.0.0.1``).
The app usually listens on one of them; any local user may listen on the other. A
credential must go only on a socket verified to be the app's (DESIGN §5), so whoever opens a
connection to the app (the own pool, ``pool.py``; the auth route's httpx client,
``httpx_adapter.py``; ``check``) does this:

1. resolve the host once (:func:`resolve_addresses`; an IP literal is used as it is);
2. connect to each address in the resolver's order; on the first connection made, run
   the listener check (``bridge/app/listener.py``) on that very socket;
3. a connection refused, or one whose listener is not verified (another user's socket,
   not the discovery file's pid), is closed before a byte is written and the next
   address is tried; the first verified connection is the one the request is sent on.

When no address gives a verified connection, :func:`pick_failure` chooses what the caller
raises: the first refusal by the listener check in address order (``listener_unverified``,
or the recoverable "the app is exiting"), else the connection failure (nothing listens: the
app is not running). Nothing has been sent on any socket.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Sequence

import anyio

from ..core.errors import AppUnreachableError, ListenerUnverifiedError

__all__ = ["resolve_addresses", "pick_failure", "note_skipped", "VERIFY_REFUSALS"]

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
    infos = await anyio.getaddrinfo(bare, port, type=socket.SOCK_STREAM)
    addresses: list[str] = []
    for _family, _kind, _proto, _name, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def pick_failure(refusals: Sequence[BaseException]) -> BaseException | None:
    """What to raise when no address gave a verified connection: the first refusal by the
    listener check (address order), else ``None`` (the caller raises its connection
    failure: nothing listens, the app is not running)."""
    return refusals[0] if refusals else None


def note_skipped(address: str, port: int, exc: BaseException) -> None:
    """Log an address skipped because its listener is not the app's (no secret in it)."""
    log.warning("skipped %s port %d: %s", address, port, exc)
