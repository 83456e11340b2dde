"""Instructions read chunk by chunk as per-core NumPy columns, with their register writes.

Analyses that go through a whole trace (call detection, profiles, coverage) see one chunk of
instructions at a time, split by core, and keep their own state between chunks (the reading
itself: batches.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa

from ..model import ISA_NAMES
from .batches import CHUNK_ROWS, SeqFollower, read_batches
from .columns import ColumnChunk, dictionary_codes, numpy_of
from .trace import Trace
from .window import WHOLE_TRACE, Window

NO_TIME = np.int64(-1)

_ISA_CODES = {name: index for index, name in enumerate(ISA_NAMES)}
UNKNOWN_ISA = -1


@dataclass(slots=True)
class Instructions(ColumnChunk):
    """One chunk of one core's instructions as NumPy columns."""

    ROWS: ClassVar[tuple[str, ...]] = (
        "seq", "time", "pc", "size", "isa", "opcode", "has_opcode", "executed", "src", "duration",
    )  # fmt: skip

    cpu: int
    seq: np.ndarray  # int64
    time: np.ndarray  # int64, NO_TIME where the trace has none
    has_time: bool
    pc: np.ndarray  # uint64
    size: np.ndarray  # uint8
    isa: np.ndarray  # int16: model.Isa value, UNKNOWN_ISA
    opcode: np.ndarray  # uint32
    has_opcode: np.ndarray  # bool
    executed: np.ndarray  # bool
    src: np.ndarray  # int64
    duration: np.ndarray | None = None  # int64: time until the core's next instruction (see Durations)

    def then(self, other: Instructions) -> Instructions:
        """These rows followed by `other`'s (same core)."""
        joined = ColumnChunk.then(self, other)  # no zero-argument super() in a slots dataclass
        joined.has_time = self.has_time and other.has_time
        return joined


INSTRUCTION_COLUMNS = ("seq", "time", "cpu", "pc", "size", "isa", "opcode", "executed", "src")


def instructions_of(batch: pa.RecordBatch) -> dict[int, Instructions]:
    """A batch of the instructions table as per-core column arrays."""
    time = batch.column("time")
    opcode = batch.column("opcode")
    whole = Instructions(
        cpu=-1,
        seq=numpy_of(batch.column("seq"), np.int64),
        time=numpy_of(time, np.int64, -1),
        has_time=time.null_count == 0,
        pc=numpy_of(batch.column("pc"), np.uint64),
        size=numpy_of(batch.column("size"), np.uint8, 4),
        isa=dictionary_codes(
            batch.column("isa"), lambda name: _ISA_CODES.get(name, UNKNOWN_ISA), UNKNOWN_ISA
        ),
        opcode=numpy_of(opcode, np.uint32),
        has_opcode=numpy_of(opcode.is_valid(), np.bool_),
        executed=numpy_of(batch.column("executed"), np.bool_, True),
        src=numpy_of(batch.column("src"), np.int64, -1),
    )
    return split_by_cpu(whole, numpy_of(batch.column("cpu"), np.uint16))


def split_by_cpu(whole: Instructions, cpus: np.ndarray) -> dict[int, Instructions]:
    if not len(cpus):
        return {}
    first = int(cpus[0])
    if np.all(cpus == first):
        whole.cpu = first
        return {first: whole}
    parts = {}
    for cpu in np.unique(cpus).tolist():
        part = whole.take(np.flatnonzero(cpus == cpu))
        part.cpu = cpu
        parts[cpu] = part
    return parts


@dataclass(slots=True)
class Step:
    """One chunk of instructions (split by core) and the register writes up to its last seq."""

    chunks: dict[int, Instructions]
    registers: pa.Table | None


REGISTER_COLUMNS = ("cpu", "reg", "value")


def read_steps(
    trace: Trace, window: Window = WHOLE_TRACE, registers: bool = False, rows: int = CHUNK_ROWS
) -> Iterator[Step]:
    """The instructions of the window chunk by chunk, with their register writes when asked."""
    follower = SeqFollower(read_batches(trace, "registers", REGISTER_COLUMNS, window)) if registers else None
    for batch in read_batches(trace, "instructions", INSTRUCTION_COLUMNS, window, rows):
        writes = follower.upto(int(batch.column("seq")[-1].as_py())) if follower is not None else None
        yield Step(instructions_of(batch), writes)


def iter_instructions(
    trace: Trace, window: Window = WHOLE_TRACE, rows: int = CHUNK_ROWS
) -> Iterator[dict[int, Instructions]]:
    """Chunks of the trace's instructions, each split by core."""
    for step in read_steps(trace, window, rows=rows):
        yield step.chunks


class Durations:
    """Adds `duration` to chunks: the time until the same core's next instruction.

    Each core's last instruction waits for that core's next chunk; `flush` gives the last
    instruction of every core with duration 0, so a core's durations add up to its traced
    time span. Without time, durations are 0.
    """

    def __init__(self) -> None:
        self._held: dict[int, Instructions] = {}

    def push(self, chunk: Instructions) -> Instructions | None:
        """The chunk's rows whose duration is known now (None if there are none yet)."""
        held = self._held.pop(chunk.cpu, None)
        if held is not None:
            chunk = held.then(chunk)
        last = len(chunk) - 1
        self._held[chunk.cpu] = chunk.take(slice(last, None))
        if not last:
            return None
        ready = chunk.take(slice(0, last))
        ready.duration = np.diff(chunk.time) if chunk.has_time else np.zeros(last, np.int64)
        return ready

    def flush(self) -> list[Instructions]:
        final = [self._held[cpu] for cpu in sorted(self._held)]
        for chunk in final:
            chunk.duration = np.zeros(1, np.int64)
        self._held.clear()
        return final


def iter_timed(trace: Trace, window: Window = WHOLE_TRACE, rows: int = CHUNK_ROWS) -> Iterator[Instructions]:
    """One core's chunk at a time, with durations (see `Durations`)."""
    durations = Durations()
    for step in read_steps(trace, window, rows=rows):
        for chunk in step.chunks.values():
            ready = durations.push(chunk)
            if ready is not None:
                yield ready
    yield from durations.flush()
