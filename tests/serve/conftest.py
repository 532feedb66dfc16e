"""Every test here runs in-process bridges, some with a launcher: each gets its own state folder."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_state(private_state_folder: object) -> None:
    """(``private_state_folder`` in tests/conftest.py)"""
