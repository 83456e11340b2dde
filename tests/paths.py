"""Where test data lives: copies under tests/data, and the shared real-trace corpus."""

from __future__ import annotations

import atexit
import os
import tempfile
from pathlib import Path

import pytest

from cputrace.ingest import ingest
from cputrace.store.trace import Trace

DATA = Path(__file__).parent / "data"
CORPUS = Path(__file__).parent / "corpus"  # small programs with their sources (corpus/src)
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def shared(*parts: str) -> Path:
    """A file of the shared real-trace corpus. Where it is absent the test is skipped, except
    in CI (`CI` set), where a green run must include the real traces: there it fails."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"shared data not present in CI: {path}")
        pytest.skip(f"shared data not present: {path}")
    return path


_STORES = tempfile.TemporaryDirectory(prefix="cputrace-test-stores-")
atexit.register(_STORES.cleanup)
_OPENED: dict[tuple, Trace] = {}


def open_input(path: Path, **kwargs) -> Trace:
    """`cputrace.open` for a test input, with its store in a temporary directory (never beside
    the input: the shared corpus and the repository stay untouched), made once per run."""
    key = (Path(path).resolve(), repr(sorted(kwargs.items())))
    if key not in _OPENED:
        store = Path(_STORES.name) / f"{len(_OPENED)}-{Path(path).name}.ctrace"
        _OPENED[key] = Trace(ingest([path], store, **kwargs).store)
    return _OPENED[key]
