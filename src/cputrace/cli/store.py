"""Commands that make and read a store: ingest, info, list, sql."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..export.tarmac import write_tarmac
from ..formats import DECODERS
from ..image import Image, load_image_spec
from ..ingest import ingest
from ..inputs import Fingerprint
from ..isa import Disassembler, fill_disasm
from .common import cli, err, json_value, open_trace_arg, plain, progress, write_rows
from .etm import etm_input_options, etm_options


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
@click.option(
    "--image", "images", multiple=True, metavar="PATH[@ADDR]",
    help="Program image (ELF, Intel HEX, S-record, raw binary at ADDR) to recover the instructions "
    "a flow-only trace leaves out; repeatable.",
)  # fmt: skip
@click.option(
    "--option", "decoder_options", multiple=True, metavar="KEY=VALUE",
    help="A decoder option (docs/formats.md), e.g. high_vectors=true, vector_base=0x8000, xscale_pc=0x8040; "
    "repeatable.",
)  # fmt: skip
@etm_input_options
def ingest_cmd(
    inputs: tuple[str, ...], output: str | None, fmt: str | None, strict: bool, default_isa: str | None,
    images: tuple[str, ...], decoder_options: tuple[str, ...], **etm: object,
) -> None:  # fmt: skip
    """Decode INPUT... into a store (Parquet tables + manifest.json)."""
    options: dict[str, object] = {"default_isa": default_isa} if default_isa else {}
    if images:
        options["images"] = list(images)
    options.update(etm_options(etm))
    for item in decoder_options:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--option")
        options[key.strip()] = value.strip()
    total = sum(Fingerprint.of(p).size for p in inputs)

    def said_format(path: str, name: str) -> None:
        how = "given" if fmt else "sniffed"
        err.print(f"{path}: format {name} ({how})")

    with progress(total, "ingesting") as hook:
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
@click.option(
    "--image", "images", multiple=True, metavar="PATH[@ADDR]",
    help="Program image for the disassembly of instructions the trace gave no opcode for.",
)  # fmt: skip
def list_cmd(trace: str, where: str | None, limit: int | None, fmt: str, images: tuple[str, ...]) -> None:
    """List instructions (with --format tarmac, also their records, as a Tarmac trace).

    Instructions the input gave no disassembly for get it from their opcode (or the image).
    """
    t = open_trace_arg(trace)
    query = f"SELECT * FROM instructions {_where(where)} ORDER BY seq"
    if limit is not None:
        query += f" LIMIT {limit}"
    image = Image.merge(load_image_spec(spec) for spec in images) if images else None
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
        Console(file=out, highlight=False).print(view)
    elif fmt == "csv":
        write_rows(table, "csv", out)
    else:
        json.dump([{k: json_value(v) for k, v in r.items()} for r in table.to_pylist()], out, indent=1)
        out.write("\n")


