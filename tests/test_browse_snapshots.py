"""Snapshots (pytest-textual-snapshot) of the browser's main screens on the quicksort example:
a change to what they show is seen in review (`pytest --snapshot-update` re-pins them)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cputrace.browse.app import BrowseApp, Start
from cputrace.ingest import ingest
from cputrace.store.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
SIZE = (140, 42)


@pytest.fixture(scope="module")
def quicksort(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    where = tmp_path_factory.mktemp("snapshots")
    shutil.copy(ROOT / "examples" / "quicksort.tarmac", where / "quicksort.tarmac")
    store = ingest([where / "quicksort.tarmac"], where / "quicksort.ctrace").store
    return store, ROOT / "examples" / "quicksort.elf"


def _app(quicksort: tuple[Path, Path], seq: int) -> BrowseApp:
    store, elf = quicksort
    return BrowseApp.open(Trace(store), [str(elf)], Start(seq=seq))


def test_first_screen(snap_compare, quicksort):
    assert snap_compare(_app(quicksort, 100), terminal_size=SIZE)


def test_help_screen(snap_compare, quicksort):
    assert snap_compare(_app(quicksort, 100), press=["f1"], terminal_size=SIZE)


def test_memory_pane_and_a_changed_register(snap_compare, quicksort):
    keys = ["m", *"0x8100", "enter", "escape", "down"]  # memory at the sorted string; a step in the trace
    assert snap_compare(_app(quicksort, 300), press=keys, terminal_size=SIZE)


def test_folded_call(snap_compare, quicksort):
    assert snap_compare(_app(quicksort, 700), press=["minus"], terminal_size=SIZE)


def test_call_tree(snap_compare, quicksort):
    assert snap_compare(_app(quicksort, 700), press=["f"], terminal_size=SIZE)
