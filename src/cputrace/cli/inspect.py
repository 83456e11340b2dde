"""Commands that look into one point or compare runs: state, diff, coverage."""

from __future__ import annotations

import fnmatch
import json
import sys
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from ..analysis.coverage import LISTING, Coverage, compute_coverage, listing_beside
from ..analysis.diff import KINDS, DiffOptions, Divergence, diff_traces, instruction_rows, neighbours
from ..analysis.state import FROM_IMAGE, READ_BEFORE_WRITE, UNKNOWN, MemoryBytes, StateIndex
from ..export.cobertura import write_cobertura
from ..export.lcov import write_lcov
from ..image import parse_image_spec
from ..model import Isa
from ..trace import Trace
from .analysis import load_images, resolve_window, window_options
from .common import cli, err, open_trace_arg


def _address(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a number (write hex as 0x...)") from None
    if value < 0:
        raise click.BadParameter(f"{text!r} is negative")
    return value


class _Number(click.ParamType):
    """An integer in Python syntax, so addresses can be given in hex."""

    name = "NUMBER"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return _address(value)
        except click.BadParameter as exc:
            self.fail(exc.message, param, ctx)


NUMBER = _Number()


_ORIGIN_NAMES = {READ_BEFORE_WRITE: "read", FROM_IMAGE: "image", UNKNOWN: "unknown"}
_ORIGIN_TEXT = {"read": "not written yet; a read saw it", "image": "from the image", "unknown": "unknown"}


def _runs(memory: MemoryBytes) -> list[dict[str, Any]]:
    """Consecutive bytes with the same origin, as (address, length, origin, seq)."""
    origin = memory.origin
    if not len(origin):
        return []
    starts = np.flatnonzero(np.r_[True, origin[1:] != origin[:-1]])
    ends = np.r_[starts[1:], len(origin)]
    runs = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        code = int(origin[start])
        runs.append(
            {
                "address": memory.address + start,
                "length": end - start,
                "origin": _ORIGIN_NAMES.get(code, "write"),
                "seq": code if code >= 0 else None,
            }
        )
    return runs


def _dump(memory: MemoryBytes) -> list[str]:
    """Hex dump lines, 16 bytes each from a 16-byte boundary, `??` where unknown."""
    lines = []
    known = memory.known
    first = memory.address - memory.address % 16
    for row in range(first, memory.address + len(memory.data), 16):
        cells = []
        for address in range(row, row + 16):
            i = address - memory.address
            if 0 <= i < len(memory.data):
                cells.append(f"{memory.data[i]:02x}" if known[i] else "??")
            else:
                cells.append("  ")
        lines.append(f"  {row:016x}  {' '.join(cells[:8])}  {' '.join(cells[8:])}")
    return lines


@cli.command("state")
@click.argument("trace")
@click.option("--at", "seq", type=click.IntRange(min=0), help="After instruction SEQ.")
@click.option("--time", "time", type=int, help="After the last instruction at or before time T.")
@click.option(
    "--mem", "ranges", type=(NUMBER, NUMBER), multiple=True, metavar="ADDR LEN",
    help="Also show LEN bytes of memory from ADDR (repeatable).",
)  # fmt: skip
@click.option(
    "--image", "images", multiple=True, metavar="PATH[@ADDR]",
    help="Program image whose bytes stand for memory the trace never wrote or read.",
)  # fmt: skip
@click.option("--cpu", "cpus", type=int, multiple=True, help="Only these cores' registers.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def state_cmd(
    trace: str,
    seq: int | None,
    time: int | None,
    ranges: tuple[tuple[int, int], ...],
    images: tuple[str, ...],
    cpus: tuple[int, ...],
    fmt: str,
) -> None:
    """Register values and memory bytes after one instruction, each with the seq that wrote it.

    Memory never written shows as unknown (??), or as the bytes of --image. Bytes read
    before any write show the value that read saw ("read"). The first call on a store
    builds an index inside it; later calls answer from the index.
    """
    if (seq is None) == (time is None):
        raise click.UsageError("give exactly one of --at SEQ and --time T")
    image = load_images(images)
    index = StateIndex.open(open_trace_arg(trace))
    point = index.point(seq) if seq is not None else index.point_at_time(time)  # type: ignore[arg-type]
    registers = index.registers(point.seq, list(cpus) or None)
    memories = [index.memory(point.seq, address, length, image) for address, length in ranges]
    if fmt == "json":
        body: dict[str, Any] = {
            "seq": point.seq,
            "time": point.time,
            "cpu": point.cpu,
            "pc": point.pc,
            "registers": [
                {
                    "cpu": r.cpu,
                    "name": r.name,
                    "size": len(r.data),
                    "value": r.value,
                    "hex": r.hex(),
                    "seq": r.seq,
                }
                for r in registers
            ],
            "memory": [
                {
                    "address": m.address,
                    "length": len(m.data),
                    "hex": "".join(f"{b:02x}" if k else "??" for b, k in zip(m.data, m.known, strict=True)),
                    "runs": _runs(m),
                }
                for m in memories
            ],
        }
        json.dump(body, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    out = sys.stdout
    time_text = "" if point.time is None else f", time {point.time}"
    out.write(f"after seq {point.seq}: cpu {point.cpu}, pc 0x{point.pc:x}{time_text}\n")
    width = max((len(r.name) for r in registers), default=0)
    for cpu in sorted({r.cpu for r in registers}):
        out.write(f"cpu {cpu} registers:\n")
        for r in registers:
            if r.cpu == cpu:
                out.write(f"  {r.name:<{width}}  {'0x' + r.hex():>18}  seq {r.seq}\n")
    for memory in memories:
        out.write(f"memory 0x{memory.address:x}..0x{memory.address + len(memory.data):x}:\n")
        out.write("".join(line + "\n" for line in _dump(memory)))
        for run in _runs(memory):
            where = f"  0x{run['address']:x}+{run['length']}"
            how = f"written at seq {run['seq']}" if run["seq"] is not None else _ORIGIN_TEXT[run["origin"]]
            out.write(f"{where:<24}{how}\n")


def _percent(covered: int, total: int) -> str:
    return f"{100 * covered / total:.1f}" if total else "-"


def _print_coverage(coverage: Coverage, console: Console, show_functions: bool) -> None:
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


@cli.command("coverage")
@click.argument("trace")
@click.option(
    "--image", "images", multiple=True, required=True, metavar="PATH[@ADDR]",
    help="The program image (ELF with symbols; DWARF gives line coverage). Repeatable.",
)  # fmt: skip
@click.option(
    "--range", "address_range", type=(NUMBER, NUMBER), metavar="ADDR LEN",
    help="Object-code coverage of LEN bytes from ADDR instead of every function.",
)  # fmt: skip
@click.option(
    "--isa", type=click.Choice(["A32", "T32", "A64", "SPARC"]),
    help="Instruction set of range bytes that no mapping symbol describes.",
)  # fmt: skip
@click.option("--cpu", "cpus", type=int, multiple=True, help="Only these cores (default all).")
@click.option("--lcov", "lcov_path", type=click.Path(dir_okay=False), help="Write an lcov tracefile (.info).")
@click.option("--cobertura", "cobertura_path", type=click.Path(dir_okay=False), help="Write Cobertura XML.")
@click.option(
    "--listing", "listing_path", type=click.Path(dir_okay=False),
    help="Where to write the object-code listing that reports name for code without DWARF lines "
    "(default: the first report's name + .lst).",
)  # fmt: skip
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
    reports = [p for p in (lcov_path, cobertura_path) if p]
    listing = listing_path or (str(listing_beside(reports[0])) if reports else LISTING)
    t = open_trace_arg(trace)
    coverage = compute_coverage(
        t,
        image,
        image_name=parse_image_spec(images[0])[0].name,
        address_range=address_range,
        default_isa=Isa[isa] if isa else None,
        cpus=set(cpus) or None,
        window=resolve_window(t, window_spec),
        listing=listing,
    )
    if coverage.listing and reports:
        Path(coverage.listing).write_text(coverage.listing_text())
        err.print(f"wrote {coverage.listing} (object-code listing for code without DWARF lines)")
    if lcov_path:
        with open(lcov_path, "w") as out:
            write_lcov(coverage, out, Path(trace).name)
        err.print(f"wrote {lcov_path}")
    if cobertura_path:
        with open(cobertura_path, "wb") as out:
            write_cobertura(coverage, out)
        err.print(f"wrote {cobertura_path}")
    _print_coverage(coverage, Console(file=sys.stdout, highlight=False), functions)


def _value(value: int | None) -> str:
    return "?" if value is None else f"0x{value:x}"


def _instruction_text(row: dict[str, Any] | None) -> str:
    if row is None:
        return ""
    opcode = "-" * 8 if row["opcode"] is None else f"{row['opcode']:0{2 * (row['size'] or 4)}x}"
    state = "" if row["executed"] else " (not executed)"
    return f"{row['seq']:>8} 0x{row['pc']:08x} {opcode:>8} {(row['disasm'] or '').strip()}{state}"


def _explain(a: dict[str, Any], b: dict[str, Any], options: DiffOptions) -> list[str]:
    """What differs between two paired instructions, one line each."""
    lines = []
    if a["opcode"] != b["opcode"]:
        lines.append(f"opcode: A {_value(a['opcode'])}  B {_value(b['opcode'])}")
    if a["executed"] != b["executed"]:
        lines.append(f"executed: A {a['executed']}  B {b['executed']}")
    if a["time"] != b["time"] and not options.ignore_time:
        lines.append(f"time: A {a['time']}  B {b['time']}")
    for name in sorted(set(a["registers"]) | set(b["registers"])):
        if any(fnmatch.fnmatch(name, p.lower()) for p in options.ignore_registers):
            continue
        va, vb = a["registers"].get(name, "none"), b["registers"].get(name, "none")
        if va != vb:
            shown = [v if isinstance(v, str) else _value(v) for v in (va, vb)]
            lines.append(f"register {name}: A {shown[0]}  B {shown[1]}")
    if sorted(a["writes"]) != sorted(b["writes"]):
        for side, row in (("A", a), ("B", b)):
            writes = ", ".join(f"0x{addr:x}={data[::-1].hex()}" for addr, data in row["writes"]) or "none"
            lines.append(f"memory writes {side}: {writes}")
    return lines


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
        for line in _explain(at_a, at_b, options):
            out.write(f"  {line}\n")


@cli.command("diff")
@click.argument("trace_a")
@click.argument("trace_b")
@click.option(
    "--ignore-reg", "ignore_registers", multiple=True, metavar="GLOB",
    help="Do not compare these registers (canonical names, globs: cpsr, 'sp_*'). Repeatable.",
)  # fmt: skip
@click.option("--ignore-time", is_flag=True, help="Do not compare timestamps.")
@click.option("--context", type=click.IntRange(min=0), default=3, show_default=True,
              help="Instructions shown around the first divergence.")  # fmt: skip
@click.option("--max", "limit", type=click.IntRange(min=1), default=20, show_default=True,
              help="Divergences listed in the summary.")  # fmt: skip
@click.option("--window", type=click.IntRange(min=1), default=4096, show_default=True,
              help="Instructions looked ahead on each side to resynchronise.")  # fmt: skip
@click.option("--exit-code", is_flag=True,
              help="Exit with status 3 when the traces differ (1 stays bad input, 2 bad usage).")  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def diff_cmd(
    trace_a: str,
    trace_b: str,
    ignore_registers: tuple[str, ...],
    ignore_time: bool,
    context: int,
    limit: int,
    window: int,
    exit_code: bool,
    fmt: str,
) -> None:
    """Compare two traces of the same program (e.g. RTL against a model), core by core.

    The instruction streams are aligned by pc and resynchronised after a divergence; paired
    instructions are compared on opcode, executed flag, time and the register and memory
    values they write. Prints the first divergence with context, then a summary.
    """
    a, b = open_trace_arg(trace_a), open_trace_arg(trace_b)
    options = DiffOptions(tuple(ignore_registers), ignore_time, window)
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
