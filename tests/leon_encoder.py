"""Ground truth for the LEON decoders: SPARC programs run under unicorn or QEMU, and the ITB
lines a LEON3 would have written for those runs (full, wrapped, filtered, text form, AHB lines).

The encoder decides the multi-cycle entries from the recording itself (which memory
accesses each instruction made), not from the decoder's tables, so a decoder that misreads
them cannot agree with it by construction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import unicorn
from unicorn import sparc_const

from cputrace.image import load_image_spec

REGISTERS = tuple(f"{bank}{n}" for bank in "goli" for n in range(8))
_UC_REGISTERS = tuple(getattr(sparc_const, f"UC_SPARC_REG_{name.upper()}") for name in REGISTERS)
MEMORY = (0x40000000, 0x20000)
TRAP = 1 << 33
ERROR = 1 << 32
MULTI = 1 << 126


@dataclass
class Step:
    """One executed instruction: what the ITB and the model should say about it."""

    pc: int
    opcode: int
    regs: dict[str, int] = field(default_factory=dict)  # the register file after it
    reads: list[tuple[int, int, int]] = field(default_factory=list)  # (addr, size, value)
    writes: list[tuple[int, int, int]] = field(default_factory=list)
    trap: bool = False
    npc: int | None = None  # nPC as it ran (its delay slot, if a transfer), when the recorder knows

    @property
    def op(self) -> int:
        return self.opcode >> 30

    @property
    def op3(self) -> int:
        return (self.opcode >> 19) & 0x3F

    @property
    def rd(self) -> int:
        return (self.opcode >> 25) & 0x1F

    def is_jmpl(self) -> bool:
        return self.op == 2 and self.op3 == 0x38

    def is_transfer(self) -> bool:
        """CALL, Bicc/FBfcc/CBccc, JMPL, RETT: what the control-flow filter keeps."""
        if self.op == 1:
            return True
        if self.op == 0:
            return (self.opcode >> 22) & 7 in (2, 6, 7)
        return self.op == 2 and self.op3 in (0x38, 0x39)


_UNALIGNED = 7


def _jmpl_target(step: Step, regs: dict[str, int]) -> int:
    """Where a JMPL goes: unicorn 2.1.4 raises an alignment trap for every JMPL (after its
    delay slot ran and its link register was written), so the recorder completes the jump."""
    word = step.opcode
    rs1 = regs[REGISTERS[(word >> 14) & 0x1F]]
    operand = (word & 0x1FFF) - ((word & 0x1000) << 1) if word >> 13 & 1 else regs[REGISTERS[word & 0x1F]]
    return (rs1 + operand) & 0xFFFFFFFF


def record(elf: str, limit: int = 10_000) -> list[Step]:
    """Run the program from its entry point until it traps (or `limit` instructions)."""
    image = load_image_spec(elf)
    uc = unicorn.Uc(unicorn.UC_ARCH_SPARC, unicorn.UC_MODE_SPARC32 | unicorn.UC_MODE_BIG_ENDIAN)
    uc.ctl_set_cpu_model(sparc_const.UC_CPU_SPARC32_LEON3)
    uc.mem_map(*MEMORY)
    for region in image.regions:
        uc.mem_write(region.start, region.data)
    steps: list[Step] = []

    def registers() -> dict[str, int]:
        pairs = zip(REGISTERS, _UC_REGISTERS, strict=True)
        return {name: uc.reg_read(reg) & 0xFFFFFFFF for name, reg in pairs}

    def on_code(uc, address, size, _):
        if steps:
            steps[-1].regs = registers()
        steps.append(Step(address, int.from_bytes(uc.mem_read(address, 4), "big")))

    def on_read(uc, access, address, size, value, _):
        steps[-1].reads.append((address, size, int.from_bytes(uc.mem_read(address, size), "big")))

    def on_write(uc, access, address, size, value, _):
        steps[-1].writes.append((address, size, value & ((1 << (8 * size)) - 1)))

    resume: list[int] = []

    def on_trap(uc, number, _):
        if number == _UNALIGNED and len(steps) >= 2 and steps[-2].is_jmpl():
            resume.append(_jmpl_target(steps[-2], steps[-3].regs if len(steps) >= 3 else registers()))
        else:
            steps[-1].trap = True
        uc.emu_stop()

    uc.hook_add(unicorn.UC_HOOK_CODE, on_code)
    uc.hook_add(unicorn.UC_HOOK_MEM_READ, on_read)
    uc.hook_add(unicorn.UC_HOOK_MEM_WRITE, on_write)
    uc.hook_add(unicorn.UC_HOOK_INTR, on_trap)
    start = image.entry
    while True:
        uc.emu_start(start, MEMORY[0] + MEMORY[1], count=limit - len(steps))
        if not resume or len(steps) >= limit:
            break
        start = resume.pop()
    last = steps[-1]
    if not last.regs:
        last.regs = registers() if not last.trap else dict(steps[-2].regs)
    return steps


_QEMU_STATE = re.compile(r"^pc: ([0-9a-f]+)  npc: ([0-9a-f]+)$")
_QEMU_BANK = re.compile(r"^%([goli])0-7:((?: [0-9a-f]{8}){8})")


def record_qemu(elf: str, log: str) -> list[Step]:
    """The run of `elf` that QEMU logged (`-singlestep -d exec,cpu,nochain`, see
    data/leon/build.sh), from the ELF's entry point: one Step per logged instruction.

    Each block of the log is the state before one instruction (pc, npc, the registers of the
    current window). An instruction trapped when the next pc is neither its npc nor, past an
    annulled delay slot, npc + 4. The log ends at `ta 0` with traps off, which stops QEMU: a
    trap too. The program makes no loads or stores, so steps have no memory accesses.
    """
    image = load_image_spec(elf)
    states: list[tuple[int, int, dict[str, int]]] = []
    with open(log) as lines:
        for line in lines:
            if m := _QEMU_STATE.match(line):
                states.append((int(m[1], 16), int(m[2], 16), {}))
            elif m := _QEMU_BANK.match(line):
                bank = states[-1][2]
                bank.update({f"{m[1]}{n}": int(v, 16) for n, v in enumerate(m[2].split())})
    start = next(i for i, (pc, _, _) in enumerate(states) if pc == image.entry)
    run = states[start:]
    steps = []
    for (pc, npc, regs), after in zip(run, [*run[1:], None], strict=True):
        opcode = int.from_bytes(image.read(pc, 4), "big")
        step = Step(pc, opcode, regs=after[2] if after else dict(regs), npc=npc)
        step.trap = after is None or after[0] not in (npc, npc + 4)
        steps.append(step)
    return steps


def _words(accesses: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Accesses split into (at most) 32-bit pieces, in address order."""
    pieces = []
    for address, size, value in sorted(accesses):
        for offset in range(0, size, 4):
            width = min(4, size - offset)
            shift = 8 * (size - offset - width)
            pieces.append((address + offset, width, (value >> shift) & ((1 << (8 * width)) - 1)))
    return pieces


