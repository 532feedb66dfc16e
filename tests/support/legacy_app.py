"""A legacy-only app for the era translation tests (a 2026-07-28 client with an app of
the 2025 era: docs/behaviour.md, "Protocol eras")."""

from __future__ import annotations

import json
from typing import Any

import httpx

from support.helpers import json_response
from support.mcp_app import McpApp

__all__ = ["MODERN", "META_VERSION", "CLIENT_INFO", "META", "LegacyOnlyApp"]

MODERN = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO = {"name": "claude-code", "version": "3.0"}
META = {META_VERSION: MODERN, "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}



class LegacyOnlyApp(McpApp):
    """A stateful app of the 2025 era (``McpApp``) that knows nothing of 2026-07-28: it
    refuses ``server/discover`` as ``refusal`` says, refuses any other request without a
    session as the official SDK v1 server does (400 "Missing session ID"), and fails the
    test if a request reaches it with the 2026 era's ``_meta`` or headers inside a session."""

    def __init__(self, refusal: str = "-32601", **kwargs: Any) -> None:
        super().__init__(capabilities={"tools": {"listChanged": True}}, server_name="legacy-app", **kwargs)
        self.refusal = refusal

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            message = json.loads(request.content)
            meta = message.get("params", {}).get("_meta", {}) if isinstance(message.get("params"), dict) else {}
            modern_request = META_VERSION in meta or "mcp-method" in request.headers
            if modern_request and "mcp-session-id" not in request.headers:
                self.requests.append(request)
                if message.get("method") == "server/discover" and self.refusal == "-32601":
                    return json_response({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "Method not found"}})
                if self.refusal == "405":
                    return httpx.Response(405)
                return json_response({"jsonrpc": "2.0", "id": "server-error", "error": {"code": -32600, "message": "Bad Request: Missing session ID"}}, 400)
            assert not modern_request, f"a 2026-07-28 request reached the legacy session: {message}"
        return await super().__call__(request)
