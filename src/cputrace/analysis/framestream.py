"""Call frames in tree order, streamed from disk: for outputs with a row or an event per call.

Detection ends calls in the order they return; call trees and timelines want them in the
order they were entered. So each call is written to a spill file (Parquet, in a temporary
folder) as detection ends it, and the detector's rows for it are freed; DuckDB sorts the
spill into tree order under a memory limit (going to disk itself past it); the sorted
frames are then nested block by block (nesting.py). Memory follows the undecided potential
calls, the call depth and the distinct functions, never the number of calls.

A frame is what CallTree calls one (calltree.py): the outermost function of each core is
one, every detected call another; `id`s count the frames of all cores in tree order.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numba
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..image import Image
from ..kernels.growth import grown
from ..store.chunks import Instructions, read_steps
from ..store.trace import Trace
from ..store.window import WHOLE_TRACE, Window
from .calls import (
    P_END_IDX,
    P_EXIT,
    P_SLOT,
    PC,
    S_CALL,
    S_ENTRY,
    S_ENTRY_IDX,
    ST_EVENTS,
    ST_FIRST,
    ST_N,
    ST_PAIRS,
    ST_PREV,
    TIME,
    CallDetector,
    CoreDetector,
    Method,
)
from .calltree import _SITE_FIELDS, _SITES, FRAME_SCHEMA, frame_columns, frame_end_times, function_names
from .nesting import Nesting

_SPILL_SCHEMA = pa.schema(
    [("cpu", pa.int64()), ("entry_idx", pa.int64()), ("end_idx", pa.int64())]
    + [(f"{site}_{name}", pa.int64()) for site in _SITES for name in _SITE_FIELDS]
)
_EXIT_COLUMN = _SPILL_SCHEMA.get_field_index("exit_seq")
_BLOCK = 1 << 16  # frames per block read back
_SPILL_ROWS = 1 << 16  # frames per spill write
_MEMORY_LIMIT = "64MB"  # DuckDB's, for sorting and joining the spills
_NO_SITE = np.full(4, -1, np.int64)
_NOTHING = np.zeros(0, np.int64)


@dataclass(frozen=True)
class CoreRun:
    """One core's detection at its end: how many instructions and frames, its first and last site."""

    cpu: int
    method: Method
    count: int
    frames: int
    has_time: bool
    first: np.ndarray
    last: np.ndarray


class FrameSpill:
    """Follows a CallDetector (`follow`): writes each call it ends to a Parquet file in `folder`,
    then frees its rows; `stream` gives the frames back in tree order once detection is done."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "frames.parquet"
        self._writer = pq.ParquetWriter(self.path, _SPILL_SCHEMA, compression="lz4")
        self._parts: list[np.ndarray] = []
        self._held = 0
        self.counts: dict[int, int] = {}

    def follow(self, detector: CoreDetector, chunk: Instructions) -> None:
        self._take(detector)
        detector.state[ST_EVENTS] = 0  # ended calls are all in `pairs`: the log is not needed
        detector.recycle(_NOTHING)

    def _take(self, detector: CoreDetector) -> None:
        n = int(detector.state[ST_PAIRS])
        if not n:
            return
        pairs = detector.pairs[:n]
        slots = detector.slots[pairs[:, P_SLOT]]
        rows = np.empty((n, len(_SPILL_SCHEMA)), np.int64)
        rows[:, 0] = detector.cpu
        rows[:, 1] = slots[:, S_ENTRY_IDX]
        rows[:, 2] = pairs[:, P_END_IDX]
        rows[:, 3:7] = slots[:, S_CALL : S_CALL + 4]
        rows[:, 7:11] = slots[:, S_ENTRY : S_ENTRY + 4]
        rows[:, _EXIT_COLUMN:] = pairs[:, P_EXIT : P_EXIT + 8]
        self._add(detector.cpu, rows)

    def _add(self, cpu: int, rows: np.ndarray) -> None:
        self.counts[cpu] = self.counts.get(cpu, 0) + len(rows)
        self._parts.append(rows)
        self._held += len(rows)
        if self._held >= _SPILL_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._parts:
            rows = np.concatenate(self._parts)
            self._writer.write_table(pa.table(list(rows.T), schema=_SPILL_SCHEMA))
            self._parts, self._held = [], 0

    def stream(self, detector: CallDetector, image: Image | None) -> FrameStream:
        """The frames, once `detector` has seen the whole trace (`image` names their functions)."""
        return FrameStream(self.folder, self.path, self._finish(detector), image)

    def _finish(self, detector: CallDetector) -> list[CoreRun]:
        """The calls still open at the trace's end, each core's outermost frame; closes the file."""
        cores = []
        for cpu in sorted(detector.detectors):
            core = detector.detectors[cpu]
            st = core.state
            if not st[ST_N]:
                continue
            core.close()
            self._take(core)
            first, last = st[ST_FIRST : ST_FIRST + 4].copy(), st[ST_PREV : ST_PREV + 4].copy()
            self._add(cpu, np.concatenate([[cpu, 0, st[ST_N]], _NO_SITE, first, last, _NO_SITE])[None, :])
            count = int(st[ST_N])
            cores.append(CoreRun(cpu, core.method, count, self.counts[cpu], core.has_time, first, last))
        self._flush()
        self._writer.close()
        return cores


@dataclass
class FrameBlock:
    """Consecutive frames of one core in tree order, nested; `closed` are (id, insns_self,
    time_self) of the frames (of this block or earlier ones) known to have ended by its end."""

    cpu: int
    id: np.ndarray
    parent: np.ndarray  # id, -1 for the outermost frame
    depth: np.ndarray
    function: np.ndarray  # index into FrameStream.addresses
    index: np.ndarray  # instructions of the core before the entry
    insns: np.ndarray
    entry_time: np.ndarray
    time: np.ndarray
    recursive: np.ndarray
    sites: dict[str, np.ndarray]  # "call", "entry", "exit", "resume": (n, 4) seq, time, pc, src
    closed: np.ndarray
    final: bool = False  # the core's last block: no frames, every frame still open closed

    def start(self, clock: str) -> np.ndarray:
        return self.entry_time if clock == "time" else self.index

    def end(self, clock: str) -> np.ndarray:
        return self.start(clock) + (self.time if clock == "time" else self.insns)


@dataclass(frozen=True)
class Timeline:
    """One core's frames on a clock (trace time, or `insns`: instructions), from first to last."""

    cpu: int
    first: int
    last: int
    events: Iterator[tuple[list, ...]]
    """Blocks of events in order, properly nested (a close ends the latest open frame): lists
    (opens, at, function, index, end_index, end) with each event's frame's function, entry and
    end instruction index, and end on the clock."""


