"""The instructions of an image that walks have reached, decoded once, as records compiled
code reads.

Every address a walk reaches is decoded once (a basic block at a time) into `Program.insns`,
and the links between blocks are cached there (`next_idx`, `target_idx`), so a loop that runs
a million times costs one decode and a million record reads. When a walk meets an address
not yet decoded it returns to Python, which decodes the block (`Program.decode`) and resumes
it. The instruction sets of `isa.flowblock.FLOW_ISAS` are decoded by compiled flow
classifiers, and inside the walk itself (`found`): the walk reads the image as arrays
(`Program.code`) and returns to Python only where the records or the index need room, where
and where a block runs on into the next region or has no whole instruction there (for the
failure's text). An address the image does not hold at all the walk marks NO_CODE itself,
noting the key for the failure's text (`Program.failures`): a trace that leaves the image
does so at hundreds of addresses, each a return to Python otherwise. The other instruction
sets are decoded by capstone (`isa.decode_columns`).
"""

from __future__ import annotations

import numba
import numpy as np

from ..image import Image, ImageError
from ..isa import BlockCache, decode_columns
from ..isa.blocks import no_instruction, no_instruction_text
from ..isa.ends import GOES_ON, WINDOW
from ..isa.flowblock import BLOCK_ROWS, FLOW_ISAS, block_rows, flow_block
from ..isa.index import MISSING, AddressIndex, as_int64, lookup, put
from ..isa.insn import (
    C_ADDRESS,
    C_FACTS,
    C_NEXT_ISA,
    C_OPCODE,
    C_SIZE,
    C_TARGET,
    F_ANNUL,
    F_BRANCH,
    F_CALL,
    F_CONDITIONAL,
    F_DATA_BARRIER,
    F_DELAY,
    F_DIRECT,
    F_HAS_CONDITION,
    F_HAS_TARGET,
    F_ISB,
    F_TRAP,
    F_UNDEFINED,
)
from ..kernels.growth import grown
from ..model import Isa

INSN = np.dtype(
    [
        ("pc", "<u8"), ("target", "<u8"), ("next_idx", "<i8"), ("target_idx", "<i8"), ("opcode", "<u4"),
        ("flags", "<u2"), ("size", "u1"), ("isa", "u1"), ("next_isa", "u1"),
    ],
    align=True,
)  # fmt: skip
"""One decoded instruction: `pc`, `size`, `opcode`, `isa`, `flags` (the bits below), `target`
of a direct branch (0 otherwise) and the ISA there (`next_isa`, NO_ISA when unknown), and the
cached links: the index of the next instruction in sequence (`next_idx`) and of the branch
target (`target_idx`), UNRESOLVED until a walk has looked them up."""

# Instruction facts in INSN.flags: bits of the decoded columns' C_FACTS, and four more.
BRANCH = F_BRANCH
DIRECT = F_DIRECT  # with the target known
CONDITIONAL = F_CONDITIONAL  # may not branch/execute (condition, CBZ-style test)
HAS_COND = F_HAS_CONDITION  # not taken means condition failed (B<cond>), unlike CBZ
UNDEFINED = F_UNDEFINED  # and not a trap by design
DELAY = F_DELAY  # SPARC: has a delay slot
ANNUL = F_ANNUL  # SPARC: the annul bit
TRAP = F_TRAP  # raises an exception by design
CALL = F_CALL  # a branch with link: a taken one pushes its return address on a trace's return stack
ISB = 1 << 13  # an instruction synchronisation barrier (F_ISB): a PTM/ETMv4 waypoint
DATA_BARRIER = 1 << 2  # DSB or DMB (F_DATA_BARRIER): a waypoint of some PTMs (WAYPOINT_DATA_BARRIERS)
THUMB_PAIR = 1 << 14  # T32 BL/BLX (immediate): before Thumb-2, a pair of 16-bit instructions
BLOCK_END = 1 << 15  # the following instruction is found through the index, not at idx + 1
_FACTS = BRANCH | DIRECT | CONDITIONAL | HAS_COND | UNDEFINED | DELAY | ANNUL | TRAP | CALL
assert not _FACTS & (ISB | DATA_BARRIER | THUMB_PAIR | BLOCK_END)

