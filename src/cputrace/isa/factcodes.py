"""The fact bits (`insn.F_*`) of every row of a trace chunk, for analyses.

The facts come from the opcode the trace recorded (no image needed), or from the program
image where the trace has no opcode. Each distinct (opcode, size, ISA) is decoded once; a
chunk of millions of rows maps to its facts with one hash pass (Arrow) and one array lookup.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..image import Image, ImageError
from ..model import Isa
from .disasm import opcode_bytes
from .dispatch import SUPPORTED_ISAS, decode
from .insn import InsnInfo, facts_of
from .sparc import sparc_insn

_KNOWN_ISAS = {isa.value: isa for isa in SUPPORTED_ISAS}


def decode_opcode(opcode: int, size: int, isa_value: int) -> InsnInfo | None:
    """Facts of an instruction from its opcode alone (None for an ISA we cannot decode)."""
    isa = _KNOWN_ISAS.get(isa_value)
    if isa is None or size not in (2, 4):
        return None
    if isa is Isa.SPARC:
        return sparc_insn(opcode, 0)
    return decode(opcode_bytes(opcode, size, isa), 0, isa)


class FactCodes:
    """Fact bits per trace row, decoding each distinct instruction once."""

    def __init__(self, image: Image | None = None) -> None:
        self.image = image
        self._by_opcode: dict[int, int] = {}
        self._by_address: dict[int, dict[int, int]] = {}

    def codes(
        self,
        opcode: np.ndarray,
        has_opcode: np.ndarray,
        size: np.ndarray,
        isa: np.ndarray,
        address: np.ndarray,
    ) -> np.ndarray:
        """uint16 fact bits for rows given as column arrays (0 where nothing is known)."""
        keys = (
            opcode.astype(np.uint64)
            | (size.astype(np.uint64) << np.uint64(32))
            | ((isa.astype(np.int64) & 0xFF).astype(np.uint64) << np.uint64(40))
        )
        codes = self._lookup(keys, self._by_opcode, self._decode_key)
        missing = ~has_opcode
        if missing.any():
            codes[missing] = 0
            if self.image is not None:
                for isa_value in np.unique(isa[missing]).tolist():
                    rows = np.flatnonzero(missing & (isa == isa_value))
                    cache = self._by_address.setdefault(isa_value, {})
                    codes[rows] = self._lookup(
                        address[rows], cache, lambda at, v=isa_value: self._decode_address(at, v)
                    )
        return codes

    @staticmethod
    def _lookup(keys: np.ndarray, cache: dict[int, int], decode_key: Callable[[int], int]) -> np.ndarray:
        encoded = pc.dictionary_encode(pa.array(keys, pa.uint64()))
        distinct = encoded.dictionary.to_numpy()
        table = np.empty(len(distinct), dtype=np.uint16)
        for index, key in enumerate(distinct.tolist()):
            code = cache.get(key)
            if code is None:
                code = cache[key] = decode_key(key)
            table[index] = code
        return table[encoded.indices.to_numpy()]

    @staticmethod
    def _decode_key(key: int) -> int:
        info = decode_opcode(key & 0xFFFFFFFF, (key >> 32) & 0xFF, (key >> 40) & 0xFF)
        return facts_of(info) if info is not None else 0

    def _decode_address(self, address: int, isa_value: int) -> int:
        """Facts of the instruction at `address` in the image (0 where the image has none)."""
        isa = _KNOWN_ISAS.get(isa_value)
        if isa is None or self.image is None:
            return 0
        try:
            info = decode(self.image.read_upto(address, 4), address, isa)
        except ImageError:
            return 0
        return facts_of(info) if info is not None else 0