def results(step: Step) -> list[int]:
    """The result field of each ITB entry of `step`: one per cycle the ITB records."""
    if step.trap:
        return [0]
    writes, reads = _words(step.writes), _words(step.reads)
    loaded = [step.regs[REGISTERS[step.rd]], step.regs[REGISTERS[step.rd | 1]]]
    if writes and reads:  # atomic: the loaded value, then the stored one
        return [loaded[0], writes[0][2]]
    if writes:
        return [writes[0][0], *(value for _, _, value in writes)]
    if reads:
        return loaded[: len(reads)]
    if step.op == 1:
        return [step.pc]
    return [step.regs[REGISTERS[step.rd]] if step.op == 2 or (step.op == 0 and step.rd) else 0]


def entries(steps: list[Step], first_time: int = (1 << 30) - 40, cycles: int = 3) -> list[int]:
    """ITB lines (128-bit integers) for every step, oldest first; time tags wrap at 2**30."""
    lines = []
    for step in steps:
        for k, result in enumerate(results(step)):
            tag = (first_time + cycles * len(lines)) & 0x3FFFFFFF
            lines.append(
                (MULTI if k else 0) | tag << 96 | result << 64 | step.pc << 32 | (TRAP if step.trap else 0)
                | step.opcode
            )  # fmt: skip
    return lines


