"""The command line: one thin layer over the library.

Exit codes: 0 success, 1 bad input (the message names file, line or offset), 2 bad usage.
"""

from __future__ import annotations

import contextlib
import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import duckdb
import pyarrow as pa
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from . import __version__
from .errors import CputraceError
from .export.tarmac import write_tarmac
from .formats import DECODERS
from .ingest import ProgressHook, ingest
from .inputs import Fingerprint
from .trace import Trace
from .trace import open as open_trace

err = Console(stderr=True, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def _progress(total: int, label: str) -> Iterator[ProgressHook | None]:
    """A progress bar on a terminal; nothing when stderr is piped."""
    if not sys.stderr.isatty():
        yield None
        return
    columns = (
        "{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
        TimeRemainingColumn(),
    )  # fmt: skip
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def _open(trace: str) -> Trace:
    """A store, or a raw input ingested (once) into its cached store."""
    path = Path(trace)
    if not path.exists():
        raise click.BadParameter(f"{trace}: no such file or store", param_hint="TRACE")
    if path.is_dir():
        return Trace(path)
    with _progress(Fingerprint.of(path).size, f"ingesting {path.name}") as hook:
        return open_trace(path, progress=hook)


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CputraceError as exc:
            err.print(f"[red]error:[/red] {exc}", markup=True)
            sys.exit(1)
        except duckdb.Error as exc:
            err.print(f"[red]error:[/red] SQL: {exc}", markup=True)
            sys.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cputrace")
def cli() -> None:
    """Read processor instruction traces into one queryable execution history."""


@cli.command("ingest")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(), help="Store directory (default INPUT.ctrace).")
@click.option("--format", "fmt", type=click.Choice(sorted(DECODERS)), help="Input format (default: sniffed).")
@click.option("--strict", is_flag=True, help="Stop at the first record that does not parse.")
@click.option(
    "--default-isa",
    type=click.Choice(["A32", "T32", "A64"]),
    help="ISA of Tarmac instructions that do not name one (default T32, as on Cortex-M).",
)
def ingest_cmd(
    inputs: tuple[str, ...], output: str | None, fmt: str | None, strict: bool, default_isa: str | None
) -> None:
    """Decode INPUT... into a store (Parquet tables + manifest.json)."""
    options = {"default_isa": default_isa} if default_isa else {}
    total = sum(Fingerprint.of(p).size for p in inputs)

    def said_format(path: str, name: str) -> None:
        how = "given" if fmt else "sniffed"
        err.print(f"{path}: format {name} ({how})")

    with _progress(total, "ingesting") as hook:
        result = ingest(
            inputs, output, format=fmt, strict=strict, options=options, progress=hook,
            on_format=said_format,
        )  # fmt: skip
    m = result.manifest
    counts = m["counts"]
    click.echo(
        f"{result.store}: {counts['instructions']:,} instructions, {counts['registers']:,} "
        f"register writes, {counts['memory']:,} memory accesses, {counts['events']:,} events "
        f"in {m['ingest_seconds']:.2f} s"
    )
    warnings = m["warnings"]
    if warnings["count"]:
        err.print(f"{warnings['count']:,} records kept as text events with warnings, e.g.:")
        for sample in warnings["samples"][:5]:
            err.print(f"  {sample}")