_ISA_VALUES = frozenset(int(isa) for isa in Isa)
_ISA_NAMES = {int(isa): isa.name for isa in Isa}
UNRESOLVED = MISSING
"""A link or position not known (yet)."""
NO_CODE = -2
"""Index value: decoding failed there (the reason in Program.failures)."""
ADDRESS_MASK = (1 << 64) - 1


def key_address(key: int) -> int:
    """The address of an index key (address << 3 | ISA, int64). The key keeps the low 61 bits
    of the address: an address whose top bits are all ones (an AArch64 kernel's, 0xFFFF...) or
    all zeros comes back whole, by sign extension."""
    return (key >> 3) & ADDRESS_MASK


class Program:
    """The instructions of an image that walks have reached, as INSN records plus an index
    from (address << 3 | ISA) to record.

    Shared by the walkers of all cores that run the same image.
    """

    def __init__(self, image: Image, capacity: int = 4096) -> None:
        self.image = image
        self.blocks = BlockCache(image)  # whole blocks, for decoders that need facts beside the walk
        self._count = np.zeros(1, np.int64)  # records in use, in an array compiled code updates
        self.insns = np.zeros(capacity, INSN)
        self.index = AddressIndex(2 * (BLOCK_ROWS + 1))  # a whole block's keys at half load from the start
        self._failures: dict[int, str] = {}  # decoding's failures, by address, at none of the walk's notes
        self._outside = np.zeros(OUTSIDE_NOTES, np.int64)  # keys `found` marked NO_CODE, not yet read
        self._outside_count = np.zeros(1, np.int64)
        self._noted = np.zeros(0, np.uint64)  # the addresses of the notes read, sorted, each with the
        self._noted_isas = np.zeros(0, np.int64)  # ISA of its first note: its no_instruction_text
        self._failed = np.zeros(0, np.uint64)  # the addresses of _failures, sorted, each with
        self._failed_texts = np.zeros(0, np.int64)  # the index of its text among _failures' values
        self._leftovers: dict[int, np.ndarray] = {}  # see decode_columns
        self._rows = block_rows()  # flow_block's rows
        self._code: Code | None = None

    @property
    def count(self) -> int:
        """How many records are in use."""
        return int(self._count[0])

    @property
    def failures(self) -> dict[int, str]:
        """Why decoding failed, by address (the first failure there, whatever the ISA)."""
        self._read_notes()
        noted = zip(self._noted.tolist(), self._noted_isas.tolist(), strict=True)
        return {address: no_instruction_text(address, _ISA_NAMES[isa], False) for address, isa in noted} | (
            self._failures
        )

    def failure_kinds(self, addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """How the failure at each of `addresses` (uint64) reads, without a string per address
        (a walk that leaves the image names thousands of them): the ISA of the walk's note there
        (its text is `no_instruction_text`'s) or -1; else an index into the texts of decoding's
        failures, which follow, or -1 (no failure there)."""
        self._read_notes()
        noted_isa, text = np.full(len(addresses), -1, np.int64), np.full(len(addresses), -1, np.int64)
        at, hit = _found_in(self._noted, addresses)
        noted_isa[hit] = self._noted_isas[at[hit]]
        at, hit = _found_in(self._failed, addresses)
        text[hit] = self._failed_texts[at[hit]]
        return noted_isa, text, list(self._failures.values())

    def _read_notes(self) -> None:
        """Take the walk's notes of addresses outside the image (`found`) into the sorted ones,
        in the order it made them: an address's first failure, a note or decoding's, wins."""
        count = int(self._outside_count[0])
        if not count:
            return
        keys = self._outside[:count]
        keys = keys[~_found_in(self._failed, (keys >> 3).view(np.uint64))[1]]  # decoding's failure came first
        addresses = np.concatenate((self._noted, (keys >> 3).view(np.uint64)))
        addresses, first = np.unique(addresses, return_index=True)
        self._noted, self._noted_isas = addresses, np.concatenate((self._noted_isas, keys & 7))[first]
        self._outside_count[0] = 0

    def _fail(self, address: int, text: str) -> None:
        """Decoding failed at `address`: noted unless a failure there came first."""
        self._read_notes()
        if address not in self._failures and not _found_in(self._noted, np.array([address], np.uint64))[1][0]:
            at = int(np.searchsorted(self._failed, np.uint64(address)))
            self._failed = np.insert(self._failed, at, np.uint64(address))
            self._failed_texts = np.insert(self._failed_texts, at, len(self._failures))
            self._failures[address] = text

    @property
    def code(self) -> Code:
        """What the walk decodes blocks with (`found`): the image as arrays, made on first use."""
        if self._code is None:
            architecture = self.image.architecture
            isas = sum(1 << isa for isa in FLOW_ISAS if architecture is None or isa in architecture.isas)
            regions = self.image.regions if isas else ()  # no copy of the image unless it is walked here
            starts = np.array([_ordered(r.start) for r in regions], np.int64)
            sizes = np.array([len(r.data) for r in regions], np.int64)
            offsets = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
            data = np.frombuffer(b"".join(r.data for r in regions), np.uint8)
            self._code = (
                np.array([isas], np.int64), starts, sizes, offsets, data, self._rows, self._count,
                self._outside, self._outside_count,
            )  # fmt: skip
        return self._code

    def decode(self, key: int) -> None:
        """Decode the block at `key` (address << 3 | ISA) into the records; an ISA the trace
        left unknown (an ETMv4 address before any context packet) is a failure there."""
        address = key_address(key)
        architecture = self.image.architecture
        try:  # up to the next unconditional branch, or to code decoded before from another entry point
            if key & 7 not in _ISA_VALUES:
                raise ImageError(f"0x{address:x}: the trace has not said which instruction set runs there")
            isa = Isa(key & 7)
            if architecture is not None and isa not in architecture.isas:
                raise ImageError(f"the image holds {architecture.name} code, not {isa.name}")
            if isa in FLOW_ISAS:
                self._decode_flow(address, isa)
                return
            columns = decode_columns(self.image, address, isa, self.index, self._leftovers)
        except (ImageError, ValueError) as exc:  # ValueError: an instruction set isa/ cannot decode
            self.index.add(np.array([key], np.int64), np.array([NO_CODE], np.int64))
            self._fail(address, str(exc))
            return
        start = self.count
        self.insns = grown(self.insns, start + len(columns) - 1)
        _fill(columns, start, int(isa), self.insns, *self.index.claim(len(columns)))
        self._count[0] = start + len(columns)

    def _decode_flow(self, address: int, isa: Isa) -> None:
        """Decode a block by the compiled flow classifiers: one image read, one compiled call."""
        code = self.image.read_upto(address, WINDOW)
        self.insns = grown(self.insns, self.count + BLOCK_ROWS - 1)
        table, counts = self.index.claim(BLOCK_ROWS)
        decoded = _decode_flow(
            np.frombuffer(code, np.uint8), as_int64(address), int(isa), True, self.insns, table, counts,
            self._rows, self._count,
        )  # fmt: skip
        if not decoded:
            raise no_instruction(address, isa, code)


@numba.njit(cache=True, nogil=True)
def _decode_flow(code: np.ndarray, address: int, isa: int, final: bool, insns: np.ndarray, index: np.ndarray,
                 counts: np.ndarray, rows: np.ndarray, count: np.ndarray) -> int:  # fmt: skip
    """The block at `address`, in `code` (`flow_block`), into the records from count[0] on,
    with its index entries; how many. 0 when there is no whole instruction, or when the bytes
    end inside the block and more may follow them (not `final`)."""
    length, why = flow_block(code, address, isa, index, rows)
    if length == 0 or (why == GOES_ON and not final):
        return 0
    _fill(rows[:length], count[0], isa, insns, index, counts)
    count[0] += length
    return length


Code = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
             np.ndarray]  # fmt: skip
