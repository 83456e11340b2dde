"""Two traces side by side: `cputrace diff`'s alignment (analysis/diff.py), kept for browsing.

The comparison runs once per pair of stores (and options); its pairs and every divergence go
to keyed files in A's index folder: `pairs` (cpu, a_seq, b_seq) and `divergences` by (cpu,
position in A). Then the B instruction beside any A instruction, and the next or previous
divergence, are one lookup each; what differs at a pair is read from both sessions' lines.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import xxhash

from ..analysis.diff import DiffOptions, Divergence, diff_traces
from ..store.indexes import index_dir, reading_index_file, store_key
from .index import GROUP_ROWS, Progress
from .keyed import KeyedFile, KeyedWriter
from .lines import Line
from .session import Session

DIFF_VERSION = 1
PAIR_KEY = ("cpu", "a_seq")
DIVERGENCE_KEY = ("cpu", "position", "number")
_PAIRS = pa.schema([("cpu", pa.uint16()), ("a_seq", pa.int64()), ("b_seq", pa.int64())])
_DIVERGENCES = pa.schema(
    [("cpu", pa.uint16()), ("position", pa.int64()), ("number", pa.int64()), ("kinds", pa.string()),
     ("a_seq", pa.int64()), ("b_seq", pa.int64()), ("a_count", pa.int64()), ("b_count", pa.int64())]
)  # fmt: skip
_LAST = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class Difference:
    """One thing that differs between paired instructions: what, and its value on each side."""

    what: str  # "opcode", "executed", "time", a register's name, or a memory address (0x...)
    a: object
    b: object


class _Writer:
    """Follows the comparison (an AlignmentFollower) into the two keyed files."""

    def __init__(self, directory: Path) -> None:
        self.pairs = KeyedWriter(directory / "pairs.arrow", _PAIRS, PAIR_KEY, GROUP_ROWS)
        self.divergences = KeyedWriter(
            directory / "divergences.arrow", _DIVERGENCES, DIVERGENCE_KEY, GROUP_ROWS
        )
        self.count = 0

    def follow(self, cpu: int, a_seqs: np.ndarray, b_seqs: np.ndarray, divergences: list[Divergence]) -> None:
        if len(a_seqs):
            cpus = np.full(len(a_seqs), cpu, np.uint16)
            self.pairs.write(pa.table([cpus, a_seqs, b_seqs], schema=_PAIRS))
        if divergences:
            numbers = range(self.count, self.count + len(divergences))
            self.count += len(divergences)
            rows = {
                "cpu": [cpu] * len(divergences),
                "position": [d.position for d in divergences],
                "number": list(numbers),
                "kinds": [",".join(d.kinds) for d in divergences],
                **{
                    name: [getattr(d, name) for d in divergences]
                    for name in ("a_seq", "b_seq", "a_count", "b_count")
                },
            }
            self.divergences.write(pa.table(rows, schema=_DIVERGENCES))

    def close(self) -> None:
        self.pairs.close()
        self.divergences.close()


class DiffView:
    """Trace A (`a`) against trace B (`b`), aligned."""

    def __init__(self, a: Session, b: Session, directory: Path) -> None:
        self.a, self.b = a, b
        self.directory = directory
        self.pairs = KeyedFile(directory / "pairs.arrow", PAIR_KEY)
        self.divergences = KeyedFile(directory / "divergences.arrow", DIVERGENCE_KEY)
        with reading_index_file(directory / "meta.json"):
            self.summary = json.loads((directory / "meta.json").read_text())["summary"]

    @classmethod
    def open(
        cls, a: Session, b: Session, options: DiffOptions | None = None, progress: Progress | None = None
    ) -> DiffView:
        """A against B, compared once per pair of stores and options (kept in A's index;
        default options: `cputrace diff`'s)."""
        options = options or DiffOptions()
        key = xxhash.xxh3_64(f"{store_key(b.trace, DIFF_VERSION)}{sorted(asdict(options).items())}".encode())

        def build(directory: Path) -> None:
            if progress is not None:
                progress("comparing the traces", 0.0)
            writer = _Writer(directory)
            result = diff_traces(a.trace, b.trace, options, limit=0, follower=writer)
            writer.close()
            summary = {"paired": result.paired, "divergences": result.total, "counts": dict(result.counts),
                       "only_a": result.only_a, "only_b": result.only_b}  # fmt: skip
            (directory / "meta.json").write_text(json.dumps({"version": DIFF_VERSION, "summary": summary}))
            if progress is not None:
                progress("comparing the traces", 1.0)

        return cls(a, b, index_dir(a.trace, f"diff-{key.hexdigest()}", DIFF_VERSION, build))

    def aligned(self, cpu: int, seq: int) -> tuple[int | None, bool]:
        """B's instruction beside A's instruction `seq` of core `cpu`, and whether the two are
        paired: the pair's B seq, or for an instruction only A has, the B seq of the last pair
        before it (None: no pair comes before it)."""
        row = self.pairs.upper_bound((cpu, seq)) - 1
        if row < 0:
            return None, False
        pair = self.pairs.row(row)
        if pair["cpu"] != cpu:
            return None, False
        return int(pair["b_seq"]), pair["a_seq"] == seq

    def next_divergence(self, cpu: int, seq: int, forward: bool = True) -> Divergence | None:
        """Core `cpu`'s next (previous) divergence after (before) A's instruction `seq`."""
        found = self.divergences
        row = found.upper_bound((cpu, seq, _LAST)) if forward else found.lower_bound((cpu, seq, 0)) - 1
        if not 0 <= row < found.num_rows:
            return None
        divergence = self._divergence(found.row(row))
        return divergence if divergence.cpu == cpu else None

    def divergences_at(self, cpu: int, seq: int) -> list[Divergence]:
        """The divergences placed at A's instruction `seq` (to highlight it)."""
        return [
            self._divergence(r)
            for r in self.divergences.between((cpu, seq, 0), (cpu, seq, _LAST)).to_pylist()
        ]

    def divergent_seqs(self, cpu: int, first: int, last: int) -> set[int]:
        """A's instructions `first` to `last` of core `cpu` that have divergences placed at
        them (to highlight a screenful with one read)."""
        found = self.divergences.between((cpu, first, 0), (cpu, last, _LAST))
        return set(found.column("position").to_pylist())

    def differences(self, a_seq: int, b_seq: int) -> list[Difference]:
        """What differs between A's instruction `a_seq` and B's `b_seq`: the instruction's own
        fields, then the values of the registers and memory bytes each writes."""
        return self.line_differences(self.a.line(a_seq), self.b.line(b_seq))

    @staticmethod
    def line_differences(a: Line, b: Line) -> list[Difference]:
        """`differences` of two lines already read (A's and B's)."""
        found = [
            Difference(name, getattr(a, name), getattr(b, name))
            for name in ("pc", "opcode", "executed", "time")
            if getattr(a, name) != getattr(b, name)
        ]
        a_regs, b_regs = _register_values(a), _register_values(b)
        for name in sorted(a_regs.keys() | b_regs.keys()):
            if a_regs.get(name) != b_regs.get(name):
                found.append(Difference(name, a_regs.get(name), b_regs.get(name)))
        a_bytes, b_bytes = _written_bytes(a), _written_bytes(b)
        for address in sorted(a_bytes.keys() | b_bytes.keys()):
            if a_bytes.get(address) != b_bytes.get(address):
                found.append(Difference(f"{address:#x}", a_bytes.get(address), b_bytes.get(address)))
        return found

    @staticmethod
    def _divergence(row: dict) -> Divergence:
        kinds = tuple(row["kinds"].split(","))
        sides = (row["a_seq"], row["b_seq"], row["a_count"], row["b_count"])
        return Divergence(row["cpu"], kinds, *sides, row["position"])


def _register_values(line: Line) -> dict[str, int | bytes | None]:
    return {w.name: w.value if w.wide is None else w.wide for w in line.registers}


def _written_bytes(line: Line) -> dict[int, int]:
    """The bytes a line's memory writes set, by address (the last write wins)."""
    written: dict[int, int] = {}
    for access in line.memory:
        if access.op not in ("W", "U") or (access.value is None and access.wide is None):
            continue
        data = access.wide if access.wide is not None else access.value.to_bytes(access.size, "little")
        for offset, byte in enumerate(data):
            written[access.address + offset] = byte
    return written
