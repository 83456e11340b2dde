"""A small PTM (PFT v1.1) encoder for tests, written from the packet formats of ARM IHI 0035B,
4.5, and a recorded run turned into the packets a PTM would emit for it.

`PtmEncoder` appends packets to a byte stream and compresses branch addresses itself (only the
low-order bytes that changed are sent). `encode_run` walks a recorded run's instructions: each
waypoint (a branch or an ISB) is an atom, E when the run did not go on to the next
instruction in memory; a taken indirect branch is a branch address packet, and so is a taken
direct one with branch broadcast; with the return stack a return to the address the stack
holds is an E atom alone. It returns the rows a decoder should give.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from etm_encoder import Step

from cputrace.isa import BlockCache
from cputrace.isa.insn import Kind
from cputrace.model import Isa

STACK_DEPTH = 16  # the decoder's return stack (flow.ops.RETURN_STACK_DEPTH)


def cycle_count(value: int, first: int) -> bytes:
    """A cycle count whose first byte already holds `first` (bits 7 and 1:0): bits 5:2 the
    count's low bits, bit 6 more; then 7 bits a byte, bit 7 more."""
    out = bytearray([first | (value & 0xF) << 2])
    value >>= 4
    if value:
        out[0] |= 0x40
        while True:
            byte = value & 0x7F
            value >>= 7
            out.append(byte | (0x80 if value else 0))
            if not value:
                break
    return bytes(out)


@dataclass
class PtmEncoder:
    cycle_accurate: bool = False
    out: bytearray = field(default_factory=bytearray)
    address: int = 0
    isa: str = "A32"

    @property
    def data(self) -> bytes:
        return bytes(self.out)

    def a_sync(self) -> PtmEncoder:
        self.out += bytes([0, 0, 0, 0, 0, 0x80])
        return self

    def i_sync(self, address: int, isa: str, reason: int = 1, cycles: int = 0) -> PtmEncoder:
        raw = address | (1 if isa == "T32" else 0)
        self.out += bytes([0x08, *raw.to_bytes(4, "little"), reason << 5])
        if self.cycle_accurate and reason:
            self.out += cycle_count(cycles, 0)
        self.address, self.isa = address, isa
        return self

    def atoms(self, atoms: str) -> PtmEncoder:
        """Non-cycle-accurate: up to five atoms a header, the oldest in the highest bit, 0 = E."""
        for start in range(0, len(atoms), 5):
            group = atoms[start : start + 5]
            marker = {1: 0x84, 2: 0x88, 3: 0x90, 4: 0xA0, 5: 0xC0}[len(group)]
            bits = sum(1 << (len(group) - i) for i, a in enumerate(group) if a == "N")
            self.out.append(marker | bits)
        return self

    def atom(self, executed: bool, cycles: int) -> PtmEncoder:
        """Cycle-accurate: one atom (bit 1 clear: E) and its cycles."""
        self.out += cycle_count(cycles, 0x80 | (0 if executed else 0x02))
        return self

    def branch(self, address: int, isa: str, cycles: int = 0, exception: int | None = None) -> PtmEncoder:
        """A branch address (with an exception: its number, in one exception byte)."""
        out = self._address(address, isa, 5 if exception is not None else 1)
        if exception is not None:
            out[-1] |= 0x40
            out.append((exception & 0xF) << 1)
        self.out += out
        if self.cycle_accurate:
            self.out += cycle_count(cycles, 0)
        return self

    def waypoint_update(self, address: int, isa: str) -> PtmEncoder:
        """The address of the last instruction executed (4.5.5)."""
        self.out += bytes([0x72]) + self._address(address, isa, 1)
        return self

    def _address(self, address: int, isa: str, fewest: int) -> bytearray:
        """Address bytes: the fewest (at least `fewest`) that carry every address bit that
        changed (all five when the instruction set changes). In units of the instruction
        alignment, one byte carries 6 bits, two 12, three 19, four 26 (the last of them 6,
        the others 7); five all, and the instruction set."""
        shift = 2 if isa == "A32" else 1
        value = address >> shift
        changed = (address ^ self.address) >> shift
        count = next((c for c, bits in enumerate((6, 12, 19, 26), 1) if not changed >> bits), 5)
        if isa != self.isa:
            count = 5
        count = max(count, fewest)
        out = bytearray()
        for i in range(count):
            last = i == count - 1
            if i == 0:
                byte = (value & 0x3F) << 1 | 1
            elif i < 4:
                byte = (value >> (6 + 7 * (i - 1))) & (0x3F if last else 0x7F)
            else:
                byte = (value >> 27) & 0x7 | 0x08 if isa == "A32" else (value >> 27) & 0xF | 0x10
            out.append(byte if last else byte | 0x80)
        self.address, self.isa = address, isa
        return out


