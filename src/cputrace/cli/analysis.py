"""Commands that analyse a trace: calls (call detection, call tree) and profile."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, TextIO

import click
import pyarrow as pa

from ..analysis.calls.contexts import CallSums
from ..analysis.calls.frames import frame_stream
from ..analysis.calls.log import Method
from ..analysis.calls.tables import FRAME_SCHEMA
from ..analysis.profile import TABLES as PROFILE_TABLES
from ..analysis.profile import Profile, profile, share
from ..export.output import output_path
from .common import cli, json_value, open_trace_arg, plain_table, reading_bar, write_batches, write_rows
from .options import check_cores, resolve_window, window_options
from .params import OUTPUT_FILE, image_files, image_option, load_images

_METHOD_HELP = (
    "Call detection: from lr/sp register writes, from instruction semantics, or auto "
    "(registers when the trace has lr and sp writes)."
)
method_option = click.option(
    "--method", type=click.Choice([m.value for m in Method]), default="auto", show_default=True,
    help=_METHOD_HELP,
)  # fmt: skip


def _json_rows(table: pa.Table) -> list[dict[str, Any]]:
    return [{k: json_value(v) for k, v in row.items()} for row in table.to_pylist()]


def _describe_methods(tree: CallSums) -> str:
    described = {Method.REGISTERS: "lr/sp register writes", Method.ISA: "instruction semantics"}
    methods = ", ".join(f"cpu{cpu}: {described.get(m, m.value)}" for cpu, m in sorted(tree.methods.items()))
    return methods or "no instructions"


def _tree_text(rows: Iterable[pa.RecordBatch], out: TextIO) -> None:
    """One line per call, indented by depth; each core's outermost function first."""
    for batch in rows:
        for row in batch.to_pylist():
            indent = "  " * row["depth"]
            end = row["resume_seq"] if row["resume_seq"] is not None else row["exit_seq"] + 1
            timing = "" if row["time"] is None else f"  time {row['time']:,} ({row['time_self']:,} self)"
            where = f"cpu{row['cpu']}: " if row["call_pc"] is None else ""
            called = "" if row["call_pc"] is None else f"  called at {row['call_pc']:#x}"
            out.write(
                f"{indent}{where}{row['name']}{called}  seq {row['entry_seq']}..{end}  "
                f"insns {row['insns']:,} ({row['insns_self']:,} self){timing}\n"
            )


def _site(row: dict[str, Any], site: str) -> dict[str, Any] | None:
    if row[f"{site}_seq"] is None:
        return None
    return {name: row[f"{site}_{name}"] for name in ("seq", "time", "pc", "src")}


def _tree_json(rows: Iterable[pa.RecordBatch], out: TextIO) -> None:
    """A list of each core's outermost frame, its callees nested under `calls`, written as the
    frames come (a frame's object stays open while its callees are written)."""
    out.write("[")
    depth = -1  # of the frame whose object is open last
    for batch in rows:
        for row in batch.to_pylist():
            first_callee = row["depth"] == depth + 1
            out.write("]}" * (depth - row["depth"] + 1) + ("\n" if first_callee else ",\n"))
            node = {
                "cpu": row["cpu"], "name": row["name"], "address": row["function"],
                **{site: _site(row, site) for site in ("call", "entry", "exit", "resume")},
                "insns": row["insns"], "insns_self": row["insns_self"], "time": row["time"],
                "time_self": row["time_self"],
            }  # fmt: skip
            out.write(json.dumps(node)[:-1] + ', "calls": [')
            depth = row["depth"]
    out.write("]}" * (depth + 1) + "\n]\n")


@cli.command("calls")
@click.argument("trace")
@image_option()
@method_option
@window_options
@click.option(
    "--tree", is_flag=True, help="Print the call tree (one row per call) instead of per-function rows."
)
@click.option("--cpu", "cpus", type=int, multiple=True, help="Only these cores (repeatable).")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "csv", "json"]), default="text", show_default=True
)
def calls_cmd(
    trace: str, images: tuple[str, ...], method: str, window_spec: tuple, tree: bool, cpus: tuple[int, ...],
    fmt: str,
) -> None:  # fmt: skip
    """Detect calls and returns: per-function calls, self and inclusive instructions and time.

    The outermost function of each core counts as one call. Functions are named from the
    --image symbols, by address otherwise.
    """
    t = open_trace_arg(trace)
    check_cores(t, cpus)
    image = load_images(images)
    window = resolve_window(t, window_spec)
    out = sys.stdout
    if tree:
        with (
            reading_bar([t], window),
            frame_stream(t, window, Method(method), image, list(cpus) or None) as frames,
        ):
            if fmt == "text":
                _tree_text(frames.rows(), out)
            elif fmt == "csv":
                write_batches(FRAME_SCHEMA, frames.rows(), "csv", out)
            else:
                _tree_json(frames.rows(), out)
        return
    with reading_bar([t], window):
        result = CallSums.for_trace(t, window, Method(method), image, list(cpus) or None)
    functions = result.functions()
    if fmt == "text":
        unit = (t.manifest.get("time") or {}).get("unit")
        click.echo(f"# calls detected from {_describe_methods(result)}; time in {unit or 'trace units'}")
        plain_table(functions, out, hex_columns=("address",))
    elif fmt == "csv":
        write_rows(functions, "csv", out)
    else:
        json.dump(_json_rows(functions), out, indent=1)
        out.write("\n")


