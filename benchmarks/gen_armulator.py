"""A synthetic ARMulator Tracer file of a core that fetches two instructions ahead.

A loop of `BODY` ARM instructions (every fourth a load or store, every third writing a
register), entered again and again by a branch whose fetched fall-through never runs, with a
`T` time on every 16th instruction and an IRQ event every 4,096: the records a real Tracer
file holds, with a fetch always pending, as the decoder sees them at scale.
"""

from __future__ import annotations

from typing import TextIO

BODY = 64
LOOP = 0x8000


def generate(n_lines: int, out: TextIO) -> None:
    """Write about `n_lines` lines to `out`."""
    out.write("Date: Thu Aug  9 16:41:36 2001\nSource: Armul\nOptions: Trace Instructions  Trace Memory\n")
    out.write(f"MNR4O___ {LOOP:08X} E1A00000\nMNR4O___ {LOOP + 4:08X} E1A00000\n")
    written, seq = 5, 0
    while written < n_lines:
        lines = []
        for i in range(BODY):
            pc = LOOP + 4 * i
            time = f"T {seq:08X} " if seq % 16 == 0 else ""
            if i < BODY - 2:
                lines.append(f"{time}MNR4O___ {pc + 8:08X} E{i:07X}")
            elif i == BODY - 2:
                lines.append(f"MNR4O___ {pc + 8:08X} E1A00000")  # the fall-through: never runs
            if i % 4 == 1:
                op = "R" if i % 8 == 1 else "W"
                lines.append(f"MN{op}4____ {0x20000 + 4 * (seq % 1024):08X} {seq & 0xFFFFFFFF:08X}")
            if i == BODY - 1:
                lines.append(f"{time}IT {pc:08X} eaffffc0 B        0x{LOOP:x}")
                lines.append(f"MNR4O___ {LOOP:08X} E1A00000")
                lines.append(f"MNR4O___ {LOOP + 4:08X} E1A00000")
            else:
                lines.append(f"{time}IT {pc:08X} e{i:07x} ADD      r{i % 13},r{i % 13},#1")
            if i % 3 == 0:
                lines.append(f"R r{i % 13}={seq & 0xFFFFFFFF:08X}, cpsr=600000D3")
            if seq % 4096 == 4095:
                lines.append(f"E {pc:08X} 00000000 7 IRQ")
            seq += 1
        out.write("\n".join(lines) + "\n")
        written += len(lines)
