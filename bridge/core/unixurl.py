"""The ``http+unix://`` URL: an MCP endpoint served over a Unix domain socket (pure).

One URL names both the socket file and the HTTP path on it, the way requests-unixsocket
and httpie-unixsocket spell it: the scheme ``http+unix``, then the socket's absolute path
percent-encoded as the authority (every ``/`` as ``%2F``), then the request target::

    http+unix://%2Frun%2Fuser%2F1000%2Fmyapp%2Fmcp.sock/mcp

The rules (:func:`split_unix_url` enforces them; the discovery file and ``--url`` use it):

- the socket path is absolute, has no NUL byte, and is not a Linux abstract socket (a
  name starting with ``@``, which has no file and so no owner or mode to check);
- its file-system encoding fits ``sun_path`` with its final NUL: at most
  :data:`MAX_SOCKET_PATH_BYTES` bytes (107 on Linux, 103 on macOS and the BSDs);
- the authority holds nothing but the encoded path: no user name, no port;
- the target starts with ``/``; no fragment. A query is kept as part of the target.

A path given on its own (``--auth-url /auth/token``) is resolved against such a URL by
:func:`resolve_path`: the same socket, that path (``urllib.parse.urljoin`` knows only the
schemes of RFC 3986's era, and returns the bare path for this one).

HTTP over it is plain HTTP/1.1 with ``Host: localhost`` (:data:`UNIX_HOST`), as curl sends
for ``curl --unix-socket PATH http://localhost/``. ``https`` has no Unix-socket form: a
local socket whose peer is checked by the OS needs no TLS.
"""

from __future__ import annotations

import os
import sys
from urllib.parse import quote, unquote, urljoin

from .pipeurl import is_pipe_url, resolve_pipe_path

__all__ = ["UNIX_SCHEME", "UNIX_HOST", "MAX_SOCKET_PATH_BYTES", "is_unix_url", "split_unix_url", "unix_url", "resolve_path"]

UNIX_SCHEME = "http+unix"
#: The ``Host`` header sent to an app on a Unix socket (a socket has no host name).
UNIX_HOST = "localhost"
#: Longest socket path in bytes: ``sizeof(sun_path)`` less its NUL (``unix(7)``: 108 on
#: Linux; ``unix(4)``: 104 on macOS and the BSDs).
MAX_SOCKET_PATH_BYTES = 107 if sys.platform.startswith("linux") else 103

_PREFIX = UNIX_SCHEME + "://"


def is_unix_url(url: str) -> bool:
    """Whether ``url`` uses the ``http+unix`` scheme (case-insensitive); not whether it is valid."""
    return url[: len(_PREFIX)].lower() == _PREFIX


def split_unix_url(url: str) -> tuple[str, str]:
    """``http+unix://%2Fpath%2Fapp.sock/mcp`` → ``("/path/app.sock", "/mcp")``.

    Returns:
        the socket's absolute path (decoded) and the request target (path and query).

    Raises:
        ValueError: the URL breaks one of the module's rules; the message says which
            (never repeating a query, which may carry a credential).
    """
    if not is_unix_url(url):
        raise ValueError("not an http+unix:// URL")
    rest = url[len(_PREFIX):]
    if "#" in rest:
        raise ValueError("an http+unix:// URL must not contain a #fragment")
    slash = rest.find("/")
    if slash <= 0:
        raise ValueError("an http+unix:// URL needs the socket path (percent-encoded) and then the MCP path, "
                         "as in http+unix://%2Frun%2Fapp.sock/mcp")
    authority, target = rest[:slash], rest[slash:]
    if "@" in authority or ":" in authority:
        raise ValueError("the socket part of an http+unix:// URL holds '@' or ':' (a user name or port); "
                         "percent-encode the path")
    socket_path = unquote(authority, errors="strict")
    if not socket_path.startswith("/"):
        raise ValueError("the socket path of an http+unix:// URL must be absolute (start with %2F)")
    if "\x00" in socket_path:
        raise ValueError("the socket path of an http+unix:// URL holds a NUL byte")
    size = len(os.fsencode(socket_path))
    if size > MAX_SOCKET_PATH_BYTES:
        raise ValueError(f"the socket path of an http+unix:// URL is {size} bytes; the OS allows {MAX_SOCKET_PATH_BYTES}")
    if not target.isascii() or any(ch <= " " or ch == "\x7f" for ch in target):
        raise ValueError("the path of an http+unix:// URL holds spaces, controls or characters that are not ASCII")
    return socket_path, target


def unix_url(socket_path: str | os.PathLike[str], path: str = "/mcp") -> str:
    """The ``http+unix://`` URL of ``path`` on the socket at ``socket_path``.

    Raises:
        ValueError: as :func:`split_unix_url` (a relative or too long path, say).
    """
    url = _PREFIX + quote(os.fspath(socket_path), safe="") + path
    split_unix_url(url)
    return url


def resolve_path(base_url: str, path: str) -> str:
    """``path`` (starting with ``/``) on the server of ``base_url``: for ``http+unix://``,
    the same socket (``http+unix://%2Fs.sock/mcp`` and ``/auth/token`` →
    ``http+unix://%2Fs.sock/auth/token``); for ``npipe://``, the same pipe
    (``pipeurl.resolve_pipe_path``); for any other URL, ``urllib.parse.urljoin``.

    Raises:
        ValueError: ``path`` does not start with ``/``; ``base_url`` is an ``http+unix://``
            URL that :func:`split_unix_url` refuses, or an ``npipe://`` URL that
            ``pipeurl.split_pipe_url`` refuses (as they say).
    """
    if not path.startswith("/"):
        raise ValueError("the path must start with '/'")
    if is_pipe_url(base_url):
        return resolve_pipe_path(base_url, path)
    if not is_unix_url(base_url):
        return urljoin(base_url, path)
    socket_path, _target = split_unix_url(base_url)
    return unix_url(socket_path, path)