"""`Program.code`: the ISAs decoded in the walk (a bit each), the image's regions (starts as
`_ordered` keeps them, sizes, offsets in the data), their bytes, flow_block's rows, the count
of records, and the keys `found` marked NO_CODE outside the image with their count."""
OUTSIDE_NOTES = 1024
"""Keys outside the image the walk can mark NO_CODE between two looks at `Program.failures`;
past them it returns to Python (`Program.decode`), which notes them first."""
_SIGN = np.int64(-(1 << 63))


def _found_in(sorted_values: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of `values` is in `sorted_values`, and whether it is there (np.isin took
    milliseconds over uint64 addresses near the top of the address space)."""
    if not len(sorted_values):
        return np.zeros(len(values), np.int64), np.zeros(len(values), np.bool_)
    at = np.minimum(np.searchsorted(sorted_values, values), len(sorted_values) - 1)
    return at, sorted_values[at] == values


def _ordered(address: int) -> int:
    """An address as an int64 that sorts as the unsigned address does: its sign bit flipped."""
    return as_int64(address ^ (1 << 63))


@numba.njit(cache=True, nogil=True)
def found(key: int, insns: np.ndarray, index: np.ndarray, counts: np.ndarray, code: Code) -> int:
    """The record of `key` in the index (lookup), after decoding its block when the walk can
    here: an ISA of FLOW_ISAS, room in the records and the index, and a block that ends inside
    its region of the image. NO_CODE for an address the image does not hold (noted for the
    failure's text). UNRESOLVED when Python must decode it (`Program.decode`)."""
    at = lookup(index, key)
    isas, starts, sizes, offsets, data, rows, count, outside, outside_count = code
    isa = key & 7
    if at != UNRESOLVED or not isas[0] >> isa & 1:
        return at
    address = key >> 3  # sign-extended: the int64 pattern of the address (see key_address)
    region = np.searchsorted(starts, address ^ _SIGN, side="right") - 1
    offset = (address ^ _SIGN) - starts[region]  # negative: 2**63 or more past the region's start
    if region < 0 or offset < 0 or offset >= sizes[region]:
        if outside_count[0] == len(outside) or 2 * (counts[0] + counts[1] + 2) > len(index):
            return UNRESOLVED
        put(index, counts, key, NO_CODE)  # as Program.decode would, reading nothing there
        outside[outside_count[0]] = key
        outside_count[0] += 1
        return NO_CODE
    if count[0] + len(rows) > len(insns) or 2 * (counts[0] + counts[1] + len(rows) + 1) > len(index):
        return UNRESOLVED
    begin = offsets[region] + offset
    end = offsets[region] + sizes[region]
    window = min(end, begin + WINDOW)
    length = _decode_flow(data[begin:window], address, isa, window < end, insns, index, counts, rows, count)
    return count[0] - length if length else UNRESOLVED  # none there, or it may go on in the next region


@numba.njit(cache=True, nogil=True)
def _fill(columns: np.ndarray, start: int, block_isa: int, insns: np.ndarray, index: np.ndarray,
          counts: np.ndarray) -> None:  # fmt: skip
    """Records of a block's instructions from its decoded columns, from index `start`, and
    their index entries (in arrays with room for them)."""
    for i in range(len(columns)):
        facts, at = columns[i, C_FACTS], start + i
        put(index, counts, (columns[i, C_ADDRESS] << 3) | block_isa, at)
        insn = insns[at]
        insn.isa = block_isa
        flag = facts & _FACTS
        if facts & F_TRAP:
            flag &= ~UNDEFINED  # a trap by design is defined
        if not facts & F_HAS_TARGET:
            flag &= ~DIRECT
        if facts & F_ISB:
            flag |= ISB
        if facts & F_DATA_BARRIER:
            flag |= DATA_BARRIER
        if block_isa == Isa.T32 and _is_bl_pair(columns[i, C_SIZE], columns[i, C_OPCODE]):
            flag |= THUMB_PAIR
        insn.pc, insn.size, insn.opcode = columns[i, C_ADDRESS], columns[i, C_SIZE], columns[i, C_OPCODE]
        insn.flags = flag
        insn.target = columns[i, C_TARGET] if facts & F_HAS_TARGET else 0
        insn.next_isa = columns[i, C_NEXT_ISA]
        insn.next_idx = at + 1
        insn.target_idx = UNRESOLVED
    last = insns[start + len(columns) - 1]
    last.flags |= BLOCK_END
    last.next_idx = UNRESOLVED


@numba.njit(cache=True, nogil=True)
def _is_bl_pair(size: int, opcode: int) -> bool:
    """Whether a T32 encoding is BL/BLX (immediate): first halfword 11110..., second 11x1... (BL)
    or 11x0... (BLX)."""
    return size == 4 and opcode >> 27 == 0b11110 and (opcode >> 14) & 0b11 == 0b11
