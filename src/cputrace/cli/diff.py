"""The diff command: two traces of the same program compared, core by core."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from ..analysis.diff import KINDS, DiffOptions, Divergence, diff_traces, explain, instruction_rows, neighbours
from ..store.trace import Trace
from .common import cli, open_trace_arg, reading_bar

MAX_WINDOW = 1 << 32
"""The largest --window: beyond any trace's length, and within the compiled search's integers."""


def _instruction_text(row: dict[str, Any] | None) -> str:
    if row is None:
        return ""
    opcode = "-" * 8 if row["opcode"] is None else f"{row['opcode']:0{2 * (row['size'] or 4)}x}"
    state = "" if row["executed"] else " (not executed)"
    return f"{row['seq']:>8} 0x{row['pc']:08x} {opcode:>8} {(row['disasm'] or '').strip()}{state}"


def _divergence_json(d: Divergence) -> dict[str, Any]:
    return {
        "cpu": d.cpu, "kinds": list(d.kinds), "a_seq": d.a_seq, "b_seq": d.b_seq,
        "a_count": d.a_count, "b_count": d.b_count,
    }  # fmt: skip


def _divergence_text(d: Divergence) -> str:
    if d.kinds == ("unaligned",):
        parts = []
        for side, seq, count in (("A", d.a_seq, d.a_count), ("B", d.b_seq, d.b_count)):
            if count:
                parts.append(f"{count} only in {side} from seq {seq}")
        return f"cpu {d.cpu}  unaligned: " + ", ".join(parts)
    return f"cpu {d.cpu}  A seq {d.a_seq}  B seq {d.b_seq}  {', '.join(d.kinds)}"


def _print_context(a: Trace, b: Trace, first: Divergence, context: int, options: DiffOptions) -> None:
    rows = {}
    for side, trace, seq in (("A", a, first.a_seq), ("B", b, first.b_seq)):
        seqs = neighbours(trace, first.cpu, seq, context, context + 1)
        rows[side] = {"list": instruction_rows(trace, first.cpu, seqs), "at": seq}
    out = sys.stdout
    for side in ("A", "B"):
        out.write(f"  {side}:\n")
        for row in rows[side]["list"]:
            mark = ">" if row["seq"] == rows[side]["at"] else " "
            out.write(f"  {mark}{_instruction_text(row)}\n")
    if first.kinds != ("unaligned",):
        at_a = next(r for r in rows["A"]["list"] if r["seq"] == first.a_seq)
        at_b = next(r for r in rows["B"]["list"] if r["seq"] == first.b_seq)
        for line in explain(at_a, at_b, options):
            out.write(f"  {line}\n")


def diff_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """What a comparison ignores and how far it looks to resynchronise, as `diff` and `batch diff`
    take it (--ignore-reg, --ignore-time, --window); the command gets them as `options`."""

    @click.option(
        "--ignore-reg", "ignore_registers", multiple=True, metavar="GLOB",
        help="Do not compare these registers (canonical names, globs: cpsr, 'sp_*'). Repeatable.",
    )  # fmt: skip
    @click.option("--ignore-time", is_flag=True, help="Do not compare timestamps.")
    @click.option("--window", type=click.IntRange(1, MAX_WINDOW), default=4096, show_default=True,
                  help="Instructions looked ahead on each side to resynchronise.")  # fmt: skip
    @wraps(command)
    def wrapper(*args: Any, ignore_registers: tuple[str, ...], ignore_time: bool, window: int,
                **kwargs: Any) -> Any:  # fmt: skip
        return command(*args, options=DiffOptions(tuple(ignore_registers), ignore_time, window), **kwargs)

    return wrapper


@cli.command("diff")
@click.argument("trace_a")
@click.argument("trace_b")
@diff_options
@click.option("--context", type=click.IntRange(min=0), default=3, show_default=True,
              help="Instructions shown around the first divergence.")  # fmt: skip
@click.option("--max", "limit", type=click.IntRange(min=1), default=20, show_default=True,
              help="Divergences listed in the summary.")  # fmt: skip
@click.option("--exit-code", is_flag=True,
              help="Exit with status 3 when the traces differ (1 stays bad input, 2 bad usage).")  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def diff_cmd(
    trace_a: str,
    trace_b: str,
    options: DiffOptions,
    context: int,
    limit: int,
    exit_code: bool,
    fmt: str,
) -> None:
    """Compare two traces of the same program core by core, such as RTL against a model.

    The instruction streams are aligned by pc and resynchronised after a divergence; paired
    instructions are compared on opcode, executed flag, time and the register and memory
    values they write. Prints the first divergence with context, then a summary.
    """
    a, b = open_trace_arg(trace_a), open_trace_arg(trace_b)
    with reading_bar([a, b]):
        result = diff_traces(a, b, options, limit)
    if fmt == "json":
        body = {
            "a": {"store": str(a.path), "instructions": result.a_instructions},
            "b": {"store": str(b.path), "instructions": result.b_instructions},
            "same": result.same,
            "paired": result.paired,
            "divergences": result.total,
            "counts": {kind: result.counts[kind] for kind in KINDS},
            "only_a": result.only_a,
            "only_b": result.only_b,
            "listed": [_divergence_json(d) for d in result.divergences],
        }
        json.dump(body, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        out = sys.stdout
        out.write(f"A: {a.path} ({result.a_instructions:,} instructions)\n")
        out.write(f"B: {b.path} ({result.b_instructions:,} instructions)\n")
        if result.same:
            out.write(f"no divergence in {result.paired:,} paired instructions\n")
        else:
            first = result.divergences[0]
            out.write(f"first divergence: {_divergence_text(first)}\n")
            _print_context(a, b, first, context, options)
            kinds = ", ".join(f"{k} {result.counts[k]:,}" for k in KINDS if result.counts[k])
            out.write(
                f"summary: {result.paired:,} paired instructions, {result.total:,} divergences ({kinds}); "
                f"{result.only_a:,} instructions only in A, {result.only_b:,} only in B\n"
            )
            shown = len(result.divergences)
            out.write(f"divergences (first {shown:,} of {result.total:,}):\n")
            for d in result.divergences:
                out.write(f"  {_divergence_text(d)}\n")
    if exit_code and not result.same:
        sys.exit(3)