@cli.command("info")
@click.argument("trace")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest and figures as JSON.")
def info_cmd(trace: str, as_json: bool) -> None:
    """Summarise a trace: instructions, time span, cores, ISAs, modes, records, warnings."""
    t = _open(trace)
    row = t.sql(
        "SELECT count(*) FILTER (WHERE NOT executed) AS failed, min(pc) AS lo, max(pc) AS hi "
        "FROM instructions"
    ).to_pylist()[0]
    m = t.manifest
    if as_json:
        click.echo(json.dumps({"store": str(t.path), **m, "condition_failed": row["failed"]}, indent=2))
        return
    counts = m["counts"]
    span = m["time"]
    inputs = m["inputs"]
    timed = span["min"] is not None
    lines = [
        ("store", str(t.path)),
        ("inputs", ", ".join(f"{Path(i['path']).name} ({i['size']:,} bytes, {i['format']})" for i in inputs)),
        ("instructions", f"{counts['instructions']:,} ({row['failed'] or 0:,} condition failed)"),
        ("pc range", f"{row['lo']:#x} .. {row['hi']:#x}" if row["lo"] is not None else "-"),
        ("time", f"{span['min']} .. {span['max']} {span['unit'] or ''}".strip() if timed else "-"),
        ("cores", ", ".join(map(str, m["cpus"])) or "-"),
        ("ISAs", ", ".join(m["isas"]) or "-"),
        ("modes", ", ".join(m["modes"]) or "-"),
        ("registers", f"{counts['registers']:,} writes"),
        ("memory", f"{counts['memory']:,} accesses"),
        ("events", f"{counts['events']:,}" + "".join(f", {k} {v:,}" for k, v in m["event_kinds"].items())),
        ("warnings", f"{m['warnings']['count']:,}"),
    ]  # fmt: skip
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        click.echo(f"{key:<{width}}  {value}")


def _where(where: str | None) -> str:
    return f"WHERE {where}" if where else ""


@cli.command("list")
@click.argument("trace")
@click.option("--where", help="SQL condition on instructions columns, e.g. \"pc between 0x8000 and 0x8100\".")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most N instructions.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "csv", "jsonl", "tarmac"]), default="text",
    show_default=True,
)  # fmt: skip
def list_cmd(trace: str, where: str | None, limit: int | None, fmt: str) -> None:
    """List instructions (with --format tarmac, also their records, as a Tarmac trace)."""
    t = _open(trace)
    query = f"SELECT * FROM instructions {_where(where)} ORDER BY seq"
    if limit is not None:
        query += f" LIMIT {limit}"
    table = t.sql(query)
    out = sys.stdout
    if fmt == "tarmac":
        write_tarmac(t, table, out)
    elif fmt == "text":
        out.write(f"{'seq':>8} {'time':>10} cpu {'pc':<10} {'opcode':>8} X isa   mode    disasm\n")
        for r in table.to_pylist():
            opcode = "--------" if r["opcode"] is None else f"{r['opcode']:0{2 * r['size']}x}"
            time = "" if r["time"] is None else str(r["time"])
            state = "E" if r["executed"] else "N"
            out.write(
                f"{r['seq']:>8} {time:>10} {r['cpu']:>3} {r['pc']:#010x} {opcode:>8} {state} "
                f"{r['isa'] or '':<5} {r['mode'] or '':<7} {r['disasm'] or ''}\n"
            )
    else:
        _write_rows(table, fmt, out)


@cli.command("sql")
@click.argument("trace")
@click.argument("query")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
    show_default=True,
)  # fmt: skip
def sql_cmd(trace: str, query: str, fmt: str) -> None:
    """Run SQL over the tables instructions, registers, memory, events."""
    t = _open(trace)
    table = t.sql(query)
    out = sys.stdout
    if fmt == "table":
        view = Table(*table.column_names)
        for row in table.to_pylist():
            view.add_row(*(_plain(v) for v in row.values()))
        Console(file=out, highlight=False).print(view)
    elif fmt == "csv":
        _write_rows(table, "csv", out)
    else:
        json.dump([{k: _json(v) for k, v in r.items()} for r in table.to_pylist()], out, indent=1)
        out.write("\n")


def _plain(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _json(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else value


def _write_rows(table: pa.Table, fmt: str, out: Any) -> None:
    """csv (header row, plain decimal integers) or one JSON object per line."""
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(table.column_names)
        for batch in table.to_batches(65536):
            for row in batch.to_pylist():
                writer.writerow([_plain(v) for v in row.values()])
    else:
        for batch in table.to_batches(65536):
            for row in batch.to_pylist():
                out.write(json.dumps({k: _json(v) for k, v in row.items()}) + "\n")


def main() -> None:
    cli(prog_name="cputrace")

