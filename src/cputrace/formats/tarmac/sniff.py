"""Recognising Tarmac text from its first lines."""

from __future__ import annotations

import re

from ...timeunits import COUNTING_UNITS, SECOND_EXPONENTS

_UNITS = "|".join(sorted((*COUNTING_UNITS, *SECOND_EXPONENTS), key=len, reverse=True)).encode()
_SNIFF_LINE = re.compile(
    rb"\s*(?:(\d+(?:\.\d+)?)\s*(?:" + _UNITS + rb")\s+)?(?:cpu\d+\s+)?"
    rb"(?:IT|IS|ES|FD|FI|R|M[RW]\d+\w*|MU\d+_\w+|E|EXC|LD|ST|BR|CACHE|TTW|TTU|TLB|Tarmac Text)\s"
)


def sniff(head: bytes) -> int:
    """The share of lines shaped like Tarmac records (full marks for a time and unit)."""
    lines = [ln for ln in head.splitlines()[:200] if ln.strip()]
    if lines and len(head) >= 64 << 10:
        lines = lines[:-1]  # possibly cut short by the head's size
    if not lines:
        return 0
    score = 0.0
    for line in lines:
        m = _SNIFF_LINE.match(line)
        if m:
            score += 1.0 if m.group(1) or b"Tarmac Text" in line else 0.5
    return int(100 * score / len(lines))
