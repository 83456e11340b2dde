"""The execution-history model: the four tables every decoder fills and every analysis reads.

Column names, types and meanings, and the store's layout, are a public contract (docs/model.md).
Changing them bumps MODEL_VERSION, and stores written by a newer model are refused by older code.
"""

from __future__ import annotations

import enum

import pyarrow as pa

MODEL_VERSION = 3
"""The newest model version this code reads and writes: 3 lets a table be a folder of parts (a
partitioned store, store/manifest.py); stores of one file per table are still written as 2."""

TABLES = ("instructions", "registers", "memory", "events")


class Isa(enum.IntEnum):
    """Instruction sets; the integer is the dictionary index used in the stores."""

    A32 = 0
    T32 = 1
    A64 = 2
    T32EE = 3
    JAZELLE = 4
    SPARC = 5


ISA_NAMES: tuple[str, ...] = tuple(isa.name for isa in Isa)


class Flag(enum.IntFlag):
    """Bits of `instructions.flags`."""

    TRAP = 0x1  # the instruction trapped
    ERROR_MODE = 0x2  # the processor entered error mode
    FETCH_FAILED = 0x4  # the opcode could not be fetched (printed as --------)
    RECONSTRUCTED = 0x8  # inferred from the program image, not seen in the input
    CANCELLED = 0x10  # cancelled by a later exception


MEMORY_OPS = ("R", "W", "U", "F")  # read, write, update (atomic), instruction fetch
MEMORY_SOURCES = ("core", "bus")

EVENT_KINDS = (
    "exception",
    "exception_return",
    "mode_change",
    "trace_on",
    "trace_gap",
    "overflow",
    "trigger",
    "cache",
    "tlb",
    "ttw",
    "timestamp",
    "context",
    "branch",
    "signal",
    "debug",
    "sysop",
    "coprocessor",
    "header",
    "text",
)

_dict_str = pa.dictionary(pa.int32(), pa.string())

INSTRUCTIONS = pa.schema(
    [
        ("seq", pa.int64()),
        ("time", pa.int64()),
        ("cpu", pa.uint16()),
        ("pc", pa.uint64()),
        ("opcode", pa.uint32()),
        ("size", pa.uint8()),
        ("isa", _dict_str),
        ("mode", _dict_str),
        ("executed", pa.bool_()),
        ("cycles", pa.int64()),
        ("flags", pa.uint16()),
        ("disasm", pa.string()),
        ("src", pa.int64()),
    ]
)

REGISTERS = pa.schema(
    [
        ("seq", pa.int64()),
        ("time", pa.int64()),
        ("cpu", pa.uint16()),
        ("reg", _dict_str),
        ("size", pa.uint16()),
        ("value", pa.uint64()),
        ("wide", pa.binary()),
        ("mask", pa.binary()),
        ("src", pa.int64()),
    ]
)

MEMORY = pa.schema(
    [
        ("seq", pa.int64()),
        ("time", pa.int64()),
        ("cpu", pa.uint16()),
        ("op", _dict_str),
        ("source", _dict_str),
        ("size", pa.uint8()),
        ("addr", pa.uint64()),
        ("paddr", pa.uint64()),
        ("value", pa.uint64()),
        ("wide", pa.binary()),
        ("attrs", pa.string()),
        ("src", pa.int64()),
    ]
)

EVENTS = pa.schema(
    [
        ("seq", pa.int64()),
        ("time", pa.int64()),
        ("cpu", pa.uint16()),
        ("kind", _dict_str),
        ("number", pa.int64()),
        ("name", pa.string()),
        ("value", pa.uint64()),
        ("value1", pa.uint64()),
        ("text", pa.string()),
        ("src", pa.int64()),
    ]
)

SCHEMAS: dict[str, pa.Schema] = {
    "instructions": INSTRUCTIONS,
    "registers": REGISTERS,
    "memory": MEMORY,
    "events": EVENTS,
}