_TITLES = {
    "functions": "Functions (calls)",
    "lines": "Source lines",
    "addresses": "Addresses",
    "mix": "Instruction mix",
    "blocks": "Hottest basic blocks",
}
_HEX = {"functions": ("address",), "addresses": ("pc",), "blocks": ("start",)}


def _with_shares(name: str, table: pa.Table, result: Profile) -> pa.Table:
    """Add `%` columns of the instruction count (and time) totals."""
    if name in ("mix",) or not table.num_rows:
        return table
    column = {"functions": "insns_self", "blocks": "insns"}.get(name, "count")
    total = int(pa.compute.sum(table.column(column)).as_py() or 0)
    shared = table.append_column("insns %", share(table.column(column), total))
    if result.has_time and "time" in table.column_names:
        time_column = "time_self" if name == "functions" else "time"
        total_time = int(pa.compute.sum(table.column(time_column)).as_py() or 0)
        shared = shared.append_column("time %", share(table.column(time_column), total_time))
    return shared


def _plot_file(_ctx: click.Context, _param: click.Parameter, path: str | None) -> str | None:
    """--plot's file, checked before any work: matplotlib is there and can write its format."""
    if path is None:
        return None
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise click.BadParameter("needs matplotlib, the plot extra: pip install 'cputrace[plot]'") from None
    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix and suffix not in formats:
        raise click.BadParameter(f"{path}: matplotlib writes {', '.join(sorted(formats))}, not {suffix}")
    return path


def print_profile(result: Profile, tables: Sequence[str], fmt: str, top: int, has_image: bool) -> None:
    """The profile's `tables` (default: all; functions in csv) in text, csv or json."""
    chosen = list(tables) or (["functions"] if fmt == "csv" else list(PROFILE_TABLES))
    out = sys.stdout
    if fmt == "csv":
        write_rows(result.table(chosen[0]), "csv", out)
    elif fmt == "json":
        json.dump({name: _json_rows(result.table(name)) for name in chosen}, out, indent=1)
        out.write("\n")
    else:
        for number, name in enumerate(chosen):
            table = result.table(name)
            shown = _with_shares(name, table, result)
            more = f" (top {top} of {table.num_rows:,})" if table.num_rows > top and name != "mix" else ""
            out.write(("\n" if number else "") + f"{_TITLES[name]}{more}\n")
            if name == "lines" and not table.num_rows:
                why = "give --image with an ELF" if not has_image else "no DWARF line table covers this code"
                out.write(f"({why})\n")
                continue
            plain_table(shown.slice(0, min(top, shown.num_rows)), out, _HEX.get(name, ()))


def profile_table_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Which tables of a profile, how many rows and in what format, as `profile` and `batch
    profile` take it (--by, --top, --format); more than one table in CSV is refused before any
    work."""

    @click.option(
        "--by", "tables", type=click.Choice(PROFILE_TABLES), multiple=True,
        help="Which tables (repeatable; default all in text and JSON, functions in CSV).",
    )  # fmt: skip
    @click.option(
        "--top", type=click.IntRange(min=1), default=20, show_default=True, help="Rows per table in text."
    )
    @click.option(
        "--format", "fmt", type=click.Choice(["text", "csv", "json"]), default="text", show_default=True
    )
    @wraps(command)
    def wrapper(*args: Any, tables: tuple[str, ...], fmt: str, **kwargs: Any) -> Any:
        if fmt == "csv" and len(tables) > 1:
            raise click.UsageError("CSV holds one table: give one --by")
        return command(*args, tables=tables, fmt=fmt, **kwargs)

    return wrapper


@cli.command("profile")
@click.argument("trace")
@image_option()
@method_option
@window_options
@profile_table_options
@click.option(
    "--plot",
    type=OUTPUT_FILE,
    callback=_plot_file,
    help="Also draw time per function and execution over time to this file (.png, .svg, .pdf; "
    "PNG without a suffix); needs matplotlib, the plot extra: pip install 'cputrace[plot]'.",
)
def profile_cmd(
    trace: str, images: tuple[str, ...], method: str, window_spec: tuple, tables: tuple[str, ...], top: int,
    fmt: str, plot: str | None,
) -> None:  # fmt: skip
    """Flat profile: by function, source line (DWARF) and address; instruction mix; hot blocks."""
    t = open_trace_arg(trace)
    image = load_images(images)
    window = resolve_window(t, window_spec)
    with reading_bar([t], window):
        result = profile(t, window, image, Method(method), heat=plot is not None)
    print_profile(result, tables, fmt, top, has_image=image is not None)
    if plot is not None:
        from ..analysis.plot import plot_profile

        with output_path(plot, [*t.input_paths, *image_files(images)]) as staged:
            unit = (t.manifest.get("time") or {}).get("unit")
            plot_profile(result, staged, t.path.name, unit, Path(plot).suffix.lower().lstrip(".") or "png")
        click.echo(f"wrote {plot}", err=True)
