"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from cputrace.ingest import IngestResult, ingest
from cputrace.trace import Trace


@pytest.fixture
def ingest_text(tmp_path: Path):
    """Write `text` to a file and ingest it; returns the IngestResult."""

    def run(text: str | bytes, name: str = "t.tarmac", **kwargs) -> IngestResult:
        path = tmp_path / name
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return ingest([path], tmp_path / (name + ".ctrace"), **kwargs)

    return run


@pytest.fixture(scope="session")
def open_input(tmp_path_factory):
    """`cputrace.open` for an input whose store must not land beside it (the shared corpus is
    read-only by convention): the store goes to a session directory, made once per input."""
    stores = tmp_path_factory.mktemp("stores")
    opened: dict[tuple, Trace] = {}

    def run(path: Path, **kwargs) -> Trace:
        key = (Path(path).resolve(), repr(sorted(kwargs.items())))
        if key not in opened:
            store = stores / f"{len(opened)}-{Path(path).name}.ctrace"
            opened[key] = Trace(ingest([path], store, **kwargs).store)
        return opened[key]

    return run
