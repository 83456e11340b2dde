"""Turn a `qemu-<arch> -singlestep -d exec,nochain` log into a Fast-Models-style Tarmac trace.

Each `Trace` line of the log is one executed instruction (one instruction per translation
block); its guest pc is the second field in brackets. Opcodes, sizes and disassembly come
from the ELF. QEMU does not say whether a conditional instruction passed its condition, so
every instruction is written as executed (IT); branch outcomes show in the next pc.

    python qemu_to_tarmac.py PROGRAM.elf QEMU.log > PROGRAM.tarmac
"""

from __future__ import annotations

import re
import sys

from cputrace.image import load_elf
from cputrace.isa import decode
from cputrace.model import Isa

_TRACE = re.compile(r"Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")
_LETTER = {Isa.A64: "O", Isa.A32: "A", Isa.T32: "T"}


def main(elf: str, log: str) -> None:
    image = load_elf(elf)
    with open(log) as lines:
        pcs = [int(m.group(1), 16) for m in map(_TRACE.match, lines) if m]
    for tick, pc in enumerate(pcs):
        isa = image.symbols.state_at(pc) or Isa.A64
        info = decode(image.read_upto(pc, 4), pc, isa)
        digits = 2 * info.size
        mode = "EL0t_n" if isa is Isa.A64 else "usr"
        print(
            f"{tick} clk IT ({tick}) {pc:08x} {info.opcode:0{digits}x} {_LETTER[isa]} {mode} : {info.disasm}"
        )


if __name__ == "__main__":
    main(*sys.argv[1:])
