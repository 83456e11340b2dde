"""The browse index: what the browser reads, laid out so that any action reads a few small groups.

Built once per store (store/indexes.py keeps it in the store's version folder, and rebuilds it
only when the store changes). It extends the state index (analysis/state.py): the same
meaning of registers and memory at a point, built with its snapshot and first-read queries,
laid out for lookups of a few rows instead of DuckDB queries (tens of milliseconds each on
a large trace). Its files are keyed files (keyed.py):

- `instructions`, `registers`, `memory`, `events`: the store's tables sorted by (cpu, seq),
  core after core, in groups of a thousand rows. A core's instructions are consecutive,
  so the instruction at position `index` among its core's is row `first_row + index`.
- `snapshots`: every `CHECKPOINT` seqs, each core's last write per register (and byte mask),
  so the registers at any point are one snapshot plus at most `CHECKPOINT` seqs of writes.
- `visits`: (cpu, pc, seq) of every instruction, sorted: the next or previous visit of a pc
  is one lookup; `times`: (cpu, time, seq), sorted, for the instruction at a time;
  `marks`: (cpu, seq, kind) of the exceptions and trace gaps.
- memory, shared by the cores: `writes`, every write with known data by (addr, size, seq,
  src); `places`, the distinct (addr, size) written; `initial`, the bytes read before any
  write (analysis/state.py says what memory at a point means). The bytes at a point are
  one lookup per place written in or just below the range.
- `timeline`, `bands`: instructions per (stretch of the trace, band of code addresses) and
  core, for the timeline strip (timeline.py).

`meta.json` holds per core its instruction count, first row and seq range, and the registers
it writes; the registers' widths, the widest memory write, and the timeline's axis.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from ..analysis.state import KNOWN_WRITES, initial_query, register_order, snapshot_query
from ..model import TABLES
from ..store.batches import read_batches
from ..store.indexes import index_dir, reading_index_file
from ..store.sql import connect, quoted
from ..store.trace import Trace
from ..store.write import STORED_SCHEMAS
from .keyed import KeyedFile, write_keyed
from .timeline import Axis, axis_query, band_query, timeline_query

if TYPE_CHECKING:
    import duckdb

INDEX_VERSION = 6
CHECKPOINT = 1 << 10
"""Seqs between register snapshots: a register query reads at most this many seqs' writes."""

GROUP_ROWS = 1 << 10
_READ_ROWS = 1 << 17

CORE_KEY = ("cpu", "seq")
SNAPSHOT_KEY = ("cpu", "checkpoint")
SNAPSHOT_COLUMNS = ("cpu", "reg", "mask", "size", "value", "wide", "seq", "src")
VISIT_KEY = ("cpu", "pc", "seq")
TIME_KEY = ("cpu", "time", "seq")
MARK_KEY = ("cpu", "seq")
WRITE_KEY = ("addr", "size", "seq", "src")
PLACE_KEY = ("addr", "size")
INITIAL_KEY = ("addr",)
MARK_KINDS = ("exception", "trace_gap")
"""Events the browser jumps between."""
_TYPES = {
    "cpu": pa.uint16(), "pc": pa.uint64(), "time": pa.int64(), "seq": pa.int64(), "kind": pa.string(),
    "addr": pa.uint64(), "size": pa.uint8(), "src": pa.int64(), "value": pa.uint64(), "wide": pa.binary(),
    "byte": pa.uint8(),
}  # fmt: skip
_KINDS = ", ".join(f"'{kind}'" for kind in MARK_KINDS)


@dataclass(frozen=True, slots=True)
class _Lookup:
    """A lookup file: its key, other columns, the query giving its rows in key order, and
    whether its groups split where the key's first column (a core) changes."""

    key: tuple[str, ...]
    more: tuple[str, ...]
    query: str
    by_core: bool = True


_LOOKUPS = {
    "visits": _Lookup(VISIT_KEY, (), "SELECT cpu, pc, seq FROM instructions ORDER BY ALL"),
    "times": _Lookup(TIME_KEY, (), "SELECT cpu, time, seq FROM instructions WHERE time >= 0 ORDER BY ALL"),
    "marks": _Lookup(
        MARK_KEY, ("kind",),
        f"SELECT cpu, seq, kind::VARCHAR AS kind FROM events WHERE kind IN ({_KINDS}) ORDER BY cpu, seq",
    ),
    "writes": _Lookup(
        WRITE_KEY, ("value", "wide"),
        f"SELECT addr, size, seq, src, value, wide FROM memory WHERE {KNOWN_WRITES} ORDER BY ALL",
        by_core=False,
    ),
    "places": _Lookup(
        PLACE_KEY, (), f"SELECT DISTINCT addr, size FROM memory WHERE {KNOWN_WRITES} ORDER BY ALL",
        by_core=False,
    ),
    "initial": _Lookup(INITIAL_KEY, ("byte",), initial_query(), by_core=False),
}  # fmt: skip


