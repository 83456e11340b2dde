"""The instruction trace buffer (ITB): lines folded into instructions and their effects.

One line per instruction, except for multi-cycle instructions, whose later entries have bit
126 set and follow their first: a store gives its address, then its data (STD: two data
entries); LDD gives its two loaded words; an atomic load-store (LDSTUB, SWAP, CASA) gives
the loaded value, then the stored one. The 32-bit field (bits 95:64) is the instruction's
result: what it wrote to its destination register, which the opcode names. Loads give no
address, so their `memory` rows have a null `addr`.

Buffers hold at most a few thousand lines, so the folding runs line by line in Python.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ...isa import InsnInfo, sparc_insn
from ...model import Flag, Isa
from ...rowbuffer import RowBuffer
from ..base import DecodeContext
from .buffers import Buffer
from .timeorder import oldest_first, unwrap_time

_ORPHAN = "a continuation whose instruction was overwritten"
_REGISTER_NAMES = tuple(f"{bank}{n}" for bank in "goli" for n in range(8))
_ACCESS_SIZE = {0x0: 4, 0x1: 1, 0x2: 2, 0x3: 8, 0x4: 4, 0x5: 1, 0x6: 2, 0x7: 8, 0x9: 1, 0xA: 2,
                0xD: 1, 0xF: 4, 0xC: 4}  # op3 & 0xF (and CASA's 0x3C & 0xF) -> bytes  # fmt: skip
_SPECIAL_WRITES = {0x31: "psr", 0x32: "wim", 0x33: "tbr"}  # WR to a state register (0x30: Y/ASR)
_NO_RESULT_OP3 = {0x34, 0x35, 0x36, 0x37, 0x39, 0x3A, 0x3B}  # FPop, CPop, RETT, Ticc, FLUSH


@dataclass
class Traced:
    """One traced instruction with the results of all its entries."""

    pc: int
    opcode: int
    time: int
    trap: bool
    error: bool
    src: int
    results: list[int] = field(default_factory=list)

    @property
    def info(self) -> InsnInfo:
        return insn(self.opcode, self.pc)

    @property
    def flags(self) -> int:
        return (Flag.TRAP if self.trap else 0) | (Flag.ERROR_MODE if self.error else 0)


@functools.lru_cache(maxsize=4096)
def insn(opcode: int, pc: int) -> InsnInfo:
    try:
        return sparc_insn(opcode, pc)
    except KeyError:  # isa/sparc.py cannot print coprocessor branches (CBccc) capstone rejects
        return InsnInfo(pc, Isa.SPARC, 4, opcode, ".word", f"0x{opcode:08x}", is_undefined=True)


def expected_entries(info: InsnInfo) -> int:
    """Lines a multi-cycle instruction takes: store address + data, two for LDD and atomics."""
    if info.is_load and info.is_store:
        return 2
    if info.is_store:
        return 1 + info.transfers
    return info.transfers if info.is_load else 1


class Anomalies:
    """Corrupt lines: a warning (an error with --strict) and a trace_gap event where they were."""

    def __init__(self, ctx: DecodeContext, path: str, buffer: Buffer) -> None:
        self.ctx, self.path, self.buffer = ctx, path, buffer
        self.gaps: list[tuple[int, str, int]] = []  # (position in traced order, text, src)

    def report(self, position: int, src: int, expected: str, got: str) -> None:
        where = f"{self.buffer.src_unit} {src}"
        self.ctx.leave_out(self.path, where, expected, got, "left out as a trace gap")
        self.gaps.append((position, f"expected {expected}, got {got}", src))


def fold(buffer: Buffer, anomalies: Anomalies) -> list[Traced]:
    """The buffer's instructions, oldest first, with multi-cycle entries folded in."""
    order = oldest_first(buffer.words, buffer.control)
    words = buffer.words[order]
    src = buffer.src[order]
    times = unwrap_time(words[:, 0] & 0x3FFFFFFF)
    traced: list[Traced] = []
    for i, (w0, w1, w2, w3) in enumerate(words.tolist()):
        pc = w2 & 0xFFFFFFFC
        if not w0 >> 30 & 1:
            traced.append(Traced(pc, w3, int(times[i]), bool(w2 & 2), bool(w2 & 1), int(src[i]), [w1]))
            continue
        last = traced[-1] if traced else None
        if last is None:
            anomalies.report(0, int(src[i]), "a first entry before a multi-cycle entry", _ORPHAN)
        elif (last.pc, last.opcode) != (pc, w3):
            expected = f"a continuation of {last.opcode:08x} at 0x{last.pc:x}"
            anomalies.report(len(traced), int(src[i]), expected, f"{w3:08x} at 0x{pc:x}")
        elif len(last.results) >= expected_entries(last.info):
            anomalies.report(len(traced), int(src[i]),
                             f"{expected_entries(last.info)} entries for {last.info.mnemonic}",
                             "one more multi-cycle entry")  # fmt: skip
        else:
            last.results.append(w1)
            last.trap |= bool(w2 & 2)
            last.error |= bool(w2 & 1)
    return traced


