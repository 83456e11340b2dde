"""The example inputs: the LEON ones are what their script writes and decode as the README
says, and the README's Examples table names every file of examples/ and only files that exist."""

from __future__ import annotations

import re
from pathlib import Path

import cputrace
from cputrace.ingest import ingest
from examples.make_leon_examples import PROGRAM, examples

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
ABOUT_EXAMPLES = {"README.md", "NOTICE.md", "LICENSE-tarmac-trace-utilities.txt", "make_leon_examples.py"}


def test_the_leon_examples_are_what_their_script_writes() -> None:
    made = examples()
    assert set(made) == {path.name for path in EXAMPLES.glob("leon-*")}
    for name, content in made.items():
        assert (EXAMPLES / name).read_bytes() == content, name


def test_the_filtered_leon_example_rebuilds_the_end_of_the_unfiltered_one(tmp_path: Path) -> None:
    """As the README says: the rows rebuilt from leon-cf.txt are the last rows of leon-itb.bin
    (traced ones with the same time tags)."""
    whole = ingest([EXAMPLES / "leon-itb.bin"], tmp_path / "a.ctrace", format="leon-itb", strict=True)
    rebuilt = ingest([EXAMPLES / "leon-cf.txt"], tmp_path / "b.ctrace", strict=True, images=[PROGRAM])
    tail = cputrace.Trace(whole.store).instructions.to_pylist()[-87:]
    rows = cputrace.Trace(rebuilt.store).instructions.to_pylist()
    assert [(r["pc"], r["opcode"], r["executed"]) for r in rows] == [
        (r["pc"], r["opcode"], r["executed"]) for r in tail
    ]
    assert [r["time"] in (None, w["time"]) for r, w in zip(rows, tail, strict=True)] == [True] * 87


def listed_examples() -> list[Path]:
    """The files of the README's Examples table: a name without a folder is in the folder of
    its row's first file."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("\n## Examples\n") :].split("\n## ", 2)[1]
    files = []
    for row in section.splitlines():
        names = re.findall(r"`([^`]+)`", row.split("|")[1]) if row.startswith("| `") else []
        for name in names:
            folder = Path(names[0]).parent if "/" not in name else Path()
            files += sorted(ROOT.glob(str(folder / name))) or [ROOT / folder / name]
    return files


def test_the_readme_lists_every_example_and_each_exists() -> None:
    listed = listed_examples()
    assert [path for path in listed if not path.exists()] == []
    shipped = {path for path in EXAMPLES.iterdir() if path.name not in ABOUT_EXAMPLES and path.is_file()}
    assert shipped - set(listed) == set()
