"""The `leon-itb`, `leon-ahb` and `leon-text` input formats: buffers to model rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

from ...flow.ops import GAP_TEXT
from ...model import Flag
from ...rowbuffer import RowBuffer
from ..base import Batch, DecodeContext
from .ahb import ahb_rows
from .buffers import Buffer, read_raw, read_text, sidecar_settings
from .filtered import Before, StraightCode, untraced_before
from .itb import Anomalies, Traced, add_rows, fold, insn
from .options import CPU, ITBC0
from .timeorder import trace_filter

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

    @property
    def seq(self) -> int:
        return len(self.instructions)

    def batch(self) -> Batch:
        events = self.events.to_table()  # added in passes, each in seq order: a stable sort merges them
        return {
            "instructions": self.instructions.to_table(),
            "registers": self.registers.to_table(),
            "memory": self.memory.to_table(),
            "events": events.take(np.argsort(events.column("seq").to_numpy(), kind="stable")),
        }

    def gap(self, cpu: int, src: int, reason: str, text: str, **values: Any) -> None:
        self.events.append(seq=self.seq, cpu=cpu, kind="trace_gap", name=reason, text=text, src=src, **values)


def _add_instruction(tables: _Tables, t: Traced, cpu: int) -> None:
    tables.instructions.append(
        seq=tables.seq, time=t.time, cpu=cpu, pc=t.pc, opcode=t.opcode, size=4, isa="SPARC",
        executed=not (t.trap or t.error), flags=t.flags, disasm=t.info.disasm, src=t.src,
    )  # fmt: skip


def _add_run(tables: _Tables, code: StraightCode, before: Before, cpu: int, src: int) -> None:
    """The instructions that ran untraced in sequence before a traced line, from the image;
    a trace_gap instead when the image has no such run."""
    problem = code.check(before.start, before.count)
    if problem is not None:
        reason, address = problem
        tables.gap(cpu, src, reason.name.lower(), f"{GAP_TEXT[reason]} at 0x{address:x}", number=int(reason),
                   value=address)  # fmt: skip
        return
    for k, opcode in enumerate(code.words(before.start, before.count).tolist()):
        address = before.start + 4 * k
        tables.instructions.append(
            seq=tables.seq, cpu=cpu, pc=address, opcode=opcode, size=4, isa="SPARC", executed=True,
            flags=Flag.RECONSTRUCTED, disasm=insn(opcode, address).disasm, src=src,
        )  # fmt: skip


def _befores(traced: list[Traced], tfilt: int, anomalies: Anomalies) -> list[Before]:
    """What ran untraced before each traced line: the control-flow walk, or, under the other
    filters, an unknown number of instructions wherever a line does not follow the last."""
    if tfilt == CONTROL_FLOW_FILTER:
        return untraced_before(traced, anomalies)
    return [
        Before(t.pc, 0, bool(tfilt) and i > 0 and t.pc != traced[i - 1].pc + 4) for i, t in enumerate(traced)
    ]


def _decode_itb(
    buffer: Buffer, path: str, ctx: DecodeContext, tables: _Tables, code: StraightCode | None
) -> None:
    anomalies = Anomalies(ctx, path, buffer)
    first = int(buffer.src[0]) if len(buffer.src) else None
    traced = fold(buffer, anomalies)
    tfilt = trace_filter(buffer.control)
    if tfilt:
        tables.events.append(
            seq=tables.seq, cpu=buffer.cpu, kind="header", number=tfilt, name="itb_filter",
            text=f"instruction trace filter {tfilt:#x}: {_FILTERS.get(tfilt, 'unknown filter')}", src=first,
        )  # fmt: skip
    seq_of = []
    for t, before in zip(traced, _befores(traced, tfilt, anomalies), strict=True):
        if before.unknown or (before.count and code is None):
            tables.gap(buffer.cpu, t.src, "filtered", _FILTERED)
        elif before.count and code is not None:
            _add_run(tables, code, before, buffer.cpu, t.src)
        seq_of.append(tables.seq)
        _add_instruction(tables, t, buffer.cpu)
    for t, seq in zip(traced, seq_of, strict=True):
        add_rows(t, seq, buffer.cpu, tables.registers, tables.memory, tables.events)
    for position, text, src in anomalies.gaps:
        seq = seq_of[position] if position < len(seq_of) else tables.seq
        tables.events.append(seq=seq, cpu=buffer.cpu, kind="trace_gap", name="corrupt", text=text, src=src)


def _decode(buffers: list[Buffer], path: str, ctx: DecodeContext) -> Iterator[Batch]:
    tables = _Tables()
    image = ctx.image
    code = StraightCode(image) if image is not None else None
    for buffer in buffers:
        for line, text in buffer.unparsed:
            tables.events.append(seq=tables.seq, cpu=buffer.cpu, kind="text", text=text, src=line)
        if buffer.kind == "ahb":
            ahb_rows(buffer, tables.seq, tables.memory, tables.events)
        else:
            _decode_itb(buffer, path, ctx, tables, code)
    ctx.notes.setdefault("time_unit", "cycles")
    yield tables.batch()


def _option_settings(ctx: DecodeContext) -> dict[str, Any]:
    """The settings given to the ingest itself (`--option itbc0=... cpu=...`, or the Python API);
    a dump's own settings override them."""
    return {"kind": "itb", "cpu": ctx.option(CPU), "control": ctx.option(ITBC0)}


class LeonItbDecoder:
    name: ClassVar[str] = "leon-itb"
    kind: ClassVar[str] = "itb"

    def decode(self, source: Any, ctx: DecodeContext) -> Iterator[Batch]:
        settings = sidecar_settings(source.path, {**_option_settings(ctx), "kind": self.kind})
        yield from _decode([read_raw(source, settings)], source.path, ctx)


class LeonAhbDecoder(LeonItbDecoder):
    name: ClassVar[str] = "leon-ahb"
    kind: ClassVar[str] = "ahb"


class LeonTextDecoder:
    name: ClassVar[str] = "leon-text"

    def decode(self, source: Any, ctx: DecodeContext) -> Iterator[Batch]:
        yield from _decode(read_text(source, _option_settings(ctx), ctx), source.path, ctx)
