"""Linux's view of TCP sockets, parsed: ``/proc/net/tcp[6]`` lines, and the listeners a
connection can have reached. Pure: text in, values out.

Source: the kernel's ``tcp4_seq_show``/``tcp6_seq_show`` formats (``net/ipv4/tcp_ipv4.c``,
``net/ipv6/tcp_ipv6.c``). ``sockdiag.py`` returns the same :class:`TcpEntry` values from
netlink; ``listener.py`` decides on them.
"""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["Address", "TcpEntry", "parse_proc_net_tcp", "find_listeners", "normal_address", "LISTEN"]

#: An IP address of either family.
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: ``st`` of a listening socket in ``/proc/net/tcp`` (``TCP_LISTEN``).
LISTEN = 0x0A


class TcpEntry(NamedTuple):
    """One line of ``/proc/net/tcp[6]``: addresses (IPv4-mapped IPv6 shown as IPv4), state, owner.
    (A named tuple: a dataclass loads :mod:`inspect` and :mod:`ast` at every start.)"""

    local: tuple[Address, int]
    remote: tuple[Address, int]
    state: int
    uid: int
    inode: int


def _address(text: str, byteorder: str) -> tuple[Address, int]:
    host, port = text.split(":")
    # The kernel prints each 32-bit word of the address as a native integer (%08X).
    raw = b"".join(int(host[i : i + 8], 16).to_bytes(4, byteorder) for i in range(0, len(host), 8))  # type: ignore[arg-type]
    address = ipaddress.ip_address(raw)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address, int(port, 16)


def parse_proc_net_tcp(text: str, *, local_port: int | None = None, byteorder: str = sys.byteorder) -> list[TcpEntry]:
    """Parse the text of ``/proc/net/tcp`` or ``/proc/net/tcp6`` (header line and all).

    Pure. Lines that do not parse are skipped (a kernel may append columns; never fewer).
    ``local_port``: keep only the sockets bound to that port (a cheap text test first, so
    a machine with thousands of sockets costs little). Source: the kernel's
    ``tcp4_seq_show``/``tcp6_seq_show`` formats.
    """
    entries = []
    wanted = None if local_port is None else f":{local_port:04X} "
    for line in text.splitlines()[1:]:
        if wanted is not None and wanted not in line:
            continue
        fields = line.split()
        if len(fields) < 10 or (wanted is not None and not fields[1].endswith(wanted[:-1])):
            continue
        try:
            entries.append(
                TcpEntry(
                    local=_address(fields[1], byteorder),
                    remote=_address(fields[2], byteorder),
                    state=int(fields[3], 16),
                    uid=int(fields[7]),
                    inode=int(fields[9]),
                )
            )
        except ValueError:
            continue
    return entries


def find_listeners(entries: Iterable[TcpEntry], address: Address, port: int) -> list[TcpEntry]:
    """The listening sockets a connection to ``address:port`` can have reached: those bound
    to exactly that address if any, else the wildcard ones (``0.0.0.0``, ``::``)."""
    listening = [entry for entry in entries if entry.state == LISTEN and entry.local[1] == port]
    exact = [entry for entry in listening if entry.local[0] == address]
    if exact:
        return exact
    return [
        entry for entry in listening
        if entry.local[0].is_unspecified and (entry.local[0].version == 6 or address.version == 4)
    ]


def normal_address(address: str) -> Address:
    """``address`` as an IP address: a zone id dropped, IPv4-mapped IPv6 shown as IPv4."""
    parsed = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped
    return parsed
