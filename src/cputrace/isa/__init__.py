"""Instruction facts on top of capstone: size, branch kind, target, condition, memory use.

Decoders of compressed traces walk the program image with these; a BlockCache makes each
(address, ISA) cost one decode however often the walk passes it. A walk's own A64 blocks
come from a compiled flow classifier instead (`flow_a64`, `flowblock`): the same facts, for
the flow alone, without capstone.
"""

from .blocks import Block, BlockCache, Stop, decode_block, decode_columns
from .disasm import Disassembler, fill_disasm, opcode_bytes
from .dispatch import SUPPORTED_ISAS, decode, decode_rows, decode_run
from .ends import MAX_BLOCK
from .insn import ROW, InsnInfo, Kind, Row
from .itstate import condition_name, it_conditions
from .sparc import sparc_insn

__all__ = [
    "MAX_BLOCK",
    "ROW",
    "SUPPORTED_ISAS",
    "Block",
    "BlockCache",
    "Disassembler",
    "InsnInfo",
    "Kind",
    "Row",
    "Stop",
    "condition_name",
    "decode",
    "decode_block",
    "decode_columns",
    "decode_rows",
    "decode_run",
    "fill_disasm",
    "it_conditions",
    "opcode_bytes",
    "sparc_insn",
]
