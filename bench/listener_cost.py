"""Cost of the listener check (bridge/app/listener.py), once per new connection.

Run: python bench/listener_cost.py [N]. Prints µs per check (median of 5 runs of N checks)
for a connection to a listener in this process: uid rule only, uid + pid rule, the
auth route's address check, and psutil's backend when psutil is installed. The number of
sockets in /proc/net/tcp and of processes are printed too: the check grows with both.
"""

from __future__ import annotations

import os
import socket
import statistics
import sys
import time

from bridge.app.listener import ListenerCheck


def per_check(function, count: int) -> float:
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(count):
            function()
        runs.append((time.perf_counter() - started) / count * 1e6)
    return statistics.median(runs)


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()  # held by this process, as an app holds its side (psutil checks it)
    sockets = sum(len(open(name).read().splitlines()) - 1 for name in ("/proc/net/tcp", "/proc/net/tcp6") if os.path.exists(name))
    processes = sum(name.isdigit() for name in os.listdir("/proc"))
    print(f"{sockets} sockets in /proc/net/tcp*, {processes} processes, {len(os.listdir('/proc/self/fd'))} fds in this one")
    uid_only = ListenerCheck(lambda port: None, backend="proc")
    with_pid = ListenerCheck(lambda port: os.getpid(), backend="proc")
    print(f"proc, uid rule:        {per_check(lambda: uid_only.verify_socket(client), count):8.1f} µs per check")
    print(f"proc, uid + pid rule:  {per_check(lambda: with_pid.verify_socket(client), count):8.1f} µs per check")
    print(f"proc, address (auth):  {per_check(lambda: with_pid.verify_address('127.0.0.1', port), count):8.1f} µs per check")
    text = ListenerCheck(lambda port: os.getpid(), backend="proc-text")
    print(f"/proc/net/tcp* text:   {per_check(lambda: text.verify_socket(client), count):8.1f} µs per check")
    try:
        import psutil  # noqa: F401
    except ImportError:
        print("psutil: not installed")
        return
    started = time.perf_counter()
    with_psutil = ListenerCheck(lambda port: os.getpid(), backend="psutil")
    with_psutil.verify_socket(client)
    print(f"psutil, first check (import included): {(time.perf_counter() - started) * 1e3:.1f} ms")
    print(f"psutil, uid + pid rule: {per_check(lambda: with_psutil.verify_socket(client), max(1, count // 20)):8.1f} µs per check")


if __name__ == "__main__":
    main()