Progress = Callable[[str, float], None]
"""Called as a build goes: what it is doing, and the fraction of the build done (0 to 1)."""


@dataclass(frozen=True, slots=True)
class Core:
    """One core's instructions in the index."""

    cpu: int
    count: int
    first_row: int  # row of its first instruction in `instructions`
    first_seq: int
    last_seq: int
    registers: tuple[str, ...]  # the registers it writes, general purpose first


class BrowseIndex:
    """The browse index of one store, opened (`BrowseIndex.open` builds it on first use)."""

    def __init__(self, trace: Trace, directory: Path) -> None:
        self.trace = trace
        self.directory = directory
        with reading_index_file(directory / "meta.json"):
            meta = json.loads((directory / "meta.json").read_text())
            self.checkpoint: int = meta["checkpoint"]
            self.widths: dict[str, int] = meta["register_widths"]
            self.cores: dict[int, Core] = {
                int(c["cpu"]): Core(
                    int(c["cpu"]),
                    c["count"],
                    c["first_row"],
                    c["first_seq"],
                    c["last_seq"],
                    tuple(c["registers"]),
                )
                for c in meta["cores"]
            }
            self.widest_write: int = meta["widest_write"]
            timeline = meta["timeline"]  # None for a trace without instructions: nothing to show
            self.timeline = (
                Axis(timeline["axis"], timeline["lo"], timeline["hi"]) if timeline else Axis("seq", 0, 1)
            )
        self.tables = {name: KeyedFile(directory / f"{name}.arrow", CORE_KEY) for name in TABLES}
        self.snapshots = KeyedFile(directory / "snapshots.arrow", SNAPSHOT_KEY)
        lookups = {
            name: KeyedFile(directory / f"{name}.arrow", lookup.key) for name, lookup in _LOOKUPS.items()
        }
        self.visits, self.times, self.marks = lookups["visits"], lookups["times"], lookups["marks"]
        self.writes, self.places, self.initial = lookups["writes"], lookups["places"], lookups["initial"]
        self.timeline_cells = read_parquet(directory / "timeline.parquet") if timeline else _NO_CELLS
        bands = read_parquet(directory / "bands.parquet").to_pydict() if timeline else {"lo": [], "hi": []}
        self.bands: list[tuple[int, int]] = list(zip(bands["lo"], bands["hi"], strict=True))

    @classmethod
    def open(cls, trace: Trace, progress: Progress | None = None) -> BrowseIndex:
        """The index of `trace`, built (once per store content) if it does not exist yet."""
        return cls(trace, index_dir(trace, "browse", INDEX_VERSION, lambda d: build(trace, d, progress)))

    @property
    def size(self) -> int:
        """Bytes the index takes on disk."""
        return sum(f.stat().st_size for f in self.directory.iterdir() if f.is_file())


def read_parquet(path: Path) -> pa.Table:
    """A small Parquet file whole (ParquetFile: `pq.read_table` imports pyarrow.dataset, a
    tenth of a second of the first screen)."""
    with reading_index_file(path), pq.ParquetFile(path) as file:
        return file.read()


# -- building ------------------------------------------------------------------------------


_NO_CELLS = pa.table({"cpu": pa.array([], pa.uint16()), "bin": pa.array([], pa.int32()),
                      "band": pa.array([], pa.int32()), "count": pa.array([], pa.int64())})  # fmt: skip


class _Steps:
    """The build's progress: each step counts as many rows as it goes through."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress = progress
        self.total = max(total, 1)
        self.done = 0

    def advance(self, what: str, rows: int) -> None:
        self.done += rows
        if self.progress is not None:
            self.progress(what, min(self.done / self.total, 1.0))


_LOOKUP_ROWS = {"visits": "instructions", "times": "instructions", "marks": "events", "writes": "memory",
                "places": "memory", "initial": "memory"}  # fmt: skip
"""The table whose rows each lookup file's query goes through (for the progress)."""


