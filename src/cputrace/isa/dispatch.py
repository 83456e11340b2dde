"""Decoding instructions of any supported instruction set from bytes: one entry, per-ISA backends."""

from __future__ import annotations

from collections.abc import Iterator

from ..model import Isa
from .arm import ARM_ISAS, arm_rows, decode_arm
from .insn import InsnInfo, Row, as_row
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
