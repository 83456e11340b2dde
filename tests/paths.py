"""Where test data lives: copies under tests/data, and the shared real-trace corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def shared(*parts: str) -> Path:
    """A file of the shared real-trace corpus; the test is skipped where it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not present: {path}")
    return path
