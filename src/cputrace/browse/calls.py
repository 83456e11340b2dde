"""Calls for the browser: the call stack at any point, the call containing it, and the call tree.

Detection (analysis/calls) runs once per store and image: its frames, in tree order
(`FrameStream.rows`), go to a keyed file sorted by (cpu, index, id), and its calling contexts
(`CallSums`) to a small table. A frame's `id` is its row: every core's frames come in tree
order, cores one after another, so a parent is one row read away, and the innermost frame at
an instruction is the last frame entered at or before it, or one of that frame's ancestors.

Positions are instruction indexes of a core (session.py): a frame covers the core's
instructions `index` to `index + insns - 1`, from its entry up to (not including) the
instruction it returns to.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from ..store.batches import reading_progress
from ..store.indexes import index_dir, reading_index_file
from .index import GROUP_ROWS, Progress, read_parquet
from .keyed import KeyedFile, write_keyed

if TYPE_CHECKING:
    from ..image import Image
    from ..store.trace import Trace

CALLS_VERSION = 1
FRAME_KEY = ("cpu", "index", "id")
_FRAME_COLUMNS = (
    "cpu", "id", "parent", "depth", "function", "name", "call_seq", "call_pc", "entry_seq", "index", "insns",
    "time", "recursive",
)  # fmt: skip
_ID_LIMIT = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class Frame:
    """One call (or a core's outermost frame, depth 0)."""

    cpu: int
    id: int
    parent: int  # id; -1 for the outermost frame
    depth: int
    function: int  # entry address
    name: str  # the function's name (`0x8000` without a symbol)
    call_seq: int | None  # the call instruction (None for the outermost frame)
    call_pc: int | None
    entry_seq: int
    index: int  # core index of the entry
    insns: int  # instructions up to (not including) the one it returns to
    time: int | None

    @property
    def last_index(self) -> int:
        return self.index + self.insns - 1

    def contains(self, index: int) -> bool:
        return self.index <= index <= self.last_index


@dataclass(frozen=True, slots=True)
class TreeNode:
    """A calling context of one core: a function called from a site in its parent context,
    with the sums of every call made there."""

    cpu: int
    id: int  # position in `CallIndex.tree(cpu)`, parents first
    parent: int  # -1 for the outermost function
    function: int
    name: str
    site: int | None  # the call site's pc (None for the outermost function)
    calls: int
    insns: int  # inclusive
    time: int | None  # inclusive; None without times
    first_index: int  # core index of the first call's entry
    recursive: bool  # also an ancestor's function: its costs are counted there


def image_key(image: Image | None) -> str:
    """A short digest of an image's contents and symbols (calls depend on both)."""
    if image is None:
        return "none"
    digest = xxhash.xxh3_64()
    for region in image.regions:
        digest.update(f"{region.start}:".encode())
        digest.update(region.data)
    for symbol in image.symbols:
        digest.update(f"{symbol.name}@{symbol.address};".encode())
    return digest.hexdigest()


class CallIndex:
    """The frames and calling contexts of one store (`CallIndex.open` detects them once)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.frames = KeyedFile(directory / "frames.arrow", FRAME_KEY)
        tree = read_parquet(directory / "tree.parquet").to_pylist()
        self._tree: dict[int, list[TreeNode]] = {}
        for row in tree:
            self._tree.setdefault(row["cpu"], []).append(TreeNode(**row))
        with reading_index_file(directory / "meta.json"):
            self.has_time = json.loads((directory / "meta.json").read_text())["has_time"]

    @classmethod
    def open(cls, trace: Trace, image: Image | None = None, progress: Progress | None = None) -> CallIndex:
        name = f"calls-{image_key(image)}"
        return cls(index_dir(trace, name, CALLS_VERSION, lambda d: _build(trace, image, d, progress)))

    def frame(self, id: int) -> Frame:
        row = self.frames.row(id)
        parent = -1 if row["parent"] is None else row["parent"]
        return Frame(
            row["cpu"], row["id"], parent, row["depth"], row["function"], row["name"], row["call_seq"],
            row["call_pc"], row["entry_seq"], row["index"], row["insns"], row["time"],
        )  # fmt: skip

    def innermost(self, cpu: int, index: int) -> Frame | None:
        """The innermost frame of core `cpu` holding instruction `index` (None: no frame does,
        the core has no calls detected)."""
        row = self.frames.upper_bound((cpu, index, _ID_LIMIT)) - 1
        if row < 0:
            return None
        frame = self.frame(row)
        while frame.cpu == cpu and not frame.contains(index):
            if frame.parent < 0:
                return None
            frame = self.frame(frame.parent)
        return frame if frame.cpu == cpu else None

    def stack(self, cpu: int, index: int) -> list[Frame]:
        """The frames holding instruction `index`, outermost first."""
        frame = self.innermost(cpu, index)
        frames = []
        while frame is not None:
            frames.append(frame)
            frame = self.frame(frame.parent) if frame.parent >= 0 else None
        return frames[::-1]

    def next_entry(self, cpu: int, index: int) -> int | None:
        """The index of the first frame of core `cpu` entered after `index` (None: none is)."""
        row = self.frames.upper_bound((cpu, index, _ID_LIMIT))
        if row >= self.frames.num_rows:
            return None
        frame = self.frame(row)
        return frame.index if frame.cpu == cpu else None

    def tree(self, cpu: int) -> list[TreeNode]:
        """Core `cpu`'s calling contexts, parents first (empty without calls)."""
        return self._tree.get(cpu, [])


# -- building ------------------------------------------------------------------------------


def _build(trace: Trace, image: Image | None, directory: Path, progress: Progress | None) -> None:
    # Imported here: call detection loads numba (a second), which browsing a built index never needs.
    from ..analysis.calls.contexts import CallSumsCollector
    from ..analysis.calls.detect import detect
    from ..analysis.calls.frames import FrameSpill
    from ..analysis.calls.tables import FRAME_SCHEMA

    total = max(1, int(trace.manifest.get("counts", {}).get("instructions", 0)))
    read = [0]

    def count(rows: int) -> None:
        read[0] += rows
        if progress is not None:
            progress("detecting calls", min(read[0] / total, 1.0) * 0.9)

    with tempfile.TemporaryDirectory(prefix="cputrace-browse-calls-") as folder:
        spill = FrameSpill(Path(folder))
        sums = CallSumsCollector()
        with reading_progress(count):
            for _ in detect(trace, [spill, sums], image=image):
                pass
        stream = spill.stream(image)
        try:
            schema = pa.schema([FRAME_SCHEMA.field(name) for name in _FRAME_COLUMNS])
            write_keyed(
                directory / "frames.arrow", schema, FRAME_KEY, GROUP_ROWS, _frame_tables(stream.rows())
            )
        finally:
            with contextlib.suppress(Exception):  # the temporary folder goes anyway
                stream.close()
    callsums = sums.finish(image)
    pq.write_table(_tree_table(callsums), directory / "tree.parquet")
    (directory / "meta.json").write_text(
        json.dumps({"version": CALLS_VERSION, "has_time": callsums.has_time})
    )
    if progress is not None:
        progress("calls", 1.0)


def _frame_tables(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
    for batch in batches:
        yield pa.Table.from_batches([batch]).select(list(_FRAME_COLUMNS))


def _tree_table(callsums) -> pa.Table:
    columns: dict[str, list] = {name: [] for name in TreeNode.__dataclass_fields__}
    for cpu, contexts in callsums.cores.items():
        names = np.searchsorted(callsums.addresses, contexts.address)
        for i in range(len(contexts.parent)):
            columns["cpu"].append(cpu)
            columns["id"].append(i)
            columns["parent"].append(int(contexts.parent[i]))
            columns["function"].append(int(contexts.address[i]))
            columns["name"].append(callsums.names[int(names[i])])
            site = int(contexts.site[i])
            columns["site"].append(None if contexts.parent[i] < 0 or site == (1 << 64) - 1 else site)
            columns["calls"].append(int(contexts.calls[i]))
            columns["insns"].append(int(contexts.insns[i]))
            columns["time"].append(int(contexts.time[i]) if callsums.timed.get(cpu) else None)
            columns["first_index"].append(int(contexts.first[i]))
            columns["recursive"].append(bool(contexts.recursive[i]))
    types = {"function": pa.uint64(), "site": pa.uint64(), "name": pa.string(), "recursive": pa.bool_()}
    return pa.table({name: pa.array(values, types.get(name, pa.int64())) for name, values in columns.items()})
