"""The ``npipe://`` URL: an MCP endpoint served over a Windows named pipe (pure).

One URL names both the pipe and the HTTP path on it. The pipe part is spelled as Docker
spells its engine's pipe (``npipe://./pipe/docker_engine``, which .NET's ``Uri`` reads as
host ``.`` and the pipe name as the second path segment): the Windows pipe path
``\\\\.\\pipe\\NAME`` with forward slashes, ``.`` being this machine. The request target
follows the name::

    npipe://./pipe/mcp-app-bridge-4242-9f3c1a2b/mcp        →  \\\\.\\pipe\\mcp-app-bridge-4242-9f3c1a2b  and  /mcp

The rules (:func:`split_pipe_url` enforces them; the discovery file and ``--url`` use it):

- the host is ``.``: a pipe of this machine (a pipe on another host, ``\\\\server\\pipe\\…``,
  is SMB over the network; the server half also rejects remote clients);
- then ``/pipe/`` and the pipe's name, one path segment, percent-encoded where needed; once
  decoded it is not empty, holds no ``\\``, ``/``, NUL or other control character, and the
  whole pipe path ``\\\\.\\pipe\\NAME`` is at most :data:`MAX_PIPE_PATH_CHARS` characters
  (Microsoft, "Pipe Names": any character but a backslash, 256 characters in all);
- the target starts with ``/`` and is required (the MCP path); no fragment. A query is
  kept as part of the target. Docker's other spelling, ``npipe:////./pipe/NAME`` (an
  empty host), is refused with the form to use.

A path given on its own (``--auth-url /auth/token``) is resolved against such a URL by
:func:`resolve_pipe_path`: the same pipe, that path.

HTTP over it is plain HTTP/1.1 with ``Host: localhost`` (:data:`PIPE_HOST`), as over a
Unix domain socket (``unixurl.py``). ``https`` has no pipe form: a local pipe whose server
is checked by the OS needs no TLS.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

__all__ = [
    "PIPE_SCHEME",
    "PIPE_HOST",
    "PIPE_PREFIX",
    "MAX_PIPE_PATH_CHARS",
    "is_pipe_url",
    "split_pipe_url",
    "pipe_url",
    "pipe_path",
    "resolve_pipe_path",
]

PIPE_SCHEME = "npipe"
#: The ``Host`` header sent to an app on a named pipe (a pipe has no host name).
PIPE_HOST = "localhost"
#: Every local pipe's path starts with this (``\\.\pipe\``).
PIPE_PREFIX = "\\\\.\\pipe\\"
#: Longest pipe path, ``\\.\pipe\`` included (Microsoft, "Pipe Names").
MAX_PIPE_PATH_CHARS = 256

_PREFIX = PIPE_SCHEME + "://"
_LOCAL = "./pipe/"


def is_pipe_url(url: str) -> bool:
    """Whether ``url`` uses the ``npipe`` scheme (case-insensitive); not whether it is valid."""
    return url[: len(_PREFIX)].lower() == _PREFIX


def pipe_path(name: str) -> str:
    """``NAME`` → ``\\\\.\\pipe\\NAME``, the name checked as :func:`split_pipe_url` checks it.

    Raises:
        ValueError: the name is empty, too long, or holds ``\\``, ``/`` or a control character.
    """
    if not name:
        raise ValueError("the pipe name of an npipe:// URL is empty")
    if any(ch in "\\/" or ch < " " or ch == "\x7f" for ch in name):
        raise ValueError("the pipe name of an npipe:// URL holds '\\', '/' or a control character")
    path = PIPE_PREFIX + name
    if len(path) > MAX_PIPE_PATH_CHARS:
        raise ValueError(f"the pipe path of an npipe:// URL is {len(path)} characters; Windows allows {MAX_PIPE_PATH_CHARS}")
    return path


def split_pipe_url(url: str) -> tuple[str, str]:
    """``npipe://./pipe/NAME/mcp`` → ``("\\\\.\\pipe\\NAME", "/mcp")``.

    Returns:
        the pipe's path (``\\\\.\\pipe\\`` and the decoded name) and the request target
        (path and query).

    Raises:
        ValueError: the URL breaks one of the module's rules; the message says which
            (never repeating a query, which may carry a credential).
    """
    if not is_pipe_url(url):
        raise ValueError("not an npipe:// URL")
    rest = url[len(_PREFIX):]
    if "#" in rest:
        raise ValueError("an npipe:// URL must not contain a #fragment")
    if rest.startswith("//"):
        raise ValueError("write an npipe:// URL with the host '.', as in npipe://./pipe/NAME/mcp (not npipe:////./pipe/…)")
    if rest[: len(_LOCAL)].lower() != _LOCAL:
        raise ValueError("an npipe:// URL names a pipe of this machine: npipe://./pipe/NAME/mcp (the host must be '.')")
    rest = rest[len(_LOCAL):]
    slash = rest.find("/")
    if slash < 0:
        raise ValueError("an npipe:// URL needs the MCP path after the pipe's name, as in npipe://./pipe/NAME/mcp")
    encoded, target = rest[:slash], rest[slash:]
    try:
        name = unquote(encoded, errors="strict")
    except UnicodeDecodeError:
        raise ValueError("the pipe name of an npipe:// URL is not UTF-8 once percent-decoded") from None
    path = pipe_path(name)
    if not target.isascii() or any(ch <= " " or ch == "\x7f" for ch in target):
        raise ValueError("the path of an npipe:// URL holds spaces, controls or characters that are not ASCII")
    return path, target


def pipe_url(pipe: str, path: str = "/mcp") -> str:
    """The ``npipe://`` URL of ``path`` on the pipe ``pipe`` (its name, or its whole path
    ``\\\\.\\pipe\\NAME``).

    Raises:
        ValueError: as :func:`split_pipe_url` (an empty or too long name, a path without
            a leading ``/``, say).
    """
    name = pipe[len(PIPE_PREFIX):] if pipe[: len(PIPE_PREFIX)].lower() == PIPE_PREFIX else pipe
    if not path.startswith("/"):
        raise ValueError("the path must start with '/'")
    url = _PREFIX + _LOCAL + quote(name, safe="") + path
    split_pipe_url(url)
    return url


def resolve_pipe_path(base_url: str, path: str) -> str:
    """``path`` (starting with ``/``) on the pipe of ``base_url``:
    ``npipe://./pipe/app/mcp`` and ``/auth/token`` → ``npipe://./pipe/app/auth/token``.

    Raises:
        ValueError: ``path`` does not start with ``/``, or ``base_url`` is not a valid
            ``npipe://`` URL (as :func:`split_pipe_url` says).
    """
    if not path.startswith("/"):
        raise ValueError("the path must start with '/'")
    pipe, _target = split_pipe_url(base_url)
    return pipe_url(pipe, path)