@dataclass
class Expected:
    rows: list[tuple] = field(default_factory=list)  # (pc, isa, executed or None, cycles or None)
    returns_from_stack: int = 0


def encode_run(enc: PtmEncoder, steps: list[Step], blocks: BlockCache, *, return_stack: bool = False,
               broadcast: bool = False, rng: random.Random | None = None) -> Expected:  # fmt: skip
    """Encode `steps` into `enc` as a PTM would; an exception (not one that cancels its
    instruction) is a waypoint update to the instruction that took it, then a branch address
    with the exception to where the run went. The rows end at the last waypoint: nothing in the
    trace covers instructions after it."""
    expected = Expected()
    stack: list[tuple[int, str]] = []
    pending = ""
    rng = rng or random.Random(0)

    def flush() -> None:
        nonlocal pending
        enc.atoms(pending)
        pending = ""

    enc.i_sync(steps[0].pc, steps[0].isa, cycles=5)
    covered = 0  # the rows up to the last waypoint
    in_it = 0  # instructions of an IT block still to come: conditional, which decoding alone misses
    for i, step in enumerate(steps[:-1]):
        info = blocks.insn_at(step.pc, Isa[step.isa])
        following = steps[i + 1]
        conditional = info.is_conditional or in_it > 0
        in_it = max(in_it - 1, 0)
        if step.isa == "T32" and info.mnemonic.startswith("it"):
            mask = info.opcode & 0xF
            in_it = 4 - (mask & -mask).bit_length() + 1  # the mask's lowest set bit ends the block
        if step.exception is not None:
            assert not step.cancels and not (info.is_branch or info.is_isb)
            flush()
            expected.rows.append((step.pc, step.isa, True, None))
            covered = len(expected.rows)
            enc.waypoint_update(step.pc, step.isa)
            enc.branch(following.pc, following.isa, 1, exception=step.exception)
            continue
        if not (info.is_branch or info.is_isb):
            executed = None if conditional else True
            expected.rows.append((step.pc, step.isa, executed, None))
            continue
        taken = (following.pc, following.isa) != (step.pc + info.size, step.isa)
        cycles = rng.randrange(1, 300) if enc.cycle_accurate else None
        expected.rows.append((step.pc, step.isa, taken, cycles))
        covered = len(expected.rows)
        if taken and info.is_branch and return_stack and info.kind is Kind.CALL:
            stack = [*stack[-(STACK_DEPTH - 1):], (step.pc + info.size, step.isa)]
        address_packet = taken and info.is_branch and (not info.is_direct or broadcast)
        if address_packet and return_stack and not info.is_direct and stack and stack[-1] == (following.pc,
                                                                                               following.isa):
            stack.pop()
            address_packet = False
            expected.returns_from_stack += 1
        if address_packet:
            flush()
            enc.branch(following.pc, following.isa, cycles or 0)
        elif enc.cycle_accurate:
            enc.atom(taken, cycles or 0)
        else:
            pending += "E" if taken else "N"
    flush()
    del expected.rows[covered:]
    return expected
