"""Windows reserved device names: a file or folder of such a name is the device, on every
Windows version, so a bundle or server entry named so is refused on every OS (the bundle may
be installed on Windows, and clients use entry names in file and folder names).

The list is Microsoft's, "Naming Files, Paths, and Namespaces"
(https://learn.microsoft.com/en-us/windows/win32/fileio/naming-a-file): CON, PRN, AUX, NUL,
COM0 to COM9, COM¹, COM², COM³, LPT0 to LPT9, LPT¹, LPT², LPT³, "also … followed immediately
by an extension; for example, NUL.txt and NUL.tar.gz are both equivalent to NUL". CONIN$ and
CONOUT$ (the console's own files) are added, as Python's ``os.path.isreserved`` (3.13) does.
"""

from __future__ import annotations

__all__ = ["DEVICE_NAMES", "is_device_name"]

#: The reserved names, in upper case (Windows compares them in any case).
DEVICE_NAMES = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
    | {f"{port}{digit}" for port in ("COM", "LPT") for digit in "0123456789\u00b9\u00b2\u00b3"}
)


def is_device_name(name: str) -> bool:
    """Whether ``name`` is a Windows device name: one of :data:`DEVICE_NAMES` in any case,
    alone or before an extension (``nul.txt``), a stream (``con:x``), or spaces or dots
    that Windows drops (``aux .txt``, ``com1.``)."""
    stem = name.split(".", 1)[0].split(":", 1)[0].rstrip(" ")
    return stem.upper() in DEVICE_NAMES
