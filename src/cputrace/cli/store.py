"""Commands that read a store: info, list, sql."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..errors import UsageError
from ..store.sql import sql_condition
from .common import cli, json_default, json_finite, open_trace_arg, plain, write_rows
from .params import image_option, load_images


@cli.command("info")
@click.argument("trace")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest and figures as JSON.")
def info_cmd(trace: str, as_json: bool) -> None:
    """Summarise a trace: instructions, time span, cores, ISAs, modes, records, warnings."""
    t = open_trace_arg(trace)
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


def _one_condition(text: str | None) -> str:
    """A --where text as one checked SQL expression (not a way to run more statements)."""
    if text is None:
        return "TRUE"
    try:
        return sql_condition(text)
    except UsageError as exc:
        raise click.BadParameter(str(exc)) from None


@cli.command("list")
@click.argument("trace")
@click.option(
    "--where", "condition", default=None, callback=lambda ctx, param, text: _one_condition(text),
    help="SQL condition (one expression) on instructions columns, e.g. \"pc between 0x8000 and 0x8100\".",
)  # fmt: skip
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most N instructions.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "csv", "jsonl", "tarmac"]), default="text",
    show_default=True,
)  # fmt: skip
@image_option("Program image for the disassembly of instructions the trace gave no opcode for.")
def list_cmd(trace: str, condition: str, limit: int | None, fmt: str, images: tuple[str, ...]) -> None:
    """List instructions (with --format tarmac, also their records, as a Tarmac trace).

    Instructions the input gave no disassembly for get it from their opcode (or the image).
    """
    # Imported here, not with the module: `info` and `sql` need neither capstone nor numba.
    from ..export.tarmac import write_tarmac
    from ..isa import Disassembler, fill_disasm

    t = open_trace_arg(trace)
    query = f"SELECT * FROM instructions WHERE {condition} ORDER BY seq"
    if limit is not None:
        query += f" LIMIT {min(limit, t.manifest['counts']['instructions'])}"  # DuckDB's LIMIT is 64-bit
    image = load_images(images)
    table = fill_disasm(t.sql(query), Disassembler(image))
    out = sys.stdout
    if fmt == "tarmac":
        write_tarmac(t, table, out)
    elif fmt == "text":
        out.write(f"{'seq':>8} {'time':>10} cpu {'pc':<10} {'opcode':>8} X isa   mode    disasm\n")
        for r in table.to_pylist():
            opcode = "--------" if r["opcode"] is None else f"{r['opcode']:0{2 * r['size']}x}"
            time = "" if r["time"] is None else str(r["time"])
            state = "?" if r["executed"] is None else "E" if r["executed"] else "N"
            out.write(
                f"{r['seq']:>8} {time:>10} {r['cpu']:>3} {r['pc']:#010x} {opcode:>8} {state} "
                f"{r['isa'] or '':<5} {r['mode'] or '':<7} {r['disasm'] or ''}\n"
            )
    else:
        write_rows(table, fmt, out)


@cli.command("sql")
@click.argument("trace")
@click.argument("query")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
    show_default=True,
)  # fmt: skip
def sql_cmd(trace: str, query: str, fmt: str) -> None:
    """Run SQL over the tables instructions, registers, memory, events."""
    t = open_trace_arg(trace)
    table = t.sql(query)
    out = sys.stdout
    if fmt == "table":
        view = Table(*table.column_names)
        for row in table.to_pylist():
            view.add_row(*(plain(v) for v in row.values()))
        Console(file=out, highlight=False, markup=False).print(view)  # cells are data, not markup
    elif fmt == "csv":
        write_rows(table, "csv", out)
    else:
        json.dump(json_finite(table.to_pylist()), out, indent=1, default=json_default, allow_nan=False)
        out.write("\n")