def _register(number: int) -> str:
    return _REGISTER_NAMES[number]


def register_writes(t: Traced) -> list[tuple[str, int]]:
    """(register, value) for what the instruction wrote, named from its opcode."""
    if t.trap or t.error:
        return []  # a trapped instruction does not complete
    word, info = t.opcode, t.info
    op, rd, op3 = word >> 30, (word >> 25) & 0x1F, (word >> 19) & 0x3F
    if op == 1:
        return [("o7", t.pc)]
    if info.is_undefined:
        return []
    if op == 0:
        return [(_register(rd), t.results[0])] if (word >> 22) & 7 == 4 and rd else []
    if op == 2:
        if op3 in _SPECIAL_WRITES:
            return [(_SPECIAL_WRITES[op3], t.results[0])]
        if op3 == 0x30:
            return [("y" if rd == 0 else f"asr{rd}", t.results[0])]
        return [] if op3 in _NO_RESULT_OP3 or not rd else [(_register(rd), t.results[0])]
    if not info.is_load:
        return []
    kind = op3 & 0x30
    names = (_register(rd), _register(rd | 1)) if kind in (0x00, 0x10) else (f"f{rd}", f"f{rd | 1}")
    if kind == 0x30 or (kind == 0x20 and op3 in (0x21, 0x25)):
        return []  # coprocessor registers and %fsr: not named by the model
    loaded = t.results[:2] if info.transfers == 2 else t.results[:1]
    if names[0] == "g0":
        loaded = loaded[1:]
        names = names[1:]
    return [(name, value) for name, value in zip(names, loaded, strict=False)]


def memory_accesses(t: Traced) -> list[tuple[str, int | None, int, int, str]]:
    """(op, addr or None, size, value, attrs) of the instruction's loads and stores."""
    info = t.info
    if not (info.is_load or info.is_store) or t.trap or t.error:
        return []
    op3 = (t.opcode >> 19) & 0x3F
    size = _ACCESS_SIZE.get(op3 & 0xF, 4)
    mask = (1 << (8 * min(size, 4))) - 1
    if info.is_load and info.is_store:
        values = t.results
        attrs = info.mnemonic
        rows = [("R", None, size, values[0] & mask, attrs)]
        return rows + ([("W", None, size, values[1] & mask, attrs)] if len(values) > 1 else [])
    if info.is_load:
        return [("R", None, min(size, 4), value & mask, "") for value in t.results[: info.transfers]]
    address, data = t.results[0], t.results[1:]
    return [("W", address + 4 * i, min(size, 4), value & mask, "") for i, value in enumerate(data)]


def trap_number(t: Traced) -> int | None:
    """The trap type of a `ta`/`t<cond>` with an immediate on %g0 (0x80 + n); None otherwise."""
    word = t.opcode
    if word >> 30 == 2 and (word >> 19) & 0x3F == 0x3A and (word >> 13) & 1 and not (word >> 14) & 0x1F:
        return 0x80 + (word & 0x7F)
    return None


def add_rows(t: Traced, seq: int, cpu: int, regs: RowBuffer, memory: RowBuffer, events: RowBuffer) -> None:
    """The registers, memory and events rows of traced instruction `t` (numbered `seq`)."""
    common = {"seq": seq, "time": t.time, "cpu": cpu, "src": t.src}
    for name, value in register_writes(t):
        regs.append(**common, reg=name, size=4, value=value)
    for op, address, size, value, attrs in memory_accesses(t):
        memory.append(
            **common, op=op, source="core", size=size, addr=address, value=value, attrs=attrs or None
        )
    if t.trap:
        events.append(**common, kind="exception", number=trap_number(t), name="trap", value=t.pc,
                      text=f"{t.info.disasm} trapped")  # fmt: skip
    if t.error:
        events.append(**common, kind="mode_change", name="error_mode", value=t.pc,
                      text="the processor entered error mode")  # fmt: skip
