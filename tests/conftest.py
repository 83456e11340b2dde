"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import paths
import pytest

from cputrace.ingest import IngestResult, ingest


@pytest.fixture
def ingest_text(tmp_path: Path):
    """Write `text` to a file and ingest it; returns the IngestResult."""

    def run(text: str | bytes, name: str = "t.tarmac", **kwargs) -> IngestResult:
        path = tmp_path / name
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return ingest([path], tmp_path / (name + ".ctrace"), **kwargs)

    return run


@pytest.fixture(scope="session")
def open_input():
    """`paths.open_input`: a test input's store in a temporary directory, made once per run."""
    return paths.open_input
