"""The batch commands: many traces at once on a Dask cluster (ingest, diff, coverage, profile).

Each command runs one task per input (or pair) on the cluster and prints what `ingest`, `diff`,
`coverage` and `profile` print, for the whole batch. An input that fails is reported (its
message names it) and the others go on; the command then exits 1.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

import click
import pyarrow as pa
from rich.console import Console

from ..analysis.calls.log import Method
from ..analysis.diff import DiffOptions
from ..batch.cluster import connect
from ..batch.coverage import UNITS, TraceShare, merged_coverage
from ..batch.diff import PairDiff, diff_pairs, pairs_by_name, pairs_from_csv
from ..batch.ingest import ingest_many
from ..batch.profile import summed_profile
from ..batch.tasks import SHARED_STORAGE, Failed
from ..image import parse_image_spec
from ..model import Isa
from . import exits
from .analysis import method_option, print_profile, profile_table_options
from .common import cli, err, plain_table, progress, write_rows
from .coverage import coverage_options, listing_for, print_coverage, write_reports
from .diff import diff_options
from .ingest import decoder_params, say_ingested
from .params import cluster_options, image_files, image_option


@cli.group("batch")
def batch_group() -> None:
    """Many traces at once on a Dask cluster: ingest, diff, coverage, profile.

    Work runs on a local cluster of this machine's cores (--workers N to choose), or on a
    running Dask cluster (--scheduler ADDRESS, --scheduler-file FILE). Inputs and stores must be
    on paths every worker can read (a shared file system).
    """


@contextlib.contextmanager
def _cluster(cluster: dict[str, Any], tasks: int, label: str) -> Iterator[tuple[Any, Callable[[int], None]]]:
    """A client of the chosen cluster and a progress hook over the job's `tasks`."""

    def dashboard(link: str) -> None:
        err.print(f"dashboard: {link}", markup=False)

    with connect(**cluster, on_dashboard=dashboard) as client, progress(tasks, label, unit="tasks") as hook:
        yield client, hook or (lambda _n: None)


def _report(failed: Sequence[Failed], of: int, what: str) -> None:
    """Each failure's message, and exit 1 when there was one."""
    for failure in failed:
        err.print(f"error: {failure.message}", markup=False, style="red")
    if failed:
        err.print(f"{len(failed):,} of {of:,} {what} failed", markup=False)
        sys.exit(exits.BAD_INPUT)


@batch_group.command("ingest", epilog=f"Stores are written by the workers: {SHARED_STORAGE}.")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "-d", "--output-dir", type=click.Path(file_okay=False),
    help="Folder of the stores (NAME.ctrace each; default: INPUT.ctrace beside each input).",
)  # fmt: skip
@decoder_params
@cluster_options
def batch_ingest_cmd(
    inputs: tuple[str, ...], output_dir: str | None, fmt: str | None, strict: bool, images: tuple[str, ...],
    options: dict[str, object], cluster: dict[str, Any],
) -> None:  # fmt: skip
    """Ingest each INPUT into a store of its own, side by side on the cluster.

    Sniffing, options and --image are those of `ingest`; an input that fails is reported and
    the others go on (exit 1 when any failed).
    """
    with _cluster(cluster, len(inputs), "ingesting") as (client, hook):
        results = ingest_many(
            client, inputs, output_dir, format=fmt, strict=strict, options=options, images=images,
            on_done=hook,
        )  # fmt: skip
    for result in results:
        if not isinstance(result, Failed):
            say_ingested(result.store, result.manifest)
    _report([r for r in results if isinstance(r, Failed)], len(inputs), "inputs")


def _write_records(table: pa.Table, fmt: str, out: TextIO) -> None:
    """A batch's table in csv (a header row) or json (one array of objects, a row each)."""
    if fmt == "csv":
        write_rows(table, "csv", out)
    else:
        json.dump(table.to_pylist(), out, indent=1)
        out.write("\n")


_PAIR_COLUMNS = pa.schema(
    [("status", pa.string()), ("divergences", pa.int64()), ("cpu", pa.int64()), ("a_seq", pa.int64()),
     ("b_seq", pa.int64()), ("pc", pa.uint64()), ("kinds", pa.string()), ("a", pa.string()),
     ("b", pa.string()), ("paired", pa.int64()), ("only_a", pa.int64()), ("only_b", pa.int64()),
     ("differs", pa.string())]
)  # fmt: skip
"""The table of `batch diff`: one row per pair, the first divergence's place and what differs."""


def _pair_row(result: PairDiff | Failed) -> dict[str, Any]:
    if isinstance(result, Failed):
        a, _, b = result.name.partition(" and ")
        return {"status": "failed", "a": a, "b": b or None, "differs": result.message}
    return {
        "status": "identical" if result.same else "divergent", "divergences": result.divergences,
        "cpu": result.cpu, "a_seq": result.a_seq, "b_seq": result.b_seq, "pc": result.pc,
        "kinds": ",".join(result.kinds) or None, "a": result.a, "b": result.b, "paired": result.paired,
        "only_a": result.only_a, "only_b": result.only_b, "differs": result.detail or None,
    }  # fmt: skip