def _taken(steps: list[Step], t: int) -> bool:
    """Whether transfer step t was taken, from the pcs that ran after it."""
    step = steps[t]
    after = [s.pc for s in steps[t + 1 : t + 3]]
    if step.op != 0 or (step.opcode >> 25) & 0xF == 8:  # CALL, JMPL, RETT, BA
        return True
    if step.opcode >> 29 & 1:  # annulling: the delay slot ran only if taken
        return after[:1] == [step.pc + 4 if step.npc is None else step.npc]
    displacement = (step.opcode & 0x3FFFFF) - ((step.opcode & 0x200000) << 1)
    return after[1:2] == [(step.pc + 4 * displacement) & 0xFFFFFFFF]


def control_flow(steps: list[Step]) -> list[Step]:
    """The steps TFILT 2 keeps (LEON3 iu3.vhd, `itfilt`): transfers, trapped instructions, and
    the instruction run at each taken transfer's target, which is the step after its delay
    slot (a delay slot may be a transfer itself: a DCTI couple), or right after an annulled
    one; and, as the decoder assumes, the first instruction of a trap handler. Annulled
    instructions never ran: they are no steps, and a target annulled by a couple's second
    transfer is traced nowhere (a recorder that knows the npc tells the step after it apart)."""
    targets = set()
    for t, step in enumerate(steps):
        if step.trap:
            targets.add(t + 1)
        elif step.is_transfer() and _taken(steps, t):
            if step.op == 0 and (step.opcode >> 25) & 0xF == 8 and step.opcode >> 29 & 1:  # ba,a
                targets.add(t + 1)
            elif t + 2 < len(steps) and steps[t + 1].npc in (None, steps[t + 2].pc):
                targets.add(t + 2)
    return [s for i, s in enumerate(steps) if s.is_transfer() or s.trap or i in targets]


def buffer(lines: list[int], size: int, start: int = 0) -> tuple[bytes, int]:
    """A `size`-line circular buffer written from line `start`: its bytes and the final pointer."""
    slots = [0] * size
    for k, line in enumerate(lines):
        slots[(start + k) % size] = line
    return b"".join(line.to_bytes(16, "big") for line in slots), (start + len(lines)) % size


def text(dump: bytes, **settings: int | str) -> str:
    """The text form of a raw dump, under a header with `settings`."""
    header = " ".join(f"{k}={v:#x}" if isinstance(v, int) and k == "itbc0" else f"{k}={v}"
                      for k, v in settings.items())  # fmt: skip
    rows = [" ".join(dump[i + j : i + j + 4].hex() for j in range(0, 16, 4)) for i in range(0, len(dump), 16)]
    return f"# leon-trace {header}\n" + "\n".join(rows) + "\n"


def ahb_line(time: int, address: int, data: int, *, write: bool, hsize: int = 2, master: int = 0,
             htrans: int = 2, hburst: int = 0, hresp: int = 0, locked: bool = False,
             breakpoint: bool = False) -> int:  # fmt: skip
    """One AHB trace buffer line (GR740 layout)."""
    control = (
        int(write) << 15 | htrans << 13 | hsize << 10 | hburst << 7 | master << 3 | int(locked) << 2 | hresp
    )
    return int(breakpoint) << 127 | (time & 0x3FFFFFFF) << 96 | control << 64 | data << 32 | address
