"""What the command line prints: csv cells, binary input in error messages, the progress bar of
analyses and exports, the line that explains a first run's compilation."""

from __future__ import annotations

import csv
import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import numba
import pytest
from click.testing import CliRunner
from numba.core import event
from rich.console import Console

import cputrace
from cputrace.analysis.calls.contexts import CallSums
from cputrace.analysis.calls.log import Method
from cputrace.cli import cli, exits
from cputrace.cli.compiling import compile_notice, part_of
from cputrace.errors import TraceFormatError
from cputrace.store.batches import reading_progress
from cputrace.store.window import Window

ROOT = Path(__file__).resolve().parent.parent


# -- csv --------------------------------------------------------------------------------------------


def _csv(quicksort_copy: Path, *args: str, output: Path | None = None) -> list[dict[str, str]]:
    result = CliRunner().invoke(cli, [args[0], str(quicksort_copy), *args[1:]])
    assert result.exit_code == 0, result.output
    text = output.read_text() if output else result.stdout
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.parametrize(
    ("args", "column"),
    [
        (("list", "--format", "csv"), "executed"),
        (("sql", "SELECT seq, executed FROM instructions ORDER BY seq", "--format", "csv"), "executed"),
        (("export", "--to", "csv", "--table", "instructions", "-o", "{out}"), "executed"),
        (("calls", "--tree", "--format", "csv"), "recursive"),
        (("export", "--to", "csv", "--table", "frames", "-o", "{out}"), "recursive"),
    ],
)
def test_csv_booleans_are_true_and_false(quicksort_copy, tmp_path, args, column):
    out = tmp_path / "out.csv"
    rows = _csv(quicksort_copy, *(a.format(out=out) for a in args), output=out if "-o" in args else None)
    assert {row[column] for row in rows} <= {"true", "false"}
    if column == "executed":  # independently: the condition failures DuckDB counts
        trace = cputrace.open(quicksort_copy)
        failed = trace.sql("SELECT count(*) AS n FROM instructions WHERE NOT executed")
        assert sum(row[column] == "false" for row in rows) == failed.column("n")[0].as_py() == 245


# -- binary input in messages -----------------------------------------------------------------------


def test_text_is_shown_quoted():
    error = TraceFormatError("t.tarmac", "3", "a record", "R X0\t00000000")
    assert str(error) == "t.tarmac:3: expected a record, got 'R X0\\t00000000'"


@pytest.mark.parametrize(
    "got",
    [
        b"\x7fELF\x02\x01\x01\x00" + bytes(range(24)),  # as given
        (b"\x7fELF\x02\x01\x01\x00" + bytes(range(24))).decode("latin-1"),  # as a Latin-1 decoder has it
        (b"\x7fELF\x02\x01\x01\x00" + bytes(range(24))).decode("utf-8", "surrogateescape"),
    ],
)
def test_binary_is_shown_in_hex(got):
    error = TraceFormatError("a.out", "1", "a record", got)
    shown = "binary data, bytes 7f 45 4c 46 02 01 01 00 00 01 02 03 04 05 06 07 ..."
    assert str(error) == f"a.out:1: expected a record, got {shown}"


def test_binary_input_error_on_the_command_line(tmp_path):
    elf = ROOT / "examples" / "quicksort.elf"
    args = ["ingest", str(elf), "--format", "tarmac", "--strict", "-o", str(tmp_path / "s")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == exits.BAD_INPUT
    assert "got binary data, bytes 7f 45 4c 46 02 01 01 00" in result.output
    assert "\x00" not in result.output and "\\x00" not in result.output


# -- progress ---------------------------------------------------------------------------------------


def test_reading_progress_counts_the_instructions_read(quicksort_copy):
    trace = cputrace.open(quicksort_copy)
    seen: list[int] = []
    with reading_progress(seen.append):
        CallSums.for_trace(trace, Window(), Method.AUTO, None, None)
    assert sum(seen) == trace.manifest["counts"]["instructions"] == 2044
    seen.clear()
    with reading_progress(seen.append):
        CallSums.for_trace(trace, Window(100, 300), Method.AUTO, None, None)
    assert sum(seen) == 200
    CallSums.for_trace(trace, Window(), Method.AUTO, None, None)  # outside the block: not counted
    assert sum(seen) == 200


def _with_terminal_stderr(*args: str) -> tuple[int, str]:
    """`python -m cputrace ARGS` with stderr on a pseudo-terminal: its status and stderr."""
    controller, terminal = pty.openpty()
    command = [sys.executable, "-m", "cputrace", *args]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=terminal)
    os.close(terminal)
    seen = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(controller)
    return child.wait(), seen.decode(errors="replace")


@pytest.mark.parametrize(
    "args",
    [
        ("calls",),
        ("profile", "--top", "1"),
        ("export", "--to", "folded", "-o", "{tmp}/q.folded"),
        ("coverage", "--image", str(ROOT / "examples" / "quicksort.elf")),
    ],
)
def test_progress_bar_on_a_terminal_only(quicksort_copy, tmp_path, args):
    args = tuple(a.format(tmp=tmp_path) for a in args)
    status, terminal = _with_terminal_stderr(args[0], str(quicksort_copy), *args[1:])
    assert status == 0, terminal
    assert "reading" in terminal and "2,044/2,044 instructions" in terminal
    piped = subprocess.run([sys.executable, "-m", "cputrace", args[0], str(quicksort_copy), *args[1:]],
                           capture_output=True, text=True)  # fmt: skip
    assert piped.returncode == 0 and "reading" not in piped.stderr and "instructions" not in piped.stderr


# -- compiling --------------------------------------------------------------------------------------


def test_parts_named_for_compilation():
    assert part_of("cputrace.formats.tarmac.scan") == "the Tarmac decoder"
    assert part_of("cputrace.flow") == "the program-flow walk"
    assert part_of("cputrace.analysis.calls.contexts") == "call detection"
    assert part_of("cputrace.export.tarmac") == "the Tarmac writer"
    assert part_of("cputrace.formats.tarmacish") == "cputrace"
    assert part_of("numba.np.arrayobj") is None


def test_every_module_with_compiled_code_has_a_part_named():
    """A first run's notice names what compiles: no module of numba code falls through to the
    catch-all 'cputrace'."""
    src = Path(cputrace.__file__).parent
    compiled = [p for p in src.rglob("*.py") if "numba.njit" in p.read_text()]
    assert len(compiled) > 10
    for path in compiled:
        module = ".".join(("cputrace", *path.relative_to(src).with_suffix("").parts))
        assert part_of(module) != "cputrace", module


def _compiled_function(module: str, name: str):
    """A tiny function as if defined in `module`, compiled on its first call (not cached)."""
    namespace = {"__name__": module}
    exec(f"def {name}(a, b):\n    return a + b * 2\n", namespace)
    return numba.njit(namespace[name])


def test_compilation_is_told_once_a_part():
    out = io.StringIO()
    listener = compile_notice(Console(file=out, width=200))
    event.register("numba:compile", listener)
    try:
        _compiled_function("cputrace.analysis.example", "first")(1, 2)
        _compiled_function("cputrace.analysis.example", "second")(1, 2)
        _compiled_function("somewhere.else", "third")(1, 2)
        _compiled_function("cputrace.flow_example", "fourth")(1.0, 2.0)
    finally:
        event.unregister("numba:compile", listener)
    assert out.getvalue().splitlines() == [
        "compiling call detection (first run only: it is kept for later runs)...",
        "compiling cputrace (first run only: it is kept for later runs)...",
    ]