@batch_group.command("diff")
@click.argument("a", required=False)
@click.argument("b", required=False)
@click.option(
    "--pairs", "pairs_csv", type=click.Path(exists=True, dir_okay=False),
    help="A CSV file of pairs, `a,b` per row (paths relative to the file's folder), instead of A and B.",
)  # fmt: skip
@diff_options
@click.option("--exit-code", is_flag=True, help="Exit with status 3 when any pair differs.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "csv", "json"]), default="text", show_default=True
)
@cluster_options
def batch_diff_cmd(
    a: str | None, b: str | None, pairs_csv: str | None, options: DiffOptions, exit_code: bool, fmt: str,
    cluster: dict[str, Any],
) -> None:  # fmt: skip
    """Compare many pairs of traces (RTL against model): A and B are two folders or globs whose
    traces are paired by name, or --pairs names the pairs.

    One row per pair: identical or not, the first divergence (cpu, seq in A and in B, pc, what
    differs) and the number of divergences, divergent pairs first. A name only one side has
    is a failure (exit 1).
    """
    if (pairs_csv is None) == (a is None or b is None) or (pairs_csv is not None and a is not None):
        raise click.UsageError("give two folders or globs A and B, or --pairs FILE")
    if pairs_csv is not None:
        pairs, unmatched = pairs_from_csv(pairs_csv), []
    else:
        assert a is not None and b is not None
        pairs, unmatched = pairs_by_name(a, b)
    with _cluster(cluster, len(pairs), "comparing") as (client, hook):
        results: list[PairDiff | Failed] = diff_pairs(client, pairs, options, on_done=hook) if pairs else []
    rank = {"divergent": 0, "failed": 1, "identical": 2}
    rows = sorted((_pair_row(r) for r in [*results, *unmatched]), key=lambda row: rank[row["status"]])
    table = pa.Table.from_pylist(rows, schema=_PAIR_COLUMNS)
    out = sys.stdout
    if fmt != "text":
        _write_records(table, fmt, out)
    else:
        plain_table(table.drop_columns(["paired", "only_a", "only_b"]), out, hex_columns=("pc",))
        counts = {status: sum(1 for row in rows if row["status"] == status) for status in rank}
        said = ", ".join(f"{n:,} {status}" for status, n in counts.items())
        out.write(f"{len(rows):,} pairs: {said}\n")
    _report([r for r in [*results, *unmatched] if isinstance(r, Failed)], len(rows), "pairs")
    if exit_code and any(row["status"] == "divergent" for row in rows):
        sys.exit(exits.DIFFERENT)


@batch_group.command("coverage")
@click.argument("traces", nargs=-1, required=True)
@image_option("The program image the traces ran (ELF with symbols; DWARF gives lines). Repeatable.",
              required=True)  # fmt: skip
@coverage_options
@click.option("--functions/--no-functions", default=False, help="Show the per-function table.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "csv", "json"]), default="text", show_default=True,
    help="text: the summary and the traces' table; csv, json: the traces' table (what each ran, and "
    "the instructions, lines, functions and branch outcomes only it covered).",
)  # fmt: skip
@cluster_options
def batch_coverage_cmd(
    traces: tuple[str, ...], images: tuple[str, ...], address_range: tuple[int, int] | None, isa: str | None,
    cpus: tuple[int, ...], lcov_path: str | None, cobertura_path: str | None, listing_path: str | None,
    functions: bool, fmt: str, cluster: dict[str, Any],
) -> None:  # fmt: skip
    """Coverage of one image by many traces together (a test suite), and what each trace covered
    that no other did (instructions, lines, functions, branch outcomes).

    --lcov and --cobertura write the suite's coverage as `coverage` writes one trace's.
    """
    listing = listing_for(lcov_path, cobertura_path, listing_path)
    image_name = parse_image_spec(images[0])[0].name
    with _cluster(cluster, len(traces), "covering") as (client, hook):
        merged = merged_coverage(
            client, traces, images, image_name=image_name, address_range=address_range,
            default_isa=Isa[isa] if isa else None, cpus=set(cpus) or None, listing=listing, on_done=hook,
        )  # fmt: skip
    if merged.coverage is not None:
        write_reports(merged.coverage, lcov_path, cobertura_path, "batch", [*traces, *image_files(images)])
    shares = _shares_table(merged.shares)
    out = sys.stdout
    if fmt != "text":
        _write_records(shares, fmt, out)
    elif merged.coverage is not None:
        print_coverage(merged.coverage, Console(file=out, highlight=False, markup=False), functions)
        out.write(f"\n{len(merged.shares):,} traces: instructions each ran, and what only it covered\n")
        plain_table(shares, out)
    _report(merged.failed, len(traces), "traces")


def _shares_table(shares: Sequence[TraceShare]) -> pa.Table:
    """One row per trace: the instructions it ran, and per unit what no other trace covered."""
    columns: dict[str, list[Any]] = {
        "trace": [share.trace for share in shares],
        "instructions": [share.instructions for share in shares],
    }
    columns |= {f"only_{unit.replace(' ', '_')}": [share.only[unit] for share in shares] for unit in UNITS}
    types = [(name, pa.string() if name == "trace" else pa.int64()) for name in columns]
    return pa.table(columns, schema=pa.schema(types))


@batch_group.command("profile")
@click.argument("traces", nargs=-1, required=True)
@image_option()
@method_option
@profile_table_options
@cluster_options
def batch_profile_cmd(
    traces: tuple[str, ...], images: tuple[str, ...], method: str, tables: tuple[str, ...], top: int,
    fmt: str, cluster: dict[str, Any],
) -> None:  # fmt: skip
    """A flat profile of many traces summed: the tables of `profile` (functions, source lines,
    addresses, instruction mix, hot blocks), each row added up over the traces."""
    with _cluster(cluster, len(traces), "profiling") as (client, hook):
        summed = summed_profile(client, traces, images, Method(method), on_done=hook)
    if summed.profile is not None:
        if fmt == "text":
            click.echo(f"# {summed.traces:,} traces summed")
        print_profile(summed.profile, tables, fmt, top, has_image=bool(images))
    _report(summed.failed, len(traces), "traces")
