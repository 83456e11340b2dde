"""Generate a Fast-Models-style AArch64 Tarmac trace of N lines for benchmarks.

The program it pretends to run is a loop that calls a leaf function, loads and stores,
and has a conditional branch that sometimes fails, so every hot record type appears in
realistic proportions (about half the lines are instructions).

    python benchmarks/gen_tarmac.py 5000000 out.tarmac
"""

from __future__ import annotations

import sys

# (pc offset, opcode, disassembly, records) for one loop iteration; records use {i} and {a}.
BODY = [
    (0x00, "d2800020", "MOV      x0,#1", ["R X0 {i:016x}"]),
    (0x04, "f9400021", "LDR      x1,[x1,#0]", ["MR8 {a:08x}:{a:012x} {i:08x}_{i:08x}", "R X1 {i:016x}"]),
    (0x08, "8b010000", "ADD      x0,x0,x1", ["R X0 {i:016x}"]),
    (0x0C, "f9000020", "STR      x0,[x1,#0]", ["MW8 {a:08x}:{a:012x} 00000000_{i:08x}"]),
    (0x10, "94000010", "BL       {{pc}}+0x40 ; 0x{t:x}", ["R X30 {r:016x}"]),
    (0x50, "d10043ff", "SUB      sp,sp,#0x10", ["R SP_EL3 {s:016x}"]),
    (0x54, "b9000be0", "STR      w0,[sp,#8]", ["MW4 {s:08x}:{s:012x} {i:08x}"]),
    (0x58, "b9400be0", "LDR      w0,[sp,#8]", ["MR4 {s:08x}:{s:012x} {i:08x}", "R X0 {i:016x}"]),
    (0x5C, "910043ff", "ADD      sp,sp,#0x10", ["R SP_EL3 {s2:016x}"]),
    (0x60, "d65f03c0", "RET", []),
    (0x14, "f100041f", "CMP      x0,#1", ["R cpsr 600003cd"]),
    (0x18, "54000041", "B.NE     {{pc}}+0x8 ; 0x{n:x}", []),
    (0x1C, "17fffff9", "B        {{pc}}-0x1c ; 0x{b:x}", []),
]

BASE = 0x80000


def generate(n_lines: int, out) -> None:
    written = 0
    tick = 0
    i = 0
    while written < n_lines:
        a = 0x100000 + (i % 4096) * 8
        s = 0xFFFF0
        fmt = {"i": i, "a": a, "s": s - 0x10, "s2": s, "r": BASE + 0x14, "t": BASE + 0x50,
               "n": BASE + 0x20, "b": BASE}
        lines = []
        for offset, opcode, disasm, records in BODY:
            pc = BASE + offset
            kind = "IS" if offset == 0x18 and i % 3 else "IT"
            lines.append(
                f"{tick} clk {kind} ({tick}) {pc:08x}:{pc:012x}_NS {opcode} O EL3h_s : "
                + disasm.format(**fmt)
            )
            for record in records:
                lines.append(f"{tick} clk " + record.format(**fmt))
            tick += 1
        out.write("\n".join(lines) + "\n")
        written += len(lines)
        i += 1


if __name__ == "__main__":
    count = int(sys.argv[1])
    with open(sys.argv[2], "w") as f:
        generate(count, f)