@numba.njit(cache=True, nogil=True)
def _copy_row(source, row, target, at):
    """target[at] = source[row], as a loop: see isa.arm._copy_rows."""
    for column in range(source.shape[1]):
        target[at, column] = source[row, column]


@numba.njit(cache=True, nogil=True)
def _timeline_block(frames, final, stack, state, opens, events):
    """The events up to the opening of the last of `frames` (and every close after it with
    `final`); returns how many.

    `frames`, `stack` and `events` rows are (at, function, index, end index, end): frames and
    opens at their start, closes at their end; `stack` holds the open frames, `state` [depth].
    """
    top = state[0]
    k = 0
    for i in range(len(frames) + 1):
        last = i == len(frames)
        while top > 0 and ((last and final) or (not last and stack[top - 1, 4] <= frames[i, 0])):
            top -= 1
            opens[k] = False
            _copy_row(stack, top, events, k)
            events[k, 0] = stack[top, 4]
            k += 1
        if last:
            break
        opens[k] = True
        _copy_row(frames, i, events, k)
        _copy_row(frames, i, stack, top)
        top += 1
        k += 1
    state[0] = top
    return k


class FrameStream:
    """The frames of a detection, sorted into tree order on disk: per core, as blocks or as a
    timeline; for every core, as FRAME_SCHEMA record batches."""

    def __init__(self, folder: Path, spill: Path, cores: list[CoreRun], image: Image | None) -> None:
        self.folder, self.spill, self.cores = folder, spill, cores
        self.has_time = bool(cores) and all(core.has_time for core in cores)
        config = {"memory_limit": _MEMORY_LIMIT, "temp_directory": str(folder / "duckdb")}
        self.db = duckdb.connect(config=config)
        distinct = f"SELECT DISTINCT entry_pc FROM {self._source(spill)}"
        entries = self.db.sql(distinct).to_arrow_table().column(0).to_numpy()
        self.addresses = np.unique(entries.view(np.uint64))
        self.names = function_names(self.addresses, image.symbols if image is not None else None)
        first_ids = np.cumsum([0] + [core.frames for core in cores])
        self._first_id = dict(zip([core.cpu for core in cores], first_ids.tolist(), strict=False))

    @staticmethod
    def _source(path: Path) -> str:
        return "read_parquet('" + str(path).replace("'", "''") + "')"

    def __len__(self) -> int:
        return sum(core.frames for core in self.cores)

    def blocks(self, core: CoreRun) -> Iterator[FrameBlock]:
        """The core's frames in tree order, nested, a block at a time."""
        nesting = Nesting(len(self.addresses), self._first_id[core.cpu])
        sql = f"SELECT * FROM {self._source(self.spill)} WHERE cpu = ? ORDER BY entry_idx, end_idx DESC"
        reader = self.db.sql(sql, params=[core.cpu]).to_arrow_reader(_BLOCK)
        for batch in reader:
            yield self._block(core, nesting, np.column_stack([column.to_numpy() for column in batch.columns]))
        yield self._block(core, nesting, np.zeros((0, len(_SPILL_SCHEMA)), np.int64), final=True)

    def _block(self, core: CoreRun, nesting: Nesting, values: np.ndarray, final: bool = False) -> FrameBlock:
        first_id = int(nesting.state[0])
        entry_idx = values[:, 1].copy()
        end_idx = values[:, 2].copy()
        sites = {site: values[:, 3 + 4 * k : 7 + 4 * k] for k, site in enumerate(_SITES)}
        end_sites = values[:, _EXIT_COLUMN:].copy()
        end_time = frame_end_times(end_sites)
        entry_time = sites["entry"][:, TIME].copy()
        function = np.searchsorted(self.addresses, sites["entry"][:, PC].view(np.uint64))
        parent, depth, recursive, closed = nesting.nest(
            entry_idx, end_idx, entry_time, end_time, function, end_sites, final
        )
        sites["exit"], sites["resume"] = end_sites[:, :4], end_sites[:, 4:]
        return FrameBlock(
            core.cpu, np.arange(first_id, first_id + len(entry_idx)), parent, depth, function, entry_idx,
            end_idx - entry_idx, entry_time, end_time - entry_time, recursive, sites, closed, final,
        )  # fmt: skip

    def timeline(self, core: CoreRun, clock: str) -> Timeline:
        """The core's frames as open/close events on `clock` ("time" or "insns")."""
        first = int(core.first[TIME]) if clock == "time" else 0
        last = int(core.last[TIME]) if clock == "time" else core.count
        return Timeline(core.cpu, first, last, self._events(core, clock))

    def _events(self, core: CoreRun, clock: str) -> Iterator[tuple[list, ...]]:
        state = np.zeros(1, np.int64)
        stack = np.zeros((64, 5), np.int64)
        for block in self.blocks(core):
            n = len(block.id)
            stack = grown(stack, int(state[0]) + n)
            frames = np.column_stack(
                [block.start(clock), block.function, block.index, block.index + block.insns, block.end(clock)]
            )
            room = 2 * n + int(state[0])
            opens, events = np.empty(room, np.bool_), np.empty((room, 5), np.int64)
            k = _timeline_block(frames, block.final, stack, state, opens, events)
            if k:
                yield (opens[:k].tolist(), *(column.tolist() for column in events[:k].T))

    def rows(self) -> Iterator[pa.RecordBatch]:
        """Every core's frames as FRAME_SCHEMA rows in tree order, cores one after another.

        Self costs are known only when a frame's callees have all been seen: the rows go to
        one spill and the self costs to another, joined back in id order.
        """
        frames_path, costs_path = self.folder / "tree.parquet", self.folder / "self.parquet"
        costs_schema = pa.schema([("id", pa.int64()), ("insns_self", pa.int64()), ("time_self", pa.int64())])
        names = pa.array(self.names, pa.string())
        with pq.ParquetWriter(frames_path, FRAME_SCHEMA, compression="lz4") as frames, \
                pq.ParquetWriter(costs_path, costs_schema, compression="lz4") as costs:  # fmt: skip
            for core in self.cores:
                for block in self.blocks(core):
                    if len(block.id):
                        frames.write_table(self._frame_table(core, block, names))
                    costs.write_table(pa.table(list(block.closed.T), schema=costs_schema))
        sql = (
            f"SELECT f.* REPLACE (c.insns_self AS insns_self, "
            f"CASE WHEN f.time IS NULL THEN NULL ELSE c.time_self END AS time_self) "
            f"FROM {self._source(frames_path)} f POSITIONAL JOIN "
            f"(SELECT insns_self, time_self FROM {self._source(costs_path)} ORDER BY id) c"
        )
        for batch in self.db.sql(sql).to_arrow_reader(_BLOCK):
            yield pa.RecordBatch.from_arrays(
                [batch.column(i).cast(f.type) for i, f in enumerate(FRAME_SCHEMA)], schema=FRAME_SCHEMA
            )

    def _frame_table(self, core: CoreRun, block: FrameBlock, names: pa.Array) -> pa.Table:
        zeros = np.zeros(len(block.id), np.int64)
        columns = frame_columns(
            core.cpu, block.id, block.parent, block.depth, self.addresses[block.function],
            names.take(pa.array(block.function)), block.sites, block.index, block.insns, zeros,
            block.time, zeros, block.recursive, core.has_time,
        )  # fmt: skip
        return pa.table(columns, schema=FRAME_SCHEMA)

    def close(self) -> None:
        self.db.close()


@contextlib.contextmanager
def frame_stream(
    trace: Trace,
    window: Window = WHOLE_TRACE,
    method: Method = Method.AUTO,
    image: Image | None = None,
    cpus: list[int] | None = None,
) -> Iterator[FrameStream]:
    """Detect the calls of the window and stream their frames; the spills go when the block ends."""
    with tempfile.TemporaryDirectory(prefix="cputrace-frames-") as folder:
        spill = FrameSpill(Path(folder))
        detector = CallDetector.for_trace(trace, window, method, image, cpus, follow=spill.follow)
        for step in read_steps(trace, window, registers=detector.needs_registers):
            detector.feed(step)
        stream = spill.stream(detector, image)
        try:
            yield stream
        finally:
            stream.close()
