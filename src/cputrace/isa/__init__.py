"""Instruction facts on top of capstone: size, branch kind, target, condition, memory use.

Decoders of compressed traces walk the program image with these; a BlockCache makes each
(address, ISA) cost one decode however often the walk passes it.
"""

from .blocks import MAX_BLOCK, Block, BlockCache, Stop
from .dispatch import SUPPORTED_ISAS, decode, decode_run
from .insn import InsnInfo, Kind
from .itstate import condition_name, it_conditions
from .sparc import sparc_insn

__all__ = [
    "MAX_BLOCK",
    "SUPPORTED_ISAS",
    "Block",
    "BlockCache",
    "InsnInfo",
    "Kind",
    "Stop",
    "condition_name",
    "decode",
    "decode_run",
    "it_conditions",
    "sparc_insn",
]
