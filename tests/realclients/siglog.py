#!/usr/bin/env python3
"""A tiny MCP stdio server that records how its client ends it (the clients' kill patterns).

Run by an AI client as its MCP server: ``siglog.py LOG_PATH [--silent-initialize]``. It answers
``initialize`` (echoing the client's protocol version; never, with ``--silent-initialize``, which
shows how long the client waits for it) and ``tools/list`` (one tool, ``echo``), refuses
every other request with -32601, and appends one JSON object per event to LOG_PATH:

- ``start``: pid, process group, parent, working folder and the names of the environment
  variables the client passed;
- ``recv``: each method received;
- ``signal``: SIGINT, SIGTERM, SIGHUP, SIGQUIT or SIGPIPE, which it ignores so that the
  client's whole escalation shows; ``group-member-signal``: the same seen by a child in its
  process group (a signal to the group, not only to the server);
- ``stdin-eof``: the client closed stdin;
- ``dead``: the server is gone (SIGKILL cannot be caught: a watcher outside the process
  group polls ``/proc`` every millisecond, Linux only).

Every event carries ``t``, seconds since the server started (``time.monotonic``).
Standard library only; POSIX only (fork, process groups).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

if sys.platform == "win32":
    sys.exit("siglog.py runs on POSIX only (fork, process groups)")

LOG_PATH = sys.argv[1]
SILENT_INITIALIZE = "--silent-initialize" in sys.argv[2:]
T0 = time.monotonic()
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE)


def log(**event: object) -> None:
    event["t"] = round(time.monotonic() - T0, 4)
    with open(LOG_PATH, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(event) + "\n")


def group_member() -> None:
    """A child in the server's process group: notes any signal sent to the whole group."""

    def note(number: int, _frame: object) -> None:
        log(ev="group-member-signal", sig=signal.Signals(number).name)

    for number in SIGNALS:
        signal.signal(number, note)
    while True:
        time.sleep(1)


def watcher(pid: int, member: int) -> None:
    """Outside the process group (its own session): notes when `pid` is gone."""
    os.setsid()
    if os.fork():
        os._exit(0)
    while True:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            state = "X"
        if state in ("Z", "X"):
            log(ev="dead")
            try:
                os.kill(member, signal.SIGKILL)
            except OSError:
                pass
            os._exit(0)
        time.sleep(0.001)


def reply(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def main() -> None:
    pid = os.getpid()
    log(ev="start", pid=pid, pgid=os.getpgid(0), ppid=os.getppid(), cwd=os.getcwd(), env=sorted(os.environ))
    member = os.fork()
    if member == 0:
        group_member()
    if os.fork() == 0:
        watcher(pid, member)
    for number in SIGNALS:
        signal.signal(number, lambda number, _frame: log(ev="signal", sig=signal.Signals(number).name))
    while True:
        line = sys.stdin.readline()
        if not line:
            log(ev="stdin-eof")
            while True:
                time.sleep(1)
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method = message.get("method")
        log(ev="recv", method=method)
        if "id" not in message or method is None:
            continue
        if method == "initialize" and SILENT_INITIALIZE:
            continue
        if method == "initialize":
            version = (message.get("params") or {}).get("protocolVersion", "2025-06-18")
            result = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "siglog", "version": "1"},
            }
            reply({"id": message["id"], "result": result})
        elif method == "tools/list":
            tool = {"name": "echo", "description": "echo", "inputSchema": {"type": "object"}}
            reply({"id": message["id"], "result": {"tools": [tool]}})
        elif method == "ping":
            reply({"id": message["id"], "result": {}})
        else:
            reply({"id": message["id"], "error": {"code": -32601, "message": f"{method} is not offered"}})


if __name__ == "__main__":
    main()
