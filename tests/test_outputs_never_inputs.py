"""An output file never replaces what it is made from: the trace's input, an --image, the program
recorded, or a file inside a store. Each command that writes a file is asked to write over its own
input (by its name, through a symbolic link) and into a store: exit 2 naming both, and every file
as it was."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cputrace.cli import cli, exits

ROOT = Path(__file__).resolve().parent.parent
QUICKSORT = ROOT / "examples" / "quicksort.tarmac"
QUICKSORT_ELF = ROOT / "examples" / "quicksort.elf"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A folder with the example trace, its program and the trace's store."""
    shutil.copy(QUICKSORT, tmp_path / "quicksort.tarmac")
    shutil.copy(QUICKSORT_ELF, tmp_path / "quicksort.elf")
    assert CliRunner().invoke(cli, ["ingest", str(tmp_path / "quicksort.tarmac")]).exit_code == 0
    return tmp_path


def _digests(folder: Path) -> dict[str, str]:
    """Every file under `folder` (and where each symbolic link points), by its path."""
    found = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            found[name] = f"-> {path.readlink()}"
        elif path.is_file():
            found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _refused(work: Path, *args: str, says: str) -> None:
    before = _digests(work)
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == exits.USAGE, result.output
    assert says in result.output and "choose another output" in result.output, result.output
    assert _digests(work) == before


def test_export_over_its_own_trace_is_refused(work):
    trace = str(work / "quicksort.tarmac")
    _refused(work, "export", trace, "--to", "tarmac", "-o", trace, says=f"is the input {trace}")


def test_export_of_a_store_over_the_input_it_was_ingested_from_is_refused(work):
    store, trace = str(work / "quicksort.tarmac.ctrace"), str(work / "quicksort.tarmac")
    _refused(work, "export", store, "--to", "csv", "--table", "memory", "-o", trace, says="is the input")


def test_export_over_its_image_is_refused(work):
    elf = str(work / "quicksort.elf")
    args = ("export", str(work / "quicksort.tarmac"), "--to", "lcov", "--image", elf, "-o", elf)
    _refused(work, *args, says=f"the output {elf} is the input {elf}")


def test_export_through_a_link_to_its_trace_is_refused(work):
    (work / "link.csv").symlink_to("quicksort.tarmac")
    args = ("export", str(work / "quicksort.tarmac"), "--to", "csv", "--table", "instructions")
    _refused(work, *args, "-o", str(work / "link.csv"), says="is the input")


def test_export_into_a_store_is_refused(work):
    """Writing over a store's manifest made the store unreadable ("damaged store")."""
    store = work / "quicksort.tarmac.ctrace"
    for target in (store / "manifest.json", store / "extra.csv"):
        args = ("export", str(store), "--to", "csv", "--table", "instructions", "-o", str(target))
        _refused(work, *args, says=f"is inside the store {store}")
    assert CliRunner().invoke(cli, ["verify", str(store)]).exit_code == exits.OK


def test_coverage_reports_over_an_input_are_refused_before_any_is_written(work):
    """The listing beside a report was written before the report was refused: none is."""
    trace, elf = str(work / "quicksort.tarmac"), str(work / "quicksort.elf")
    for report in ("--lcov", "--cobertura"):
        _refused(work, "coverage", trace, "--image", elf, report, elf, says=f"the output {elf} is the input")
        _refused(work, "coverage", trace, "--image", elf, report, trace, says="is the input")
    args = ("coverage", trace, "--image", elf, "--lcov", str(work / "q.info"), "--listing", elf)
    _refused(work, *args, says="is the input")


def test_profile_plot_into_a_store_is_refused(work):
    pytest.importorskip("matplotlib")
    store = work / "quicksort.tarmac.ctrace"
    args = ("profile", str(work / "quicksort.tarmac"), "--plot", str(store / "plot.png"))
    _refused(work, *args, says="is inside the store")


def test_record_over_its_program_is_refused(work):
    """`record prog.tarmac` (an ELF so named) wrote its default output, PROGRAM.tarmac, over itself."""
    pytest.importorskip("unicorn")
    elf = str(work / "quicksort.elf")
    _refused(work, "record", elf, "-o", elf, "--max-insns", "10", says="is the input")
    shutil.copy(QUICKSORT_ELF, work / "prog.tarmac")
    _refused(work, "record", str(work / "prog.tarmac"), "--max-insns", "10", says="is the input")


def test_browse_screenshot_over_its_trace_is_refused(work):
    pytest.importorskip("textual")
    trace = str(work / "quicksort.tarmac")
    _refused(work, "browse", trace, "--screenshot", trace, says="is the input")
