"""A squatter: a plain server, run as its own process (as another uid when asked), that
answers every request like the app and records what each connection carried, on a TCP
port or on a Unix socket. The security tests hold the bridge to sending it nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

__all__ = ["Squatter"]

_SCRIPT = textwrap.dedent(
    """
    import json, socket, sys
    if sys.argv[1] == "unix":
        s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[2])
    else:
        host, port = sys.argv[2], int(sys.argv[3])
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
    s.listen()
    print("LISTENING", flush=True)
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "result": {"token": "squatter-token", "protocolVersion": "2025-06-18",
                       "capabilities": {}, "serverInfo": {"name": "squatter", "version": "6.6.6"}}}).encode()
    while True:
        c, _ = s.accept()
        c.settimeout(2)
        data = b""
        try:
            while b"\\r\\n\\r\\n" not in data:
                more = c.recv(65536)
                if not more:
                    break
                data += more
            if data:
                c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nConnection: close\\r\\n"
                          b"Content-Length: " + str(len(body)).encode() + b"\\r\\n\\r\\n" + body)
        except OSError:
            pass
        print("CONNECTION " + data.hex(), flush=True)
        c.close()
    """
)


class Squatter:
    """Listens on ``port`` of ``host``, or on the Unix socket ``unix_path``; as ``uid`` (and
    its group) when given, with the system's Python."""

    def __init__(
        self, port: int | None = None, *, uid: int | None = None, host: str = "127.0.0.1", unix_path: Path | None = None
    ) -> None:
        where = ["unix", str(unix_path)] if unix_path is not None else ["tcp", host, str(port)]
        python = "/usr/bin/python3" if uid is not None else sys.executable
        options: dict[str, Any] = {"user": uid, "group": uid} if uid is not None else {}
        self.proc = subprocess.Popen(
            [python, "-c", _SCRIPT, *where], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd="/", **options
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == b"LISTENING\n", "the squatter could not take its address"
        self.port = port

    def stop(self) -> list[bytes]:
        """Stop it; return what each connection carried."""
        self.proc.kill()
        out, _ = self.proc.communicate(timeout=10)
        return [bytes.fromhex(line.split(" ", 1)[1]) for line in out.decode().splitlines() if line.startswith("CONNECTION")]
