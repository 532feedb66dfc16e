"""Resource figures of a contender's whole process tree, from Linux /proc.

Each contender is started as the leader of a new session (``start_new_session=True``), so
its tree is every process whose session id is the leader's pid: the bootloader and the
unpacked child of the frozen one-file build, ``node`` under a launcher, anything they
spawn, even after re-parenting.
"""

from __future__ import annotations

import os

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode("latin-1")
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()  # fields from 3 (state) on


def tree(leader: int) -> list[int]:
    """Pids in the session led by ``leader`` (the leader first when alive)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(entry)
            if fields is not None and int(fields[3]) == leader:  # field 6: session
                pids.append(int(entry))
    pids.sort(key=lambda pid: pid != leader)
    return pids


def cpu_seconds(leader: int) -> float:
    """utime + stime of the live tree, in seconds."""
    total = 0
    for pid in tree(leader):
        fields = _stat_fields(str(pid))
        if fields is not None:
            total += int(fields[11]) + int(fields[12])  # fields 14, 15
    return total / TICKS


def _status_kib(pid: int, key: bytes) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_kib(leader: int) -> int:
    """Current resident memory of the tree (sum of VmRSS), in KiB."""
    return sum(_status_kib(pid, b"VmRSS:") for pid in tree(leader))


def peak_rss_kib(leader: int) -> int:
    """Sum over the tree of each process's peak resident memory (VmHWM), in KiB: an upper
    bound of the tree's peak, exact when one process holds the big buffers."""
    return sum(_status_kib(pid, b"VmHWM:") for pid in tree(leader))


def process_names(leader: int) -> list[str]:
    names = []
    for pid in tree(leader):
        try:
            with open(f"/proc/{pid}/comm") as handle:
                names.append(handle.read().strip())
        except OSError:
            pass
    return names
