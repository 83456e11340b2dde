"""Memory-cycle type words shared by ARMulator Tracer and the Arm RTL Tarmac dialects.

Both print a memory access as one word such as `MNR4O___` (ARMulator: core, non-sequential,
read, 4 bytes, opcode fetch) or `MNW4___D` / `MR2_I` (Tarmac from RTL). The word starts with
`M` (core) or `B` (off-chip bus), then an optional cycle-type letter, `R`/`W`, the size in
bytes and flag characters, `_` filling unused flag columns. ARMulator may end the word with an
AMBA burst character (`4` or `8`), which is kept in `flags`. `MI`, `MC` and `MIO` are idle,
coprocessor and instruction-bus idle cycles: they move no data, so `op` is empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_WORD = re.compile(
    r"(?P<unit>[MB])(?:"
    r"(?P<cycle>[NSAIC]?)(?P<op>[RW])(?P<size>16|8|4|2|1)"
    r"(?P<flags>[OLSDXTI_R]+[48]|[OLSDXTI_R]*)"
    r"|(?P<idle>[IC])(?P<idle_flags>O?_*)"
    r")"
)


@dataclass(frozen=True)
class CycleWord:
    bus: bool  # word starts with B (off-chip bus cycle) rather than M (core)
    cycle: str  # 'N','S','A','I','C' or '' when the word has no cycle-type letter
    op: str  # 'R' or 'W', or '' for idle/coprocessor cycles without a transfer
    size: int  # bytes, 0 when absent
    flags: str  # the remaining letters with underscores removed, e.g. 'O', 'L', 'OI', 'D', 'X'
    fetch: bool  # an opcode/instruction fetch: flag O, or a trailing I / '_I'
    memory_order: bool  # 8-character word ending in D (Cortex-M RTL): data in memory byte order


@lru_cache(maxsize=256)
def parse_cycle_word(word: str) -> CycleWord | None:
    """The meaning of a cycle type word, or None when `word` is not one.

    Cached because a trace uses a handful of distinct words millions of times.
    """
    m = _WORD.fullmatch(word)
    if m is None:
        return None
    bus = m["unit"] == "B"
    if m["idle"] is not None:
        # No transfer, so no fetch: MIO is an idle cycle on the instruction bus.
        return CycleWord(bus, m["idle"], "", 0, m["idle_flags"].replace("_", ""), False, False)
    flags = m["flags"].replace("_", "")
    fetch = m["op"] == "R" and ("O" in flags or flags.endswith("I"))
    return CycleWord(
        bus, m["cycle"], m["op"], int(m["size"]), flags, fetch, len(word) == 8 and word[-1] == "D"
    )
