"""The coverage command: instruction, line, function and branch coverage of an image."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..analysis.coverage import LISTING, Coverage, compute_coverage, listing_beside
from ..export.cobertura import write_cobertura
from ..export.lcov import write_lcov
from ..export.output import check_output_file, output_file
from ..image import parse_image_spec
from ..model import Isa
from .common import cli, err, open_trace_arg, reading_bar
from .options import check_cores, resolve_window, window_options
from .params import NUMBER, OUTPUT_FILE, image_files, image_option, load_images


def _percent(covered: int, total: int) -> str:
    return f"{100 * covered / total:.1f}" if total else "-"


def print_coverage(coverage: Coverage, console: Console, show_functions: bool) -> None:
    """The summary table, the per-function table when asked for, and the code never run."""
    totals = coverage.totals()
    title = f"coverage of {coverage.image_name}"
    summary = Table("", "covered", "total", "%", title=title, title_justify="left")
    for name, covered, total in (
        ("instructions", totals.instructions_covered, totals.instructions),
        ("lines", totals.lines_covered, totals.lines),
        ("functions", totals.functions_covered, totals.functions),
        ("branch outcomes", totals.branches_covered, totals.branches),
    ):
        summary.add_row(name, str(covered), str(total), _percent(covered, total))
    console.print(summary)
    if coverage.outside:
        console.print(f"{coverage.outside:,} executed instructions lie outside the covered code")
    if show_functions:
        table = Table("function", "address", "instructions", "%", "branch outcomes", "entries")
        for f in coverage.functions():
            table.add_row(
                f.name, f"0x{f.address:x}", f"{f.covered}/{f.instructions}",
                _percent(f.covered, f.instructions), f"{f.branches_covered}/{f.branches}", str(f.entries),
            )  # fmt: skip
        console.print(table)
    cold = coverage.uncovered()
    if cold:
        shown = ", ".join(f"0x{lo:x}-0x{hi:x}" for lo, hi in cold[:8])
        more = f" and {len(cold) - 8} more" if len(cold) > 8 else ""
        console.print(f"never executed: {shown}{more}")


def write_reports(
    coverage: Coverage,
    lcov_path: str | None,
    cobertura_path: str | None,
    test_name: str,
    inputs: Sequence[str | os.PathLike[str]] = (),
) -> None:
    """--lcov and --cobertura (each whole or not at all), and the object-code listing they name;
    none of them may replace one of `inputs`, the files the coverage was computed from (each is
    checked before any is written)."""
    listing = coverage.listing if lcov_path or cobertura_path else None
    for path in (listing, lcov_path, cobertura_path):
        if path:
            check_output_file(path, inputs)
    if listing:
        with output_file(listing, inputs=inputs) as out:
            out.write(coverage.listing_text())
        listed = f"wrote {coverage.listing} (object-code listing for code without DWARF lines)"
        err.print(listed, markup=False)
    if lcov_path:
        with output_file(lcov_path, inputs=inputs) as out:
            write_lcov(coverage, out, test_name)
        err.print(f"wrote {lcov_path}", markup=False)
    if cobertura_path:
        with output_file(cobertura_path, "wb", inputs=inputs) as out:
            write_cobertura(coverage, out)
        err.print(f"wrote {cobertura_path}", markup=False)


def coverage_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """What to cover and where to report it, as `coverage` and `batch coverage` take it: --range,
    --isa, --cpu, --lcov, --cobertura and --listing."""
    report = OUTPUT_FILE
    options = (
        click.option(
            "--range", "address_range", type=(NUMBER, NUMBER), metavar="ADDR LEN",
            help="Object-code coverage of LEN bytes from ADDR instead of every function.",
        ),
        click.option(
            "--isa", type=click.Choice(["A32", "T32", "A64", "SPARC"]),
            help="Instruction set of range bytes that no mapping symbol describes.",
        ),
        click.option("--cpu", "cpus", type=int, multiple=True, help="Only these cores (default all)."),
        click.option("--lcov", "lcov_path", type=report, help="Write an lcov tracefile (.info)."),
        click.option("--cobertura", "cobertura_path", type=report, help="Write Cobertura XML."),
        click.option(
            "--listing", "listing_path", type=report,
            help="Where to write the object-code listing that reports name for code without DWARF lines "
            "(default: the first report's name + .lst).",
        ),
    )  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


def listing_for(lcov_path: str | None, cobertura_path: str | None, listing_path: str | None) -> str:
    """Where the object-code listing goes: --listing, else beside the first report, else LISTING."""
    reports = [p for p in (lcov_path, cobertura_path) if p]
    return listing_path or (str(listing_beside(reports[0])) if reports else LISTING)


@cli.command("coverage")
@click.argument("trace")
@image_option("The program image (ELF with symbols; DWARF gives line coverage). Repeatable.", required=True)
@coverage_options
@click.option("--functions/--no-functions", default=True, help="Show the per-function table.")
@window_options
def coverage_cmd(
    trace: str,
    images: tuple[str, ...],
    address_range: tuple[int, int] | None,
    isa: str | None,
    cpus: tuple[int, ...],
    lcov_path: str | None,
    cobertura_path: str | None,
    listing_path: str | None,
    functions: bool,
    window_spec: tuple,
) -> None:
    """Instruction, line, function and branch coverage of an image by a trace.

    A conditional branch counts as two outcomes, taken and not taken, each covered when the
    trace shows it. Reports: --lcov (for genhtml) and --cobertura; a summary is printed.
    """
    image = load_images(images)
    assert image is not None  # required=True
    listing = listing_for(lcov_path, cobertura_path, listing_path)
    t = open_trace_arg(trace)
    check_cores(t, cpus)
    window = resolve_window(t, window_spec)
    with reading_bar([t], window):
        coverage = compute_coverage(
            t,
            image,
            image_name=parse_image_spec(images[0])[0].name,
            address_range=address_range,
            default_isa=Isa[isa] if isa else None,
            cpus=set(cpus) or None,
            window=window,
            listing=listing,
        )
    sources = [*t.input_paths, *image_files(images)]
    write_reports(coverage, lcov_path, cobertura_path, Path(trace).name, sources)
    print_coverage(coverage, Console(file=sys.stdout, highlight=False, markup=False), functions)
