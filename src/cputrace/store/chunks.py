"""Instructions and the register writes that belong to them, read in seq order in bounded chunks.

Analyses that walk a whole trace (call detection, profiles, exports) never hold it whole:
they see NumPy column arrays of one chunk at a time, split by core, and keep their own state
between chunks. A `Window` restricts the walk to a seq range; row groups outside it are
skipped using the Parquet statistics of `seq`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import StoreError
from ..model import ISA_NAMES
from .trace import Trace

CHUNK_ROWS = 1 << 19
"""Instructions per chunk: large enough that per-chunk overhead vanishes, small enough to bound memory."""

NO_TIME = np.int64(-1)


@dataclass(frozen=True, slots=True)
class Window:
    """The instructions with `start <= seq < stop` (None: from the first / to the last)."""

    start: int | None = None
    stop: int | None = None

    def sql(self, column: str = "seq") -> str:
        """The window as an SQL condition (TRUE for the whole trace)."""
        parts = []
        if self.start is not None:
            parts.append(f"{column} >= {int(self.start)}")
        if self.stop is not None:
            parts.append(f"{column} < {int(self.stop)}")
        return " AND ".join(parts) or "TRUE"

    def bounds(self, seq: np.ndarray) -> tuple[int, int]:
        """The index range of sorted `seq` inside the window."""
        lo = 0 if self.start is None else int(np.searchsorted(seq, self.start, side="left"))
        hi = len(seq) if self.stop is None else int(np.searchsorted(seq, self.stop, side="left"))
        return lo, hi


WHOLE_TRACE = Window()


def time_window(trace: Trace, since: int | None, until: int | None) -> Window:
    """The seq window of the instructions with `since <= time <= until`."""
    if since is None and until is None:
        return Window()
    conditions = [f"time >= {int(since)}" if since is not None else "TRUE"]
    conditions.append(f"time <= {int(until)}" if until is not None else "TRUE")
    row = trace.sql(
        f"SELECT min(seq) AS lo, max(seq) AS hi FROM instructions WHERE {' AND '.join(conditions)}"
    )
    lo, hi = row.column("lo")[0].as_py(), row.column("hi")[0].as_py()
    if lo is None:
        return Window(0, 0)
    return Window(lo, hi + 1)


def _row_groups(file: pq.ParquetFile, window: Window) -> list[int]:
    """Row groups whose seq range meets the window (all of them when statistics are missing)."""
    seq_column = file.schema_arrow.get_field_index("seq")
    groups = []
    for index in range(file.metadata.num_row_groups):
        stats = file.metadata.row_group(index).column(seq_column).statistics
        if stats is not None and stats.has_min_max:
            if window.start is not None and stats.max < window.start:
                continue
            if window.stop is not None and stats.min >= window.stop:
                continue
        groups.append(index)
    return groups


_instructions_read: ContextVar[Callable[[int], None] | None] = ContextVar("instructions_read", default=None)


@contextlib.contextmanager
def reading_progress(hook: Callable[[int], None]) -> Iterator[None]:
    """Call `hook(rows)` for every batch of instructions `read_batches` yields inside the block,
    whichever analysis or export reads them (the command line's progress bar)."""
    token = _instructions_read.set(hook)
    try:
        yield
    finally:
        _instructions_read.reset(token)


def read_batches(
    trace: Trace, table: str, columns: Sequence[str], window: Window = WHOLE_TRACE, rows: int = CHUNK_ROWS
) -> Iterator[pa.RecordBatch]:
    """Record batches of `table` (seq order, as stored) restricted to the window, read from
    the trace's version of the store with page CRCs checked (a damaged file: StoreError)."""
    progress = _instructions_read.get() if table == "instructions" else None
    file = trace.parquet_file(table)
    wanted = list(dict.fromkeys(["seq", *columns]))
    last = None
    batches = file.iter_batches(batch_size=rows, row_groups=_row_groups(file, window), columns=wanted)
    while True:
        try:
            batch = next(batches, None)
        except (OSError, pa.ArrowException) as exc:
            raise trace.damaged(table, exc) from None
        if batch is None:
            return
        seq = batch.column("seq").to_numpy()
        if len(seq) and ((last is not None and seq[0] < last) or np.any(seq[1:] < seq[:-1])):
            raise StoreError(f"{trace.path}: {table} is not in seq order; re-ingest the input")
        if len(seq):
            last = seq[-1]
        lo, hi = window.bounds(seq)
        if lo < hi:
            if progress is not None:
                progress(hi - lo)
            yield batch.slice(lo, hi - lo)
        if window.stop is not None and len(seq) and seq[-1] >= window.stop:
            return


def _numpy(column: pa.Array, dtype: type, fill: int = 0) -> np.ndarray:
    if column.null_count:
        column = pc.fill_null(column, fill)
    return column.to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def dictionary_codes(column: pa.Array, code_of: Callable[[str], int], default: int) -> np.ndarray:
    """Small integer codes of a (dictionary-encoded) string column: `code_of` once per distinct value."""
    if not pa.types.is_dictionary(column.type):
        column = column.dictionary_encode()
    names = column.dictionary.to_pylist()
    table = np.array([default if v is None else code_of(v) for v in names] + [default], np.int16)
    indices = _numpy(column.indices, np.int64, len(column.dictionary))
    return table[indices]


_ISA_CODES = {name: index for index, name in enumerate(ISA_NAMES)}
UNKNOWN_ISA = -1


@dataclass(slots=True)
class Instructions:
    """One chunk of one core's instructions as NumPy columns."""

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

    def __len__(self) -> int:
        return len(self.seq)

    def _columns(self) -> tuple[str, ...]:
        return ("seq", "time", "pc", "size", "isa", "opcode", "has_opcode", "executed", "src")

    def take(self, rows: np.ndarray | slice) -> Instructions:
        taken = Instructions(
            self.cpu, has_time=self.has_time, **{c: getattr(self, c)[rows] for c in self._columns()}
        )
        if self.duration is not None:
            taken.duration = self.duration[rows]
        return taken

    def then(self, other: Instructions) -> Instructions:
        """These rows followed by `other`'s (same core)."""
        joined = {c: np.concatenate([getattr(self, c), getattr(other, c)]) for c in self._columns()}
        return Instructions(self.cpu, has_time=self.has_time and other.has_time, **joined)


INSTRUCTION_COLUMNS = ("seq", "time", "cpu", "pc", "size", "isa", "opcode", "executed", "src")


def instructions_of(batch: pa.RecordBatch) -> dict[int, Instructions]:
    """A batch of the instructions table as per-core column arrays."""
    time = batch.column("time")
    opcode = batch.column("opcode")
    whole = Instructions(
        cpu=-1,
        seq=_numpy(batch.column("seq"), np.int64),
        time=_numpy(time, np.int64, -1),
        has_time=time.null_count == 0,
        pc=_numpy(batch.column("pc"), np.uint64),
        size=_numpy(batch.column("size"), np.uint8, 4),
        isa=dictionary_codes(
            batch.column("isa"), lambda name: _ISA_CODES.get(name, UNKNOWN_ISA), UNKNOWN_ISA
        ),
        opcode=_numpy(opcode, np.uint32),
        has_opcode=_numpy(opcode.is_valid(), np.bool_),
        executed=_numpy(batch.column("executed"), np.bool_, 1),
        src=_numpy(batch.column("src"), np.int64, -1),
    )
    return split_by_cpu(whole, _numpy(batch.column("cpu"), np.uint16))


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


def iter_instructions(
    trace: Trace, window: Window = WHOLE_TRACE, rows: int = CHUNK_ROWS
) -> Iterator[dict[int, Instructions]]:
    """Chunks of the trace's instructions, each split by core."""
    for step in walk(trace, window, rows=rows):
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


@dataclass(slots=True)
class Step:
    """One chunk of instructions (split by core) and the register writes up to its last seq."""

    chunks: dict[int, Instructions]
    registers: pa.Table | None


REGISTER_COLUMNS = ("cpu", "reg", "value")


def walk(
    trace: Trace, window: Window = WHOLE_TRACE, registers: bool = False, rows: int = CHUNK_ROWS
) -> Iterator[Step]:
    """The instructions of the window chunk by chunk, with their register writes when asked."""
    follower = SeqFollower(read_batches(trace, "registers", REGISTER_COLUMNS, window)) if registers else None
    for batch in read_batches(trace, "instructions", INSTRUCTION_COLUMNS, window, rows):
        writes = follower.upto(int(batch.column("seq")[-1].as_py())) if follower is not None else None
        yield Step(instructions_of(batch), writes)


def iter_timed(trace: Trace, window: Window = WHOLE_TRACE, rows: int = CHUNK_ROWS) -> Iterator[Instructions]:
    """One core's chunk at a time, with durations (see `Durations`)."""
    durations = Durations()
    for step in walk(trace, window, rows=rows):
        for chunk in step.chunks.values():
            ready = durations.push(chunk)
            if ready is not None:
                yield ready
    yield from durations.flush()


class SeqFollower:
    """Rows of another table, handed out up to a seq as the instruction chunks advance."""

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self._batches = batches
        self._pending: list[pa.RecordBatch] = []
        self._done = False

    def upto(self, last_seq: int) -> pa.Table | None:
        """Every row not yet handed out with seq <= last_seq (None if there are none)."""
        taken: list[pa.RecordBatch] = []
        while True:
            if not self._pending:
                if self._done:
                    break
                batch = next(self._batches, None)
                if batch is None:
                    self._done = True
                    break
                self._pending.append(batch)
            batch = self._pending[0]
            seq = batch.column("seq").to_numpy()
            cut = int(np.searchsorted(seq, last_seq, side="right"))
            if cut < len(seq):
                taken.append(batch.slice(0, cut))
                self._pending[0] = batch.slice(cut)
                break
            taken.append(batch)
            self._pending.pop(0)
        taken = [b for b in taken if b.num_rows]
        return pa.Table.from_batches(taken) if taken else None
