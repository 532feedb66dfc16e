"""The floor for a stdio process: a plain Python process that answers on stdio.

No network, no MCP library: it reads newline-delimited JSON-RPC on stdin and answers what
the benchmarks send (``initialize``, ``tools/list``, ``server/discover``; ``tools/call`` of ``echo``, ``large`` and ``size``,
with the example app's reply shapes; notifications get nothing), until stdin closes. It is
what any stdio bridge costs at least: the interpreter's own start, ``json``, and the pipes.

``--import a,b.c`` imports those modules first: the floor of a stack, e.g. ``--import
asyncio,anyio._backends._asyncio`` for anything built on asyncio and anyio.
``--asyncio-without-tls`` imports asyncio with ``ssl`` hidden first, as the bridge's serving
start does (``bridge/cli/diagnostics.py``): the floor of the bridge's stack. Other
arguments (the benchmarks pass ``--url URL``) are ignored.
"""

import json
import sys

INIT_RESULT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"tools": {"listChanged": False}},
    "serverInfo": {"name": "bare", "version": "0"},
}


#: ``tools/list`` and ``server/discover`` as the example app's catalog answers them (shapes
#: only: bench/first_list.py times the first reply to each).
TOOLS_RESULT = {"tools": [{"name": name, "description": "A tool.", "inputSchema": {"type": "object"}}
                          for name in ("echo", "slow", "progress", "large", "size", "app_info", "fail")]}
DISCOVER_RESULT = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "serverInfo": {"name": "bare", "version": "0"}}


def answer(message):
    if "id" not in message:
        return None
    method = message.get("method")
    if method == "initialize":
        return {"jsonrpc": "2.0", "id": message["id"], "result": INIT_RESULT}
    if method == "tools/list":
        return {"jsonrpc": "2.0", "id": message["id"], "result": TOOLS_RESULT}
    if method == "server/discover":
        return {"jsonrpc": "2.0", "id": message["id"], "result": DISCOVER_RESULT}
    params = message.get("params") or {}
    arguments = params.get("arguments") or {}
    tool = params.get("name")
    if tool == "echo":
        text = arguments["text"]
    elif tool == "large":
        text = "x" * int(arguments["size_bytes"])
    elif tool == "size":
        text = str(len(arguments["text"].encode("utf-8")))
    else:
        return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": f"no {method}"}}
    return {"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": text}], "isError": False}}


def main() -> None:
    if "--asyncio-without-tls" in sys.argv:
        sys.modules["ssl"] = None  # type: ignore[assignment]
        import asyncio  # noqa: F401

        del sys.modules["ssl"]
    if "--import" in sys.argv:
        import importlib

        for name in sys.argv[sys.argv.index("--import") + 1].split(","):
            importlib.import_module(name)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    for raw in stdin:
        reply = answer(json.loads(raw))
        if reply is not None:
            stdout.write(json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
            stdout.flush()


if __name__ == "__main__":
    main()
