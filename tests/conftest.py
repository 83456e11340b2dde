"""Shared fixtures."""

from __future__ import annotations

import shutil
from pathlib import Path

import paths
import pytest
from click.testing import CliRunner

from cputrace.cli import cli
from cputrace.ingest import IngestResult, ingest
from cputrace.store.trace import Trace

QUICKSORT = Path(__file__).resolve().parent.parent / "examples" / "quicksort.tarmac"


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


@pytest.fixture(scope="module")
def quicksort_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the example trace, ingested into its store beside it (for commands that write
    next to their input, or tests that damage it)."""
    where = tmp_path_factory.mktemp("quicksort") / "quicksort.tarmac"
    shutil.copy(QUICKSORT, where)
    assert CliRunner().invoke(cli, ["ingest", str(where)]).exit_code == 0
    return where


@pytest.fixture(scope="session")
def recorded_calls_a64(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Trace]:
    """The corpus program calls-a64.elf run under unicorn, and its trace's store: a program
    with DWARF lines and its sources in tests/corpus/src."""
    pytest.importorskip("unicorn")
    from cputrace.record import record

    elf = paths.CORPUS / "calls-a64.elf"
    where = tmp_path_factory.mktemp("calls-a64")
    recorded = record(elf, where / "calls.tarmac")
    return elf, Trace(ingest([recorded.trace], where / "calls.ctrace").store)
