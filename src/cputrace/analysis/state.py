"""Register values and memory bytes at any point of a trace, answered from an index built once.

"At seq P" means after instruction P and every record that belongs to it; registers are
per core, memory is shared by all cores and addressed virtually.

Registers. Each row of `registers` is a write of the whole register (zero-extended to the
register's widest write: this is the AArch64 rule for `w<n>`, which the model names `x<n>`),
or, when the row has a byte mask, of just the masked bytes (`V0<127:64>`). Views of one
physical register with different names (AArch32 `s0`/`d0`/`q0`, AArch64 `q0`/`v0`) are
kept as the separate names the input printed; no value is made up for a view it did not.
The index holds a snapshot every `CHECKPOINT` instructions of the last write per (core,
register, byte mask); a query reads one snapshot plus the writes after it.

Memory. The index holds every write with known data (`W` and `U` accesses) sorted by
address then seq, so a query reads only the pages of the asked range, plus the last write
per (address, size) and `CHECKPOINT` interval, so an address written millions of times
costs one interval's writes. Overlapping writes of different sizes are applied oldest
first, byte by byte. A byte that is read (or fetched) before it is ever written holds that
value from the start of the trace, as far as the trace can tell; such bytes have the origin
`READ_BEFORE_WRITE`. Bytes neither written nor read by then are unknown, or the image's
bytes when one is given. Values are the model's: little-endian readings of the bytes in
address order (so a big-endian trace needs a decoder that stores them that way).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import CputraceError, UsageError
from ..store.indexes import damaged_index, index_dir, reading_index
from ..store.sql import connect

if TYPE_CHECKING:
    import duckdb

    from ..image import Image
    from ..store.trace import Trace

INDEX_VERSION = 4
CHECKPOINT = 1 << 15
"""Instructions between register snapshots: a query replays at most this many."""

MAX_MEMORY_BYTES = 1 << 24
"""The most bytes one `memory` call returns (16 MiB: 9 bytes of working memory each, and a
hex dump of a million lines): a longer range is refused rather than exhausting memory."""

READ_BEFORE_WRITE = -1  # origins >= 0 are the seq of the write that set the byte
FROM_IMAGE = -2
UNKNOWN = -3

KNOWN_WRITES = "op::VARCHAR IN ('W', 'U') AND (value IS NOT NULL OR wide IS NOT NULL) AND addr IS NOT NULL"
"""The memory rows that set bytes: writes (and atomic updates) whose address and data the trace
shows."""

_MEMORY_ROW_GROUP = 1 << 16
_SNAPSHOT_ROW_GROUP = 1 << 13
_LAST_ADDRESS = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class RegisterValue:
    """A register of one core: its bytes (little-endian), which are known, and its last writer."""

    cpu: int
    name: str
    data: bytes
    known: bytes  # one flag per byte of `data`
    seq: int  # the instruction whose write set the register (last of its bytes)

    @property
    def value(self) -> int | None:
        """The value as an integer when every byte is known."""
        return int.from_bytes(self.data, "little") if all(self.known) else None

    def hex(self) -> str:
        """Most significant byte first, `xx` for bytes never written."""
        return "".join(
            f"{b:02x}" if k else "xx" for b, k in zip(reversed(self.data), reversed(self.known), strict=True)
        )


@dataclass(frozen=True, slots=True)
class MemoryBytes:
    """Bytes [address, address + len(data)) and, per byte, where its value comes from."""

    address: int
    data: bytes  # 0 where unknown
    origin: np.ndarray  # int64: seq of the write, or READ_BEFORE_WRITE, FROM_IMAGE, UNKNOWN

    @property
    def known(self) -> np.ndarray:
        return self.origin != UNKNOWN


@dataclass(frozen=True, slots=True)
class Point:
    """The instruction a state is taken after."""

    seq: int
    time: int | None
    cpu: int
    pc: int


_NATURAL = re.compile(r"(\d+)")


def register_order(name: str) -> tuple:
    """Sort key putting x2 before x10 and general registers before system ones."""
    general = re.fullmatch(r"[xrw]\d+(_.*)?", name) is not None
    parts = tuple(int(p) if p.isdigit() else p for p in _NATURAL.split(name))
    return (not general, parts)


class StateIndex:
    """The state index of one store; `StateIndex.open(trace)` builds it on first use."""

    def __init__(self, trace: Trace, directory: Path) -> None:
        self.trace = trace
        self.directory = directory
        import duckdb

        meta_file = directory / "meta.json"
        try:
            meta = json.loads(meta_file.read_bytes())
            self.checkpoint: int = meta["checkpoint"]
            self.instructions: int = meta["instructions"]
            self.widest_write: int = meta["widest_write"]
            self.widths: dict[str, int] = meta["register_widths"]
        except (ValueError, TypeError, KeyError) as exc:  # its size is right (indexes.py), its bytes not
            raise damaged_index(meta_file, f"not the JSON the index was built with ({exc})") from None
        self._db = connect()
        self._db.execute("SET threads TO 2")
        views = (
            ("snapshots", "registers"),
            ("written", "writes"),
            ("thinned", "thinned"),
            ("initial", "initial"),
        )
        for view, file in views:
            path = directory / f"{file}.parquet"
            try:  # reads the file's footer
                self._db.execute(f"CREATE VIEW {view} AS SELECT * FROM read_parquet('{_quote(path)}')")
            except duckdb.Error as exc:
                self._db.close()
                raise damaged_index(path, str(exc).splitlines()[0]) from None
        trace.add_views(self._db, ("instructions", "registers"))

    @classmethod
    def open(cls, trace: Trace) -> StateIndex:
        """The index of `trace`, built (once per store content) if it does not exist yet."""
        return cls(trace, index_dir(trace, "state", INDEX_VERSION, lambda d: _build(trace, d)))

    def close(self) -> None:
        self._db.close()

    # -- where ---------------------------------------------------------------------------

    def point(self, seq: int) -> Point:
        """The instruction `seq`; CputraceError if the trace has none with that number."""
        row = self._db.execute("SELECT seq, time, cpu, pc FROM instructions WHERE seq = ?", [seq]).fetchone()
        if row is None:
            has = f"seq 0..{self.instructions - 1}" if self.instructions else "no instructions"
            raise CputraceError(f"{self.trace.path}: no instruction with seq {seq} (the trace has {has})")
        return Point(*row)

    def point_at_time(self, time: int) -> Point:
        """The last instruction at or before `time` (in the trace's time unit)."""
        row = self._db.execute("SELECT max(seq) FROM instructions WHERE time <= ?", [time]).fetchone()
        if row is None or row[0] is None:
            raise CputraceError(f"{self.trace.path}: no instruction at or before time {time}")
        return self.point(row[0])

    # -- registers -----------------------------------------------------------------------

    def registers(self, seq: int, cpus: list[int] | None = None) -> list[RegisterValue]:
        """Every register each core has written up to and including instruction `seq`."""
        snapshot = (seq + 1) // self.checkpoint
        first = snapshot * self.checkpoint
        where_cpu = f"AND cpu IN ({', '.join(str(int(c)) for c in cpus)})" if cpus else ""
        with reading_index(self.directory):
            rows = self._db.execute(
                f"""
            SELECT cpu, reg, mask, size, value, wide, seq FROM (
                SELECT cpu, reg, mask, size, value, wide, seq, src FROM snapshots
                WHERE checkpoint = $snapshot {where_cpu}
                UNION ALL
                SELECT cpu, reg::VARCHAR, mask, size, value, wide, seq, src FROM registers
                WHERE seq >= $first AND seq <= $seq {where_cpu}
            )
            QUALIFY row_number() OVER (
                PARTITION BY cpu, reg, coalesce(mask, ''::BLOB) ORDER BY seq DESC, src DESC) = 1
            ORDER BY cpu, reg, seq, src
            """,
                {"snapshot": snapshot, "first": first, "seq": seq},
            ).fetchall()
        return merge_registers(rows, self.widths)

    # -- memory --------------------------------------------------------------------------

    def memory(self, seq: int, address: int, length: int, image: Image | None = None) -> MemoryBytes:
        """Bytes [address, address+length) after instruction `seq`, each with its origin."""
        if length < 0 or address < 0 or address + length > 1 << 64:
            raise CputraceError(f"memory range 0x{address:x}+{length} is outside the address space")
        if length > MAX_MEMORY_BYTES:
            raise UsageError(
                f"memory range 0x{address:x}+{length}: at most {MAX_MEMORY_BYTES:,} bytes at a time"
            )
        data = np.zeros(length, dtype=np.uint8)
        origin = np.full(length, UNKNOWN, dtype=np.int64)
        bounds = {"lo": address, "hi": address + length}
        with reading_index(self.directory):
            initial = self._db.execute(
                "SELECT addr, byte FROM initial WHERE addr >= $lo AND addr < $hi", bounds
            ).fetchnumpy()
            last = self._last_writes(address, length, seq)
        at = (initial["addr"] - np.uint64(address)).astype(np.int64)
        data[at] = initial["byte"]
        origin[at] = READ_BEFORE_WRITE
        writes = sorted(
            ((addr, size, w["value"], w["wide"], w["seq"], w["src"]) for addr, size, w in last),
            key=lambda r: (r[4], r[5]),
        )
        paint_writes(writes, address, data, origin)
        if image is not None:
            fill_from_image(image, address, data, origin)
        return MemoryBytes(address, data.tobytes(), origin)

    def _last_writes(self, address: int, length: int, seq: int) -> list[tuple]:
        """The last write up to instruction `seq` of each (address, size) that touches
        [address, address+length): thinned to one per interval before seq's, every one since."""
        interval = seq // self.checkpoint
        return self._db.execute(
            """
            SELECT addr, size, arg_max(struct_pack(value, wide, seq, src), (seq, src)) AS w FROM (
                SELECT addr, size, value, wide, seq, src FROM thinned
                WHERE addr >= $first AND addr < $hi AND interval < $interval
                UNION ALL
                SELECT addr, size, value, wide, seq, src FROM written
                WHERE addr >= $first AND addr < $hi AND seq >= $since AND seq <= $seq
            ) GROUP BY addr, size
            """,
            {
                "hi": address + length,
                "first": max(0, address - self.widest_write + 1),
                "interval": interval,
                "since": interval * self.checkpoint,
                "seq": seq,
            },
        ).fetchall()


def _quote(path: Path) -> str:
    return str(path).replace("'", "''")


def merge_registers(rows: list[tuple], widths: dict[str, int]) -> list[RegisterValue]:
    """Replay each register's last write per byte mask, oldest first, into its bytes.

    A write without a mask sets the whole register, zero-extended to its widest write.
    """
    merged: dict[tuple[int, str], list[tuple]] = {}
    for row in rows:
        merged.setdefault((row[0], row[1]), []).append(row)
    result = []
    for (cpu, name), writes in merged.items():
        width = max(widths.get(name, 0), *(w[3] for w in writes))
        data = bytearray(width)
        known = bytearray(width)
        last = -1
        for _, _, mask, size, value, wide, seq in sorted(writes, key=lambda w: w[6]):
            raw = wide if wide is not None else (value or 0).to_bytes(8, "little")[:size]
            if mask is None:
                data[:] = raw.ljust(width, b"\0")
                known[:] = b"\x01" * width
            else:
                for i in range(min(size, width)):
                    if mask[i // 8] >> (i % 8) & 1:
                        data[i], known[i] = raw[i], 1
            last = seq
        result.append(RegisterValue(cpu, name, bytes(data), bytes(known), last))
    result.sort(key=lambda r: (r.cpu, register_order(r.name)))
    return result


def paint_writes(writes: list[tuple], address: int, data: np.ndarray, origin: np.ndarray) -> None:
    """Apply writes (oldest first) to the bytes of [address, address+len(data)) they overlap."""
    end = address + len(data)
    for addr, size, value, wide, seq, _ in writes:
        raw = wide if wide is not None else value.to_bytes(size, "little")
        lo, hi = max(addr, address), min(addr + size, end)
        if lo < hi:
            data[lo - address : hi - address] = np.frombuffer(raw, np.uint8)[lo - addr : hi - addr]
            origin[lo - address : hi - address] = seq


def fill_from_image(image: Image, address: int, data: np.ndarray, origin: np.ndarray) -> None:
    """Bytes still unknown take the image's contents where it has any."""
    end = address + len(data)
    for region in image.regions:
        lo, hi = max(address, region.start), min(end, region.end)
        if lo >= hi:
            continue
        piece = np.frombuffer(region.data, dtype=np.uint8)[lo - region.start : hi - region.start]
        at = slice(lo - address, hi - address)
        unknown = origin[at] == UNKNOWN
        data[at] = np.where(unknown, piece, data[at])
        origin[at] = np.where(unknown, FROM_IMAGE, origin[at])


# -- building ------------------------------------------------------------------------------


def _build(trace: Trace, directory: Path) -> None:
    instructions = int(trace.manifest.get("counts", {}).get("instructions", 0))
    db = connect()
    try:
        db.execute("SET threads TO 2")
        db.execute("SET preserve_insertion_order = false")
        db.execute("SET memory_limit = '1GB'")
        db.execute(f"SET temp_directory = '{_quote(directory / 'spill')}'")
        trace.add_views(db, ("registers", "memory"))
        _build_snapshots(db, directory / "registers.parquet", instructions)
        widths = dict(db.execute("SELECT reg::VARCHAR, max(size) FROM registers GROUP BY 1").fetchall())
        widest = _build_writes(db, directory / "writes.parquet", directory / "thinned.parquet")
        _build_initial(db, directory / "initial.parquet")
    finally:
        db.close()
    meta = {
        "version": INDEX_VERSION,
        "checkpoint": CHECKPOINT,
        "instructions": instructions,
        "widest_write": widest,
        "register_widths": widths,
    }
    (directory / "meta.json").write_text(json.dumps(meta) + "\n")


def _copy(db: duckdb.DuckDBPyConnection, query: str, out: Path, row_group: int) -> None:
    db.execute(
        f"COPY ({query}) TO '{_quote(out)}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {row_group})"
    )


def _build_snapshots(db: duckdb.DuckDBPyConnection, out: Path, instructions: int) -> None:
    query = snapshot_query(CHECKPOINT, instructions, "s.checkpoint, l.cpu, l.reg")
    _copy(db, query, out, _SNAPSHOT_ROW_GROUP)


def snapshot_query(checkpoint: int, instructions: int, order: str) -> str:
    """Snapshot c of every core: the last write per (cpu, register, mask) among seq < c * checkpoint,
    for c from 1 while c * checkpoint <= instructions; the rows ordered by `order` (columns of
    `s`, the snapshot, and `l`, the write). Reads the view `registers`."""
    return f"""
        WITH last AS (
            SELECT cpu, reg::VARCHAR AS reg, coalesce(mask, ''::BLOB) AS key,
                   seq // {checkpoint} + 1 AS interval,
                   arg_max(struct_pack(mask, size, value, wide, seq, src), (seq, src)) AS w
            FROM registers GROUP BY ALL
        )
        SELECT s.checkpoint, l.cpu, l.reg, l.w.mask, l.w.size, l.w.value, l.w.wide, l.w.seq, l.w.src
        FROM (
            SELECT k.cpu, k.reg, k.key, c.range AS checkpoint
            FROM (SELECT DISTINCT cpu, reg, key FROM last) k, range(1, {instructions // checkpoint + 1}) c
        ) s
        ASOF JOIN last l
        ON l.cpu = s.cpu AND l.reg = s.reg AND l.key = s.key AND l.interval <= s.checkpoint
        ORDER BY {order}
    """


def _build_writes(db: duckdb.DuckDBPyConnection, out: Path, thinned: Path) -> int:
    """Every write with known data, by address then seq; and the last per CHECKPOINT interval.

    A query reads the thinned writes of the intervals before its point and the full ones of
    its own interval, so an address written millions of times costs a few thousand rows.
    Returns the widest write's size.
    """
    query = (
        f"SELECT addr, size, seq, src, value, wide FROM memory WHERE {KNOWN_WRITES} ORDER BY addr, seq, src"
    )
    _copy(db, query, out, _MEMORY_ROW_GROUP)
    query = f"""
        SELECT addr, size, interval, w.value, w.wide, w.seq, w.src FROM (
            SELECT addr, size, seq // {CHECKPOINT} AS interval,
                   arg_max(struct_pack(value, wide, seq, src), (seq, src)) AS w
            FROM read_parquet('{_quote(out)}') GROUP BY ALL
        ) ORDER BY addr, interval
    """
    _copy(db, query, thinned, _MEMORY_ROW_GROUP)
    widest = db.execute(f"SELECT max(size) FROM read_parquet('{_quote(out)}')").fetchone()
    return int(widest[0] or 1)


def _build_initial(db: duckdb.DuckDBPyConnection, out: Path) -> None:
    _copy(db, initial_query(), out, _MEMORY_ROW_GROUP)


def initial_query() -> str:
    """Bytes whose first access is a read (or fetch), with the value it saw, by address: (addr,
    byte). Reads the view `memory`.

    The first access to a byte is the first access of one of the (address, size, read or
    write) groups that cover it, so only those few first accesses are split into bytes.
    """
    return f"""
        WITH firsts AS (
            SELECT addr, size, op::VARCHAR IN ('W', 'U') AS write, min((seq, src)) AS first_at,
                   arg_min(struct_pack(value, wide), (seq, src)) AS data
            FROM memory WHERE (value IS NOT NULL OR wide IS NOT NULL)
                AND addr <= {_LAST_ADDRESS}::UBIGINT - size
            GROUP BY ALL
        ), bytes AS (
            SELECT addr + i::UBIGINT AS addr, first_at, write,
                CASE WHEN data.wide IS NULL THEN ((data.value >> (8 * i)::UBIGINT) & 255)::UTINYINT
                     ELSE ('0x' || substring(hex(data.wide), 2 * i + 1, 2))::UTINYINT END AS byte
            FROM firsts, range(size::BIGINT) AS t(i)
        )
        SELECT addr, first.byte AS byte FROM (
            SELECT addr, arg_min(struct_pack(byte, write), first_at) AS first FROM bytes GROUP BY addr
        ) WHERE NOT first.write ORDER BY addr
    """