def build(trace: Trace, directory: Path, progress: Progress | None = None) -> None:
    """Write the browse index of `trace` into `directory`, telling `progress` how far it is."""
    db = connect()
    try:
        db.execute("SET threads TO 2")
        db.execute("SET memory_limit = '256MB'")  # sorts past it spill to the index folder
        db.execute(f"SET temp_directory = {quoted(directory / 'spill')}")
        trace.add_views(db)
        cores = db.execute(
            "SELECT cpu, count(*), min(seq), max(seq) FROM instructions GROUP BY cpu ORDER BY cpu"
        ).fetchall()
        names: dict[int, list[str]] = {}
        for cpu, reg in db.execute("SELECT DISTINCT cpu, reg::VARCHAR FROM registers").fetchall():
            names.setdefault(cpu, []).append(reg)
        widths = dict(db.execute("SELECT reg::VARCHAR, max(size) FROM registers GROUP BY 1").fetchall())
        [(widest,)] = db.execute(f"SELECT coalesce(max(size), 1) FROM memory WHERE {KNOWN_WRITES}").fetchall()
        cpus = [cpu for cpu, *_ in cores]
        rows = {table: int(trace.manifest.get("counts", {}).get(table, 0)) for table in TABLES}
        copies = len(cpus) * sum(rows.values())  # a pass over each table per core
        lookups = sum(rows[table] for table in _LOOKUP_ROWS.values())
        steps = _Steps(progress, copies + rows["registers"] + lookups + rows["instructions"])
        for table in TABLES:
            _copy_by_core(trace, table, cpus, directory / f"{table}.arrow", steps)
        last_seq = max((last for *_, last in cores), default=-1)
        snapshots = snapshot_query(CHECKPOINT, last_seq + 1, "l.cpu, s.checkpoint, l.reg")
        write_keyed(
            directory / "snapshots.arrow", _snapshot_schema(), SNAPSHOT_KEY, GROUP_ROWS,
            _batches(db.sql(snapshots).to_arrow_reader(_READ_ROWS), _snapshot_schema()),
        )  # fmt: skip
        steps.advance("register snapshots", rows["registers"])
        for name, lookup in _LOOKUPS.items():
            schema = pa.schema([(column, _TYPES[column]) for column in (*lookup.key, *lookup.more)])
            reader = db.sql(lookup.query).to_arrow_reader(_READ_ROWS)
            write_keyed(
                directory / f"{name}.arrow", schema, lookup.key, GROUP_ROWS, _batches(reader, schema),
                lookup.by_core,
            )  # fmt: skip
            steps.advance(name, rows[_LOOKUP_ROWS[name]])
        timeline = _build_timeline(db, directory) if cores else None
        steps.advance("timeline", rows["instructions"])
    finally:
        db.close()
    first_row = 0
    meta_cores = []
    for cpu, count, first, last in cores:
        meta_cores.append(
            {
                "cpu": cpu, "count": count, "first_row": first_row, "first_seq": first, "last_seq": last,
                "registers": sorted(names.get(cpu, []), key=register_order),
            }
        )  # fmt: skip
        first_row += count
    meta = {
        "version": INDEX_VERSION,
        "checkpoint": CHECKPOINT,
        "register_widths": widths,
        "widest_write": widest,
        "timeline": timeline,
        "cores": meta_cores,
    }
    (directory / "meta.json").write_text(json.dumps(meta) + "\n")


def _build_timeline(db: duckdb.DuckDBPyConnection, directory: Path) -> dict:
    """The timeline's sums (timeline.py) into `timeline.parquet` and its bands into
    `bands.parquet`; returns its axis, for meta.json."""
    name, lo, hi = db.execute(axis_query()).fetchall()[0]
    axis = Axis(name, int(lo), int(hi))
    bands = db.sql(band_query()).to_arrow_table()
    db.register("bands", bands)
    query, parameters = timeline_query(axis, bands)
    pq.write_table(db.sql(query, params=parameters).to_arrow_table(), directory / "timeline.parquet")
    pq.write_table(bands, directory / "bands.parquet")
    return {"axis": axis.name, "lo": axis.lo, "hi": axis.hi}


def _batches(reader: pa.RecordBatchReader, schema: pa.Schema) -> Iterator[pa.Table]:
    for batch in reader:
        yield pa.Table.from_batches([batch]).cast(schema)


def _snapshot_schema() -> pa.Schema:
    """A snapshot row: its checkpoint, then the register write's columns as the store has them."""
    registers = STORED_SCHEMAS["registers"]
    return pa.schema([("checkpoint", pa.int64())] + [registers.field(name) for name in SNAPSHOT_COLUMNS])


def _copy_by_core(trace: Trace, table: str, cpus: list[int], out: Path, steps: _Steps) -> None:
    """Copy `table` sorted by (cpu, seq): one pass over it per core (a core's rows come in seq
    order), so memory stays bounded without a sort."""
    import pyarrow.compute as pc  # here: browsing an indexed store does without its import

    schema = STORED_SCHEMAS[table]

    def parts() -> Iterator[pa.Table]:
        for cpu in cpus:
            for batch in read_batches(trace, table, schema.names, rows=_READ_ROWS):
                steps.advance(f"copying {table}", batch.num_rows)
                part = pa.Table.from_batches([batch])
                if len(cpus) > 1:
                    part = part.filter(pc.equal(part.column("cpu"), cpu))
                if part.num_rows:
                    yield part

    write_keyed(out, schema, CORE_KEY, GROUP_ROWS, parts())
