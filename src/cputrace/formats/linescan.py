"""Compiled byte-level helpers shared by the line scanners (formats/tarmac/scan.py,
formats/armulator/scan.py): where lines end, whitespace, hex numbers.

Each scanner reads raw bytes in one pass without the GIL and takes only the lines it can store
exactly; these helpers are the parts of that reading the formats have in common. Whitespace
here is what both scanners accept between fields: space, tab and CR (Python's `str.split`
takes CR as whitespace too, so a stray CR splits alike on both paths).

They are plain compiled functions, which LLVM inlines into the scanners all the same: numba's
own inlining (inline="always") made the first compilation three times as long.
"""

from __future__ import annotations

import numba

NEWLINE, SPACE, TAB, CR = ord("\n"), ord(" "), ord("\t"), ord("\r")
_ZERO, _NINE, _LOWER_A, _LOWER_F, _LOWER_Z = ord("0"), ord("9"), ord("a"), ord("f"), ord("z")
_UPPER_A, _UPPER_F, _UPPER_Z = ord("A"), ord("F"), ord("Z")


@numba.njit(cache=True)
def hex_digit(c):
    """The value of hex digit `c`, -1 if it is none."""
    if _ZERO <= c <= _NINE:
        return c - _ZERO
    if _LOWER_A <= c <= _LOWER_F:
        return c - _LOWER_A + 10
    if _UPPER_A <= c <= _UPPER_F:
        return c - _UPPER_A + 10
    return -1


@numba.njit(cache=True)
def is_digit(c):
    return _ZERO <= c <= _NINE


@numba.njit(cache=True)
def is_letter(c):
    return _UPPER_A <= c <= _UPPER_Z or _LOWER_A <= c <= _LOWER_Z


@numba.njit(cache=True)
def is_space(c):
    return c in (SPACE, TAB, CR)


@numba.njit(cache=True)
def skip_spaces(d, p, e):
    """Past the whitespace from p (before e)."""
    while p < e and is_space(d[p]):
        p += 1
    return p


@numba.njit(cache=True)
def hex_run(d, q, e):
    """Up to 16 hex digits from q: (value, digit count, position after them)."""
    val = 0
    nd = 0
    while q < e and hex_digit(d[q]) >= 0 and nd < 16:
        val = val * 16 + hex_digit(d[q])
        q += 1
        nd += 1
    return val, nd, q


@numba.njit(cache=True)
def line_end(d, s, n):
    """Where the line from s ends: at its newline, or n (the end of the data) without one."""
    e = s
    while e < n and d[e] != NEWLINE:
        e += 1
    return e


@numba.njit(nogil=True, cache=True)
def count_newlines(d):
    n = 0
    for c in d:
        n += c == NEWLINE
    return n
