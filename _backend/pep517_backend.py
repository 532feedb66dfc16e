"""The build backend: setuptools' own, after a check that the Python is new enough.

pip reads ``requires-python`` (pyproject) only once it has the project's metadata, and an
old pip on an old Python can spend many minutes backtracking through the dependencies
before it says why nothing fits (pip 23.0.1 on Python 3.9 was seen to). This module is
imported by pip (PEP 517, ``backend-path``) before any metadata is built, so a Python older
than :data:`REQUIRES_PYTHON` stops the install within seconds, with a message that says
what to do. Everything else is ``setuptools.build_meta``.
"""

import sys

#: The oldest Python the project supports: pyproject's ``requires-python`` (a test checks they agree).
REQUIRES_PYTHON = (3, 11)

if tuple(sys.version_info[:2]) < REQUIRES_PYTHON:
    found = ".".join(str(part) for part in tuple(sys.version_info)[:3])
    raise SystemExit(
        f"mcp-app-bridge needs Python >= {REQUIRES_PYTHON[0]}.{REQUIRES_PYTHON[1]}, "
        f"and this is Python {found} ({sys.executable}). "
        f"Install Python {REQUIRES_PYTHON[0]}.{REQUIRES_PYTHON[1]} or newer and make the venv with it, for example "
        "`python3.12 -m venv .venv` (on macOS, /usr/bin/python3 is 3.9: take Python from python.org or Homebrew)."
    )

from setuptools.build_meta import *  # noqa: E402, F403 (the backend's hooks, unchanged)
from setuptools.build_meta import __all__  # noqa: E402, F401
