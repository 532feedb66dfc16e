"""HTTP transports to the app behind one seam (``base.py``), and the factory choosing one.

=====================  ================================================================
module                 what it holds
=====================  ================================================================
``base.py``            ``Transport``/``HttpResponse`` protocols; the ``TransportError`` tree
``http1.py``           sans-I/O HTTP/1.1: encode a request head, parse a response (pure)
``verifiedconnect``    the one road to the app: each address in turn, the listener
                       checked on the very connection (``connect_first_verified``)
``socketfile.py``      a Unix socket's file checked before connecting (no asyncio: the
                       running-app start uses it too)
``unixlink.py``        a Unix domain socket (``http+unix://``): its file checked, then
                       connected; the peer check goes through ``connect_first_verified``
``pipelink.py``        a Windows named pipe (``npipe://``): opened so that its server
                       cannot impersonate the user, wrapped in asyncio's proactor pipe
                       transport; the server check goes through ``connect_first_verified``
``connection.py``      one keep-alive connection on an asyncio protocol
``pool.py``            the bridge's own keep-alive pool on asyncio, for ``http://``,
                       ``http+unix://`` and ``npipe://``
``httpx_adapter``      httpx for ``https://`` and injected test transports
``memory.py``          ``MemoryTransport(handler)``: an in-memory transport for tests
``byscheme.py``        ``make_transport``, and ``ByScheme``: the transport picked by URL
                       scheme, swapped if it changes
``authroute.py``       ``AuthRouteClient``: the token sources' ``post_json`` to the app's
                       auth route, over the same transports
=====================  ================================================================
"""

from __future__ import annotations

from .authroute import AuthRouteClient
from .base import HttpResponse, Transport, TransportError
from .byscheme import make_transport

__all__ = ["make_transport", "AuthRouteClient", "Transport", "HttpResponse", "TransportError"]
