"""A small ETMv4 instruction trace encoder for tests, written from the packet formats of Arm IHI
0064 (chapter 6), and a recorded A64 run turned into the packets a speculating trace unit
could emit for it.

`Etmv4Encoder` appends packets to a byte stream: A-sync, trace info, addresses with context
and long 64-bit IS0 addresses (never compressed), atoms of format 1, commit, cancel formats 1
and 3, mispredict, Q with an instruction count, cycle counts of format 1, exceptions and
exception returns.

`encode_run` walks a recorded run's instructions. Each waypoint (a branch or an ISB) is a P0
atom element, E when the run did not go on to the next instruction in memory; a taken indirect
branch is followed by its target's address, unless the return stack answers it. With
`speculation` (TRCIDR8.MAXSPEC) the elements wait to be committed, and the encoder plays a core
that guesses: some conditional branches are first traced the wrong way round and put right by
a mispredict (alone, or after wrong-path atoms it cancels), and some correct atoms are followed
by wrong-path atoms that it cancels; commits come at random, never leaving more than MAXSPEC
elements uncommitted. Cycle counts (format 1, with the commit they make) go to the last
waypoint they commit. Q elements stand for a random stretch of instructions after a waypoint,
then the address where the run goes on. An exception is its packet, its preferred return
address (after an SVC; an undefined instruction's own, which did not run) and its vector's
address; an ERET is an exception return packet before its atom. `encode_run` returns the rows
and events a decoder should give.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from etm_encoder import Step

import cputrace
from cputrace.ingest import ingest
from cputrace.isa import BlockCache
from cputrace.isa.insn import Kind
from cputrace.model import Isa
from cputrace.record import record

STACK_DEPTH = 16  # the decoder's return stack (flow.ops.RETURN_STACK_DEPTH)
EL1_AARCH64 = 0x11  # context information byte: EL bits 1:0, SF (AArch64) bit 4
EXCEPTION_TYPES = {"svc": 0x2, "udf": 0x3, "brk": 0x6}  # Call, Trap, Inst debug (IHI 0064 table 6-17)


def continued(value: int) -> bytes:
    """A field of 7 bits a byte, the lowest first; bit 7 set when another byte follows."""
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


@dataclass
class Etmv4Encoder:
    out: bytearray = field(default_factory=bytearray)

    @property
    def data(self) -> bytes:
        return bytes(self.out)

    def a_sync(self) -> Etmv4Encoder:
        self.out += bytes(11) + b"\x80"
        return self

    def trace_info(self, *, cycle_counting: bool = False, threshold: int = 0) -> Etmv4Encoder:
        """Trace info with its INFO section (bit 0: cycle counting) and, with cycle counting, its
        CYCT section (the cycle count threshold); speculation depth 0."""
        present = 0x1 | (0x8 if cycle_counting else 0)
        self.out += bytes([0x01, present]) + continued(int(cycle_counting))
        if cycle_counting:
            self.out += continued(threshold)
        return self

    def address(self, address: int, *, context: bool = False) -> Etmv4Encoder:
        """A long 64-bit IS0 address (header 0x9D), or with context (0x85: EL1, AArch64)."""
        self.out.append(0x85 if context else 0x9D)
        self.out += bytes([(address >> 2) & 0x7F, (address >> 9) & 0x7F])
        self.out += (address >> 16).to_bytes(6, "little")
        if context:
            self.out.append(EL1_AARCH64)
        return self

    def atom(self, taken: bool) -> Etmv4Encoder:
        self.out.append(0xF7 if taken else 0xF6)  # format 1: bit 0 E
        return self

    def commit(self, count: int) -> Etmv4Encoder:
        self.out += b"\x2d" + continued(count)
        return self

    def cancel(self, count: int, *, mispredict: bool) -> Etmv4Encoder:
        """Format 1: cancel the newest `count` elements, then (0x2F) mispredict the newest left."""
        self.out += (b"\x2f" if mispredict else b"\x2e") + continued(count)
        return self

    def cancel_and_mispredict(self, count: int) -> Etmv4Encoder:
        """Format 3: cancel 2 to 5 elements, then mispredict the newest left."""
        assert 2 <= count <= 5
        self.out.append(0x38 | (count - 2) << 1)
        return self

    def mispredict(self) -> Etmv4Encoder:
        self.out.append(0x30)  # no atoms after it
        return self

    def q(self, instructions: int) -> Etmv4Encoder:
        self.out += b"\xac" + continued(instructions)  # type 0b1100: a count, no address
        return self

    def exception(self, number: int) -> Etmv4Encoder:
        """An exception of type `number` (A profile), E1:E0 0b01: its address packet follows."""
        self.out += bytes([0x06, (number & 0x1F) << 1 | 1])
        return self

    def exception_return(self) -> Etmv4Encoder:
        self.out.append(0x07)
        return self

    def cycle_count(self, commit: int, cycles: int, threshold: int) -> Etmv4Encoder:
        """Format 1 with its commit section (TRCIDR0.COMMOPT 0): `cycles` beyond the threshold."""
        self.out += b"\x0e" + continued(commit) + continued(cycles - threshold)
        return self


@dataclass
class Expected:
    rows: list[tuple] = field(default_factory=list)  # (pc, executed, cycles or None)
    q_counts: list[int] = field(default_factory=list)  # instructions each Q element stands for
    exceptions: list[tuple[int, int]] = field(default_factory=list)  # (type, preferred return)
    exception_returns: int = 0
    returns_from_stack: int = 0
    mispredicts: int = 0
    cancels: int = 0


def encode_run(enc: Etmv4Encoder, steps: list[Step], blocks: BlockCache, *, speculation: int = 0,
               return_stack: bool = False, cycle_counting: bool = False, threshold: int = 0,
               q_every: int = 0, rng: random.Random) -> Expected:  # fmt: skip
    """Encode the A64 run `steps` into `enc` (after its A-sync and trace info): a step's
    `exception` is the ETMv4 type of the exception taken there, `cancels` when its instruction
    did not run (its own address is the preferred return). The rows end at the last waypoint:
    nothing in the trace covers instructions after it."""
    assert all(step.isa == "A64" for step in steps)
    expected = Expected()
    stack: list[int] = []
    waiting: list[int | None] = []  # uncommitted elements: the row of each waypoint, None for a Q
    covered = 0  # the rows up to the last waypoint

    def room(needed: int) -> None:
        """Commit the oldest elements so that `needed` more stay within MAXSPEC."""
        while len(waiting) + needed > speculation and waiting:
            commit(rng.randint(len(waiting) + needed - speculation, len(waiting)))

    def commit(count: int) -> None:
        last = next((row for row in reversed(waiting[:count]) if row is not None), None)
        if cycle_counting and last is not None and waiting[count - 1] is not None:
            cycles = threshold + rng.randrange(0, 500)
            enc.cycle_count(count, cycles, threshold)
            pc, executed, _ = expected.rows[last]
            expected.rows[last] = (pc, executed, cycles)
        else:
            enc.commit(count)
        del waiting[:count]

    def element(row: int | None) -> None:
        waiting.append(row)
        if speculation == 0:
            waiting.clear()  # committed as it comes

    i, last = 0, len(steps) - 1
    enc.address(steps[0].pc, context=True)
    while i < last:
        step, following = steps[i], steps[i + 1]
        info = blocks.insn_at(step.pc, Isa.A64)
        if step.exception is not None:
            if not step.cancels:
                expected.rows.append((step.pc, True, None))
            covered = len(expected.rows)
            returns_to = step.pc if step.cancels else step.pc + info.size
            room(1)
            enc.exception(step.exception).address(returns_to)
            element(None)
            enc.address(following.pc)  # the vector
            expected.exceptions.append((step.exception, returns_to))
            i += 1
            continue
        if not (info.is_branch or info.is_isb):
            expected.rows.append((step.pc, True, None))
            i += 1
            continue
        taken = following.pc != step.pc + info.size
        expected.rows.append((step.pc, taken, None))
        covered = len(expected.rows)
        wrong_path = rng.randint(0, 5) if speculation and rng.random() < 0.25 else 0
        guessed = speculation and info.is_direct and info.is_conditional and rng.random() < 0.3
        room(1 + wrong_path)
        if info.mnemonic == "eret":
            enc.exception_return()
            expected.exception_returns += 1
        if guessed:  # traced the wrong way round, then put right
            enc.atom(not taken)
            for _ in range(wrong_path):
                enc.atom(rng.random() < 0.5)
            if wrong_path == 0:
                enc.mispredict()
            elif wrong_path >= 2 and rng.random() < 0.5:
                enc.cancel_and_mispredict(wrong_path)
            else:
                enc.cancel(wrong_path, mispredict=True)
            expected.mispredicts += 1
        else:
            enc.atom(taken)
        element(covered - 1)
        if taken and return_stack and info.kind is Kind.CALL:
            stack = [*stack[-(STACK_DEPTH - 1) :], step.pc + info.size]
        address = taken and not info.is_direct
        if address and return_stack and stack and stack[-1] == following.pc:
            stack.pop()
            address = False
            expected.returns_from_stack += 1
        if address:
            enc.address(following.pc)
        if wrong_path and not guessed:  # speculation past it, cancelled
            for _ in range(wrong_path):
                enc.atom(rng.random() < 0.5)
            enc.cancel(wrong_path, mispredict=False)
            expected.cancels += 1
        i += 1
        count = rng.randint(1, 30)  # the instructions a Q stands for, after the waypoint
        if q_every and rng.randrange(q_every) == 0 and i + 40 < last and all(
            s.exception is None for s in steps[i : i + count + 1]
        ):  # fmt: skip
            room(1)
            enc.q(count)
            element(None)
            enc.address(steps[i + count].pc)
            expected.q_counts.append(count)
            stack = []  # the decoder loses its place at a Q: its return stack empties
            i += count
    if waiting:
        commit(len(waiting))
    del expected.rows[covered:]
    return expected


def recorded_a64(program: Path, folder: Path) -> list[Step]:
    """The run of an A64 program (unicorn) as steps, each exception an SVC, UDF or BRK took with
    its ETMv4 type (an SVC ran; UDF and BRK did not: `cancels`, their own address the preferred
    return). `folder` gets the recording and its store."""
    record(program, folder / "run.tarmac")
    trace = cputrace.Trace(ingest([folder / "run.tarmac"], folder / "run.ctrace", strict=True).store)
    query = """SELECT i.pc, i.isa, i.executed, i.disasm, e.seq IS NOT NULL AS taken FROM instructions i
               LEFT JOIN (SELECT DISTINCT seq FROM events WHERE kind = 'exception') e USING (seq)
               ORDER BY i.seq"""
    steps = []
    for row in trace.sql(query).to_pylist():
        kind = EXCEPTION_TYPES.get(row["disasm"].split()[0]) if row["taken"] else None  # not the reset
        cancels = kind is not None and kind != EXCEPTION_TYPES["svc"]
        steps.append(Step(row["pc"], row["isa"], row["executed"], kind, cancels))
    return steps


def encoded_snapshot(folder: Path, stream: bytes, mode: dict) -> Path:
    """A snapshot of one Cortex-A57 and its ETMv4.1 trace unit (registers as `mode`, the keywords
    of encode_run, says: TRCCONFIGR cycle counting bit 4, return stack bit 12, Q elements 14:13;
    TRCIDR0 QSUPP 16:15; TRCIDR8 MAXSPEC), its unformatted stream `stream`; no memory dump: the
    program is given as an image."""
    folder.mkdir()
    trcconfigr = 0x1 | mode.get("cycle_counting", False) << 4 | mode.get("return_stack", False) << 12
    trcconfigr |= (0b01 << 13) if mode.get("q_every") else 0
    trcidr0 = 0x08000CA1 | ((0b01 << 15) if mode.get("q_every") else 0)
    files = {
        "snapshot.ini": "[snapshot]\nversion=1.0\n[device_list]\ndevice1=cpu.ini\ndevice2=etm.ini\n"
        "[trace]\nmetadata=trace.ini\n",
        "cpu.ini": "[device]\nname=cpu_0\nclass=core\ntype=Cortex-A57\n",
        "etm.ini": "[device]\nname=ETM_0\nclass=trace_source\ntype=ETM4.1\n[regs]\n"
        f"TRCCONFIGR(id:0x4)=0x{trcconfigr:08X}\nTRCTRACEIDR(id:0x10)=0x00000010\n"
        f"TRCIDR0(id:0x78)=0x{trcidr0:08X}\nTRCIDR1(id:0x79)=0x4200F410\nTRCIDR2(id:0x7A)=0x20001088\n"
        f"TRCIDR8(id:0x60)=0x{mode.get('speculation', 0):08X}\n",
        "trace.ini": "[trace_buffers]\nbuffers=buffer0\n[buffer0]\nname=FIFO\nfile=trace.bin\n"
        "format=source_data\n[core_trace_sources]\ncpu_0=ETM_0\n[source_buffers]\nETM_0=FIFO\n",
    }  # fmt: skip
    for name, text in files.items():
        (folder / name).write_text(text)
    (folder / "trace.bin").write_bytes(stream)
    return folder / "snapshot.ini"
