"""The shared real-trace corpus is there: in CI its absence fails the run (see paths.shared)."""

from __future__ import annotations

import pytest
from paths import shared


@pytest.mark.parametrize(
    "folder", ["tarmac-trace-utilities", "tc2-etmv3", "opencsd-snapshots"]
)
def test_shared_corpus_folder_has_its_readme(folder: str) -> None:
    assert shared(folder, "README.md").is_file()
