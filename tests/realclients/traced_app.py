"""``examples/app_server.py`` as it is, plus one stderr line per MCP request it receives: what a
real client asked for through the bridge (``tests/realclients/test_realclients.py``).

A client's own check says only "Connected" (Claude Code, Gemini CLI, Qwen Code); this line
shows what stands behind it: which era's handshake reached the app (``initialize`` or
``server/discover``), whether the client then listed the tools, and the app's answer::

    TRACE POST tools/list -> 200 (mcp-protocol-version 2026-07-28)

Run it exactly like the example app (same options, same ``LISTENING`` line). The line is
written around the whole app, so a request the app refuses before the SDK sees it (a
legacy-only app's 400 to ``server/discover``) is traced too. Read with :func:`traced_methods`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
EXAMPLES = SCRIPT.parents[2] / "examples"
PREFIX = "TRACE "


class _Trace:
    """ASGI wrapper: buffer a POST's body, note its JSON-RPC method(s), pass it on unchanged,
    and print the method with the response status once the response starts."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        messages: list[Any] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        methods = _methods(b"".join(chunks))
        version = dict(scope["headers"]).get(b"mcp-protocol-version", b"").decode("latin-1") or "none"
        replay = list(messages)

        async def replayed() -> Any:
            return replay.pop(0) if replay else await receive()

        async def noted(message: Any) -> None:
            if message["type"] == "http.response.start":
                for method in methods:
                    print(f"{PREFIX}POST {method} -> {message['status']} (mcp-protocol-version {version})", file=sys.stderr, flush=True)
            await send(message)

        await self.app(scope, replayed, noted)


def _methods(body: bytes) -> list[str]:
    try:
        document = json.loads(body)
    except ValueError:
        return ["(not JSON)"]
    items = document if isinstance(document, list) else [document]
    return [
        str(item.get("method")) if "method" in item else "(response)" for item in items if isinstance(item, dict)
    ] or ["(empty)"]


def traced_methods(stderr: str) -> list[str]:
    """The ``method -> status`` of each traced request in an app's stderr, in order, e.g.
    ``["initialize -> 200", "notifications/initialized -> 202", "tools/list -> 200"]``."""
    return [
        line.split(" ", 2)[2].split(" (", 1)[0]
        for line in stderr.splitlines()
        if line.startswith(PREFIX + "POST ")
    ]


def main() -> int:
    sys.path.insert(0, str(EXAMPLES))
    import app_server

    build_app = app_server.build_app

    def traced_build_app(**options: Any) -> _Trace:
        return _Trace(build_app(**options))

    # serve() looks build_app up in its module at each start: the traced one from now on.
    setattr(app_server, "build_app", traced_build_app)  # noqa: B010 - a different return type than the module's
    return app_server.main()


if __name__ == "__main__":
    sys.exit(main())
