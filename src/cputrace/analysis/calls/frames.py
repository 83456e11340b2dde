"""Call frames in tree order, streamed from disk: for outputs with a row or an event per call.

Detection ends calls in the order they return; call trees and timelines want them in the
order they were entered. So each call is written to a spill file (Parquet, in a temporary
folder) as detection ends it, and the detector's rows for it are freed; DuckDB sorts the
spill into tree order under a memory limit (going to disk itself past it); the sorted
frames are then nested block by block (nesting.py). Memory follows the undecided potential
calls, the call depth and the distinct functions, never the number of calls.

A frame is a row of tables.FRAME_SCHEMA: the outermost function of each core is one, every
detected call another; `id`s count the frames of all cores in tree order.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ...image import Image
from ...image.symbols import function_names
from ...kernels.growth import grown
from ...store.sql import connect
from ...store.trace import Trace
from ...store.window import WHOLE_TRACE, Window
from .detect import detect
from .log import NO_SITE, SITE, CallLog, Method
from .nesting import CLOSED, NESTED, Nesting
from .tables import FRAME_SCHEMA, SITES, SPILL_SCHEMA, frame_columns

SPILLED = np.dtype(
    [("cpu", "<i8"), ("entry_idx", "<i8"), ("end_idx", "<i8"), *((site, SITE) for site in SITES)]
)
"""A frame as detection ended it (a row of tables.SPILL_SCHEMA)."""

TIMED_FRAME = np.dtype(
    [("at", "<i8"), ("function", "<i8"), ("index", "<i8"), ("end_index", "<i8"), ("end", "<i8")]
)
"""A frame on a clock: starting `at`, ending at `end`; its function and instruction indexes."""

TIMELINE_EVENT = np.dtype(
    [("opens", "?"), *((name, TIMED_FRAME[name]) for name in TIMED_FRAME.names)], align=True
)
"""A frame opening (at its start) or closing (`at` its end)."""

_BLOCK = 1 << 16  # frames per block read back
_SPILL_ROWS = 1 << 16  # frames per spill write
_MEMORY_LIMIT = "64MB"  # DuckDB's, for sorting and joining the spills


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


@numba.njit(cache=True, nogil=True)
def _fill_ended(cpu, calls, ends, rows):
    for i in range(len(ends)):
        end, call, row = ends[i], calls[ends[i].call], rows[i]
        row.cpu = cpu
        row.entry_idx = call.entry_index
        row.end_idx = end.end_index
        row.call = call.call
        row.entry = call.entry
        row.exit = end.exit
        row.resume = end.resume


def _as_columns(rows: np.ndarray) -> np.ndarray:
    """SPILLED rows as an (n, fields) int64 array: every field (the sites' too) is an int64, laid
    out in SPILL_SCHEMA's column order."""
    return rows.view(np.int64).reshape(len(rows), len(SPILL_SCHEMA))


def ended_frames(log: CallLog) -> np.ndarray:
    """The calls a log ended, as SPILLED rows."""
    rows = np.empty(len(log.ends), SPILLED)
    _fill_ended(log.cpu, log.calls, log.ends, rows)
    return rows


class FrameSpill:
    """Follows call detection (a detect.Follower): writes each call it ends to a Parquet file in
    `folder`; `stream` gives the frames back in tree order once detection is done."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "frames.parquet"
        self._writer = pq.ParquetWriter(self.path, SPILL_SCHEMA, compression="lz4")
        self._parts: list[np.ndarray] = []
        self._held = 0
        self.counts: dict[int, int] = {}
        self.cores: list[CoreRun] = []

    def follow(self, log: CallLog) -> None:
        if len(log.ends):
            self._add(log.cpu, ended_frames(log))
        if log.final and log.count:  # the outermost frame: the whole of the core's trace
            outermost = np.array([(log.cpu, 0, log.count, NO_SITE, log.first, log.last, NO_SITE)], SPILLED)
            self._add(log.cpu, outermost)
            self.cores.append(CoreRun(log.cpu, log.method, log.count, self.counts[log.cpu], log.has_time,
                                      log.first, log.last))  # fmt: skip

    def _add(self, cpu: int, rows: np.ndarray) -> None:
        self.counts[cpu] = self.counts.get(cpu, 0) + len(rows)
        self._parts.append(rows)
        self._held += len(rows)
        if self._held >= _SPILL_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._parts:
            rows = np.concatenate(self._parts)
            columns = np.ascontiguousarray(_as_columns(rows).T)
            self._writer.write_table(pa.table(list(columns), schema=SPILL_SCHEMA))
            self._parts, self._held = [], 0

    def stream(self, image: Image | None) -> FrameStream:
        """The frames, once detection has seen the whole trace (`image` names their functions)."""
        self._flush()
        self._writer.close()
        return FrameStream(self.folder, self.path, self.cores, image)


@dataclass
class FrameBlock:
    """Consecutive frames of one core in tree order, nested; `closed` are the self costs of the
    frames (of this block or earlier ones) known to have ended by its end."""

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
    sites: dict[str, np.ndarray]  # "call", "entry", "exit", "resume": log.SITE records
    closed: np.ndarray  # nesting.CLOSED
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
def _emit(events, k, opens, frame, at):
    event = events[k]
    event.opens = opens
    event.at = at
    event.function = frame.function
    event.index = frame.index
    event.end_index = frame.end_index
    event.end = frame.end


@numba.njit(cache=True, nogil=True)
def _timeline_block(frames, final, stack, depth, events):
    """The TIMELINE_EVENTs up to the opening of the last of the TIMED_FRAMEs (and every close
    after it with `final`); returns how many. `stack` holds the open frames, `depth` [their count]."""
    top = depth[0]
    k = 0
    for i in range(len(frames) + 1):
        last = i == len(frames)
        while top > 0 and ((last and final) or (not last and stack[top - 1].end <= frames[i].at)):
            top -= 1
            _emit(events, k, False, stack[top], stack[top].end)
            k += 1
        if last:
            break
        _emit(events, k, True, frames[i], frames[i].at)
        stack[top] = frames[i]
        top += 1
        k += 1
    depth[0] = top
    return k


class FrameStream:
    """The frames of a detection, sorted into tree order on disk: per core, as blocks or as a
    timeline; for every core, as FRAME_SCHEMA record batches."""

    def __init__(self, folder: Path, spill: Path, cores: list[CoreRun], image: Image | None) -> None:
        self.folder, self.spill, self.cores = folder, spill, cores
        self.has_time = bool(cores) and all(core.has_time for core in cores)
        config = {"memory_limit": _MEMORY_LIMIT, "temp_directory": str(folder / "duckdb")}
        self.db = connect(config)
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
            yield self._block(core, nesting, batch)
        yield self._block(core, nesting, SPILL_SCHEMA.empty_table(), final=True)

    def _block(
        self, core: CoreRun, nesting: Nesting, batch: pa.RecordBatch | pa.Table, final: bool = False
    ) -> FrameBlock:
        first_id = nesting.next_id
        columns = np.column_stack([column.to_numpy() for column in batch.columns])  # as _as_columns gave
        spilled = columns.view(SPILLED).ravel()
        frames = np.empty(batch.num_rows, NESTED)
        frames["entry_index"] = spilled["entry_idx"]
        frames["end_index"] = spilled["end_idx"]
        frames["entry_time"] = spilled["entry"]["time"]
        frames["exit"], frames["resume"] = spilled["exit"], spilled["resume"]
        frames["end_time"] = frame_end_times(spilled["exit"], spilled["resume"])
        function = np.searchsorted(self.addresses, spilled["entry"]["pc"].view(np.uint64))
        frames["function"] = function
        closed = nesting.nest(frames, final)
        sites = {"call": spilled["call"], "entry": spilled["entry"], "exit": frames["exit"],
                 "resume": frames["resume"]}  # fmt: skip
        entry_time = sites["entry"]["time"]
        index = frames["entry_index"]
        ids = np.arange(first_id, first_id + len(frames))
        return FrameBlock(
            core.cpu, ids, frames["parent"], frames["depth"], function, index, frames["end_index"] - index,
            entry_time, frames["end_time"] - entry_time, np.ascontiguousarray(frames["recursive"]), sites,
            closed, final,
        )  # fmt: skip

    def timeline(self, core: CoreRun, clock: str) -> Timeline:
        """The core's frames as open/close events on `clock` ("time" or "insns")."""
        first = int(core.first["time"]) if clock == "time" else 0
        last = int(core.last["time"]) if clock == "time" else core.count
        return Timeline(core.cpu, first, last, self._events(core, clock))

    def _events(self, core: CoreRun, clock: str) -> Iterator[tuple[list, ...]]:
        depth = np.zeros(1, np.int64)
        stack = np.zeros(64, TIMED_FRAME)
        for block in self.blocks(core):
            n = len(block.id)
            stack = grown(stack, int(depth[0]) + n)
            frames = np.empty(n, TIMED_FRAME)
            frames["at"], frames["end"] = block.start(clock), block.end(clock)
            frames["function"], frames["index"] = block.function, block.index
            frames["end_index"] = block.index + block.insns
            events = np.empty(2 * n + int(depth[0]), TIMELINE_EVENT)
            k = _timeline_block(frames, block.final, stack, depth, events)
            if k:
                yield tuple(events[:k][name].tolist() for name in TIMELINE_EVENT.names)

    def rows(self) -> Iterator[pa.RecordBatch]:
        """Every core's frames as FRAME_SCHEMA rows in tree order, cores one after another.

        Self costs are known only when a frame's callees have all been seen: the rows go to
        one spill and the self costs to another, joined back in id order.
        """
        frames_path, costs_path = self.folder / "tree.parquet", self.folder / "self.parquet"
        costs_schema = pa.schema([(name, pa.int64()) for name in CLOSED.names])
        names = pa.array(self.names, pa.string())
        with pq.ParquetWriter(frames_path, FRAME_SCHEMA, compression="lz4") as frames, \
                pq.ParquetWriter(costs_path, costs_schema, compression="lz4") as costs:  # fmt: skip
            for core in self.cores:
                for block in self.blocks(core):
                    if len(block.id):
                        frames.write_table(self._frame_table(core, block, names))
                    closed = [block.closed[name] for name in CLOSED.names]
                    costs.write_table(pa.table(closed, schema=costs_schema))
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
        for _ in detect(trace, [spill], window, method, image, cpus):
            pass
        stream = spill.stream(image)
        try:
            yield stream
        finally:
            stream.close()


def frame_end_times(exits: np.ndarray, resumes: np.ndarray) -> np.ndarray:
    """When frames end: their resume site's time, or for a frame that never returned its exit's."""
    return np.where(resumes["seq"] >= 0, resumes["time"], exits["time"])
