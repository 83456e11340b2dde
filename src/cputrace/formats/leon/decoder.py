"""The `leon-itb`, `leon-ahb` and `leon-text` input formats: buffers to model rows."""


from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from ...flow import Program
from ...model import SCHEMAS
from ...rows import RowBuffer
from ..base import Batch, DecodeContext
from .ahb import ahb_rows
from .buffers import Buffer, option_settings, read_raw, read_text, sidecar_settings
from .filtered import reconstruct
from .itb import Anomalies, Traced, add_rows, fold, insn
from .lines import trace_filter

CONTROL_FLOW_FILTER = 2
_FILTERED = "the trace filter left out the instructions before this one"
_FILTERS = {
    0: "all instructions", 1: "SETHI and branches (format 2)",
    2: "control flow: CALL, branches, JMPL, RETT, traps and their targets", 4: "CALL only",
    8: "format-3 instructions other than loads and stores", 0xC: "loads and stores",
    0xD: "loads and stores to alternate spaces", 0xE: "loads and stores to ASI 0x80-0xFF",
}  # fmt: skip


class _Tables:
    """The rows of one input, numbered on across its buffers."""

    def __init__(self) -> None:
        self.instructions = RowBuffer("instructions")
        self.registers = RowBuffer("registers")
        self.memory = RowBuffer("memory")
        self.events = RowBuffer("events")
        self.extra_events: list[pa.Table] = []

    @property
    def seq(self) -> int:
        return len(self.instructions)

    def batch(self) -> Batch:
        events = pa.concat_tables([self.events.to_table(), *self.extra_events])
        return {
            "instructions": self.instructions.to_table(),
            "registers": self.registers.to_table(),
            "memory": self.memory.to_table(),
            "events": events,
        }


def _add_instruction(tables: _Tables, t: Traced, cpu: int) -> None:
    tables.instructions.append(
        seq=tables.seq, time=t.time, cpu=cpu, pc=t.pc, opcode=t.opcode, size=4, isa="SPARC",
        executed=not (t.trap or t.error), flags=t.flags, disasm=t.info.disasm, src=t.src,
    )  # fmt: skip


def _decode_itb(
    buffer: Buffer, path: str, ctx: DecodeContext, tables: _Tables, program: Program | None
) -> None:
    anomalies = Anomalies(ctx, path, buffer)
    traced = fold(buffer, anomalies)
    tfilt = trace_filter(buffer.control)
    seq_of: list[int | None]
    if tfilt:
        tables.events.append(
            seq=tables.seq, cpu=buffer.cpu, kind="header", number=tfilt, name="itb_filter",
            text=f"instruction trace filter {tfilt:#x}: {_FILTERS.get(tfilt, 'unknown filter')}",
            src=int(buffer.src[0]) if len(buffer.src) else None,
        )  # fmt: skip
    if tfilt == CONTROL_FLOW_FILTER and program is not None:
        seq_of = _walked(traced, program, buffer.cpu, anomalies, tables)
    else:
        seq_of = []
        for i, t in enumerate(traced):
            if tfilt and i and not _follows(traced[i - 1], t):
                _gap(tables, buffer.cpu, t.src, "filtered", _FILTERED)
            seq_of.append(tables.seq)
            _add_instruction(tables, t, buffer.cpu)
    for t, seq in zip(traced, seq_of, strict=True):
        if seq is not None:
            add_rows(t, seq, buffer.cpu, tables.registers, tables.memory, tables.events)
    for position, text, src in anomalies.gaps:
        seq = next((s for s in seq_of[position:] if s is not None), tables.seq)
        tables.events.append(seq=seq, cpu=buffer.cpu, kind="trace_gap", name="corrupt", text=text, src=src)


def _follows(before: Traced, after: Traced) -> bool:
    return after.pc == before.pc + 4


def _gap(tables: _Tables, cpu: int, src: int, name: str, text: str) -> None:
    tables.events.append(seq=tables.seq, cpu=cpu, kind="trace_gap", name=name, text=text, src=src)


def _walked(
    traced: list[Traced], program: Program, cpu: int, anomalies: Anomalies, tables: _Tables
) -> list[int | None]:
    """Rows for a control-flow filtered buffer: the walk, with the traced lines in their places."""
    rows, placed, gaps = reconstruct(traced, program, cpu, anomalies)
    first = tables.seq
    by_row = {row: i for i, row in enumerate(placed) if row is not None}
    for k, row in enumerate(rows):
        i = by_row.get(k)
        if i is not None:
            _add_instruction(tables, traced[i], cpu)
            continue
        address, opcode = row["pc"], row["opcode"]
        tables.instructions.append(
            seq=tables.seq, cpu=cpu, pc=address, opcode=opcode, size=4, isa="SPARC", executed=row["executed"],
            flags=row["flags"], disasm=insn(opcode, address).disasm, src=row["src"],
        )  # fmt: skip
    if gaps is not None and gaps.num_rows:
        seq = pc.add(gaps.column("seq"), pa.scalar(first - rows[0]["seq"] if rows else first))
        tables.extra_events.append(gaps.set_column(0, "seq", seq).cast(SCHEMAS["events"]))
    return [None if row is None else first + row for row in placed]


def _decode(buffers: list[Buffer], path: str, ctx: DecodeContext) -> Iterator[Batch]:
    tables = _Tables()
    image = ctx.image()
    program = Program(image) if image is not None else None
    for buffer in buffers:
        if buffer.kind == "ahb":
            ahb_rows(buffer, tables.memory, tables.events)
        else:
            _decode_itb(buffer, path, ctx, tables, program)
    ctx.notes.setdefault("time_unit", "cycles")
    yield tables.batch()


class LeonItbDecoder:
    name: ClassVar[str] = "leon-itb"
    kind: ClassVar[str] = "itb"

    def decode(self, source: Any, ctx: DecodeContext) -> Iterator[Batch]:
        settings = sidecar_settings(source.path, {**option_settings(ctx.options), "kind": self.kind})
        yield from _decode([read_raw(source, settings)], source.path, ctx)


class LeonAhbDecoder(LeonItbDecoder):
    name: ClassVar[str] = "leon-ahb"
    kind: ClassVar[str] = "ahb"


class LeonTextDecoder:
    name: ClassVar[str] = "leon-text"

    def decode(self, source: Any, ctx: DecodeContext) -> Iterator[Batch]:
        yield from _decode(read_text(source, option_settings(ctx.options)), source.path, ctx)

