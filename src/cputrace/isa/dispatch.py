"""Decoding instructions of any supported instruction set from bytes: one entry, per-ISA backends."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from ..model import Isa
from .arm import ARM_ISAS, arm_rows, arm_runs, decode_arm
from .insn import FIRST_CHUNK, LARGEST_CHUNK, Decoded, InsnInfo, Row, as_row, columns_of
from .sparc import decode_sparc

SUPPORTED_ISAS = frozenset({*ARM_ISAS, Isa.SPARC})


def decode_run(code: bytes, address: int, isa: Isa) -> Iterator[InsnInfo]:
    """Consecutive instructions from the start of `code`, which sits at `address`.

    The run ends where the bytes end (a partial instruction is not yielded) or just after
    an undefined instruction (A32/T32/A64; for SPARC every whole word is yielded).
    """
    if isa is Isa.SPARC:
        return decode_sparc(code, address)
    if isa in ARM_ISAS:
        return decode_arm(code, address, isa)
    raise ValueError(f"cannot decode {isa.name} instructions (supported: A32, T32, A64, SPARC)")


def decode_rows(code: bytes, address: int, isa: Isa) -> Iterator[Row]:
    """`decode_run` as rows (InsnInfo fields), for callers that keep many and look at few."""
    if isa in ARM_ISAS:
        return arm_rows(code, address, isa)
    return map(as_row, decode_run(code, address, isa))


def decode(code: bytes, address: int, isa: Isa) -> InsnInfo | None:
    """The first instruction in `code`, or None if `code` is too short to hold it."""
    return next(decode_run(code, address, isa), None)


def decode_runs(code: bytes, address: int, isa: Isa) -> Iterator[Decoded]:
    """`decode_run` as columns, in growing chunks: a caller that stops at the first branch
    decodes little past it, and builds no rows unless it asks for them."""
    if isa in ARM_ISAS:
        yield from arm_runs(code, address, isa)
        return
    rows = decode_rows(code, address, isa)
    count = FIRST_CHUNK
    while chunk := tuple(itertools.islice(rows, count)):
        yield Decoded(isa, columns_of(chunk), lambda chunk=chunk: chunk)
        count = min(count * 2, LARGEST_CHUNK)
