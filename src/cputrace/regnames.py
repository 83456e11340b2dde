"""Canonical register names, so every input format names a register the same way.

Names are lower case. Banked suffixes (`_svc`, `_mon`, `_s`, `_ns`, `_el3`) are kept because
they name different physical registers. Producer aliases are folded: `lr`/`sp`/`pc` of
AArch32 become `r14`/`r13`/`r15`, `w<n>` (a 32-bit write that zero-extends) and `e<n>` become
`x<n>`, and `cpsr`/`psr`/`xpsr` stay as printed since their widths and fields differ.
"""

from __future__ import annotations

import re
from functools import lru_cache

_AARCH32_ALIASES = {"sp": "r13", "lr": "r14", "pc": "r15", "fp": "r11", "ip": "r12"}
_XREG = re.compile(r"([we])(\d{1,2})")


@lru_cache(maxsize=4096)
def canonical_register(name: str, nbytes: int = 0) -> str:
    """The canonical name of register `name` as printed with a value of `nbytes` bytes."""
    low = name.lower()
    base, sep, suffix = low.partition("_")
    m = _XREG.fullmatch(base)
    if m and int(m.group(2)) <= 30:
        return f"x{m.group(2)}{sep}{suffix}"
    if base in _AARCH32_ALIASES and not (base == "sp" and (nbytes > 4 or suffix.startswith("el"))):
        return f"{_AARCH32_ALIASES[base]}{sep}{suffix}"
    return low
