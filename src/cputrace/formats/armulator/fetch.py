"""The seq of every ARMulator row, and the opcode fetches that go to a later instruction
(decoder.py's docstring): column-wise over the rows of a chunk of lines.

The rows come without seq, each with its line (`src`). A record belongs to the instruction
before it (instruction 0 before the first); a core opcode fetch is pending from its line on,
and the first of the next `FETCH_WINDOW` instructions whose address it covers claims it: its
seq becomes that instruction's. The state crossing chunks (and the parts of a split input,
split.py) is the instruction count, the pending fetches and the memory rows held
back for them (`Sequencer.resume`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..base import Batch

FETCH_WINDOW = 4  # instructions an opcode fetch may run ahead of the instruction it fetches

PendingFetch = tuple[int, int, int, int]
"""An opcode fetch no instruction has claimed yet: its memory row (in the rows held back), its
address, its size in bytes and the instruction count when it was printed."""


class Sequencer:
    """Numbers rows chunk by chunk: `sequenced` each chunk's rows, `finish` at the end."""

    def __init__(self) -> None:
        self.count = 0  # instructions seen
        self.pending: list[PendingFetch] = []
        self._held: pa.Table | None = None  # memory rows from the oldest pending fetch's seq on

    def resume(self, count: int, held: pa.Table | None, pending: list[PendingFetch]) -> None:
        """Go on from the state another sequencer stopped in: `count` instructions seen, and the
        memory rows it held back with its pending fetches."""
        self.count = count
        self._held = held
        self.pending = list(pending)

    def held(self) -> pa.Table | None:
        """The memory rows held back, in input order (the pending fetches index them)."""
        return self._held

    def sequenced(self, rows: Batch) -> Batch:
        """The rows of the next lines (every table, in line order) with their seq; memory rows
        in seq order, those from the oldest still pending fetch's seq on held back.

        A fetch claimed by a later instruction now has a later seq than the rows printed after
        it (a data access of the instruction in progress, fetches of other addresses); a stable
        sort by seq puts it after them and keeps the rows of each instruction in input order.
        A fetch still pending can only move to a later seq, so the memory rows from its seq on
        wait for the next lines: the rows come out as from one chunk, wherever chunks end.
        """
        instructions = rows["instructions"]
        insn_lines = instructions.column("src").to_numpy()
        base = self.count
        self.count += len(insn_lines)
        batch = {"instructions": _with_seq(instructions, np.arange(base, self.count, dtype=np.int64))}
        for name in ("registers", "events"):
            table = rows[name]
            batch[name] = _with_seq(table, _seq_at(table.column("src").to_numpy(), insn_lines, base))
        memory = self._claimed(rows["memory"], insn_lines, instructions.column("pc").to_numpy(), base)
        batch["memory"] = self._released(memory)
        return {name: table for name, table in batch.items() if table.num_rows}

    def finish(self) -> Batch:
        """The rows still held back, the input having ended: their fetches stay where they are."""
        held, self._held, self.pending = self._held, None, []
        return {"memory": _by_seq(held)} if held is not None and held.num_rows else {}

    def _claimed(self, memory: pa.Table, insn_lines: np.ndarray, pcs: np.ndarray, base: int) -> pa.Table:
        """The held rows and `memory` in input order, with seq, fetches claimed; `pending` the
        fetches the instructions after these lines may still claim."""
        lines = memory.column("src").to_numpy()
        count_at = base + np.searchsorted(insn_lines, lines)  # the instruction count at each row
        memory = _with_seq(memory, np.maximum(count_at - 1, 0))
        rows = np.flatnonzero(_equal(memory.column("op"), "F") & _equal(memory.column("source"), "core"))
        offset = 0
        if self._held is not None:
            offset = self._held.num_rows
            memory = pa.concat_tables([self._held, memory])
        carried = np.array(self.pending, np.uint64).reshape(-1, 4)
        new = rows + offset
        row = np.concatenate([carried[:, 0].astype(np.int64), new])
        addr = np.concatenate([carried[:, 1], memory.column("addr").to_numpy()[new]])
        size = np.concatenate([carried[:, 2], memory.column("size").to_numpy()[new].astype(np.uint64)])
        born = np.concatenate([carried[:, 3].astype(np.int64), count_at[rows]])
        seq = memory.column("seq").to_numpy().copy()
        open_ = np.ones(len(row), bool)
        for ahead in range(FETCH_WINDOW):
            at = born + ahead - base  # the candidate instruction, by index in these lines
            seen = open_ & (at >= 0) & (at < len(pcs))
            pc_at = pcs[np.where(seen, at, 0)] if len(pcs) else np.zeros(len(at), np.uint64)
            covered = seen & (pc_at >= addr) & (pc_at - addr < size)
            seq[row[covered]] = born[covered] + ahead
            open_ &= ~covered
        still = open_ & (born + FETCH_WINDOW - 1 >= self.count)
        kept = (row[still], addr[still], size[still], born[still])
        self.pending = list(zip(*(values.tolist() for values in kept), strict=True))
        return _with_seq(memory, seq)

    def _released(self, memory: pa.Table) -> pa.Table:
        """The rows no pending fetch can still move before, in seq order; the rest held back."""
        seq = memory.column("seq").to_numpy()
        if not self.pending:
            self._held = None
            return _by_seq(memory)
        oldest = min(seq[row] for row, *_ in self.pending)
        held = np.flatnonzero(seq >= oldest)
        moved = {int(row): index for index, row in enumerate(held)}
        self.pending = [(moved[row], *rest) for row, *rest in self.pending]
        self._held = _canonical(memory.take(held))
        return _by_seq(memory.filter(seq < oldest))


def _seq_at(lines: np.ndarray, insn_lines: np.ndarray, base: int) -> np.ndarray:
    """The seq of records at `lines`: the instruction before them, 0 before the first."""
    return np.maximum(base + np.searchsorted(insn_lines, lines) - 1, 0)


def _equal(column: pa.ChunkedArray, value: str) -> np.ndarray:
    """Whether each value of a dictionary column is `value`, read off its indices."""
    parts = []
    for chunk in column.chunks:
        codes = [code for code, entry in enumerate(chunk.dictionary.to_pylist()) if entry == value]
        parts.append(np.isin(chunk.indices.to_numpy(), codes))
    return np.concatenate(parts) if parts else np.zeros(0, bool)


def _with_seq(table: pa.Table, seq: np.ndarray) -> pa.Table:
    return table.set_column(table.schema.get_field_index("seq"), "seq", pa.array(seq, pa.int64()))


def _by_seq(table: pa.Table) -> pa.Table:
    seq = table.column("seq").to_numpy()
    if np.any(seq[1:] < seq[:-1]):
        table = table.take(np.argsort(seq, kind="stable"))
    return table


def _canonical(table: pa.Table) -> pa.Table:
    """`table` in one chunk, its dictionaries those of its own values: held rows compare equal
    (split.Carry.joins) whichever chunks they were cut from."""
    columns = [
        column.cast(pa.string()).dictionary_encode() if pa.types.is_dictionary(column.type) else column
        for column in table.combine_chunks().columns
    ]
    return pa.Table.from_arrays(columns, schema=table.schema)
