"""The texts of a walk's `trace_gap` events, as an Arrow string column that compiled code
writes: a walk that leaves the image loses its place thousands of times at hundreds of
addresses, and a Python string per gap (or per distinct gap) cost a small buffer's decode a
fifth of its time.

A text is pieces (`GAP_TEXT` of the reason, fixed words, the failure at a NO_CODE address:
`isa.blocks.no_instruction_text` where the walk noted the address outside the image, else
the text of decoding's failure there) and the address in hex, written into one bytes buffer
with its offsets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np
import pyarrow as pa

from ..isa.blocks import no_instruction_words
from ..model import Isa
from .ops import GAP_TEXT, GapReason

if TYPE_CHECKING:
    from .program import Program

_REASONS = max(GAP_TEXT) + 1
_AT, _OPEN, _CLOSE, _HEX = range(_REASONS, _REASONS + 4)
_NOTE = _REASONS + 4
"""Pieces: GAP_TEXT by reason (0 unused), fixed words, then the words after the address of a
note's failure text by ISA (from _NOTE), then the texts of decoding's failures."""
_ISAS = {int(isa): isa.name for isa in Isa}
_PIECES = [
    *(GAP_TEXT.get(GapReason(r), "") if r else "" for r in range(_REASONS)),
    " at 0x", " (", ")", "0x",
    *(no_instruction_words(_ISAS[i], False) if i in _ISAS else "" for i in range(8)),
]  # fmt: skip
_TEXTS = len(_PIECES)


def gap_texts(reasons: np.ndarray, addresses: np.ndarray, program: Program) -> pa.Array:
    """The texts of gaps with these GapReasons at these addresses (uint64), in `program`."""
    noted_isa, failure, failed = program.failure_kinds(addresses)
    data = [piece.encode() for piece in (*_PIECES, *failed)]
    pieces = np.frombuffer(b"".join(data), np.uint8)
    starts = np.zeros(len(data) + 1, np.int64)
    np.cumsum([len(piece) for piece in data], out=starts[1:])
    offsets = np.empty(len(reasons) + 1, np.int32)
    size = _write(reasons, addresses, noted_isa, failure, pieces, starts, offsets, np.empty(0, np.uint8))
    text = np.empty(size, np.uint8)
    _write(reasons, addresses, noted_isa, failure, pieces, starts, offsets, text)
    return pa.Array.from_buffers(pa.string(), len(reasons), [None, pa.py_buffer(offsets), pa.py_buffer(text)])


@numba.njit(cache=True, nogil=True)
def _write(reasons, addresses, noted_isa, failure, pieces, starts, offsets, text) -> int:
    """The texts into `text` and their offsets, or (an empty `text`) their offsets alone;
    returns their total size."""
    at = 0
    for g in range(len(reasons)):
        offsets[g] = at
        reason, address = reasons[g], np.uint64(addresses[g])
        at = _piece(text, at, pieces, starts, reason)
        if reason == GapReason.VECTOR:
            continue
        at = _piece(text, at, pieces, starts, _AT)
        at = _hex(text, at, address)
        if reason != GapReason.NO_CODE:
            continue
        if noted_isa[g] >= 0:
            at = _piece(text, at, pieces, starts, _OPEN)
            at = _piece(text, at, pieces, starts, _HEX)
            at = _hex(text, at, address)
            at = _piece(text, at, pieces, starts, _NOTE + noted_isa[g])
            at = _piece(text, at, pieces, starts, _CLOSE)
        elif failure[g] >= 0 and starts[_TEXTS + failure[g] + 1] > starts[_TEXTS + failure[g]]:
            at = _piece(text, at, pieces, starts, _OPEN)
            at = _piece(text, at, pieces, starts, _TEXTS + failure[g])
            at = _piece(text, at, pieces, starts, _CLOSE)
    offsets[len(reasons)] = at
    return at


@numba.njit(cache=True, nogil=True, inline="always")
def _piece(text, at, pieces, starts, i) -> int:
    """Piece i at text[at:] (when `text` has room); returns the offset after it."""
    begin, end = starts[i], starts[i + 1]
    if len(text):
        for k in range(end - begin):  # byte by byte: a slice assignment costs more than these copies
            text[at + k] = pieces[begin + k]
    return at + end - begin


@numba.njit(cache=True, nogil=True, inline="always")
def _hex(text, at, value) -> int:
    """`value` in lower-case hex digits without leading zeros at text[at:] (when `text` has
    room); returns the offset after it."""
    digits = 1
    while digits < 16 and value >> np.uint64(4 * digits):
        digits += 1
    if len(text):
        for d in range(digits):
            nibble = (value >> np.uint64(4 * (digits - 1 - d))) & np.uint64(15)
            text[at + d] = nibble + 48 if nibble < 10 else nibble + 87
    return at + digits
