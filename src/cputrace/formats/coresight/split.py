"""A raw ETMv3 or PTM stream split into byte ranges decoded side by side (batch/partition.py
runs them), with the names formats/tarmac/split.py gives each step.

Which inputs: a bare buffer of one ETMv3 or PTM source's raw stream (`buffer_format`
`source_data`, as sniffed or given). A snapshot, a buffer in formatter frames (several
sources interleaved in 16-byte frames) and an ETMv4 stream are decoded whole (`whole`).

Where: at A-syncs (five 0x00 then 0x80, in both protocols), the decoders' own
synchronisation points: each range starts at the first A-sync at or after its nominal offset
(`split_points`). The rows of a range are those that decoding the packets from the A-sync
packet at or after its start (its cut) up to the one at or after the next range's start
gives: the range before decodes on past its end to that packet, so no instruction is lost or
doubled.

What crosses a cut is a `Carry`: where the cut is (`at`, the A-sync packet's offset) and the
whole decoding state there (`state`): the packet decoder's (`PacketScanner.carried`: its SCAN
record and the bytes of a packet not yet complete) and the walk's (`SourceWalk.carried`: the
walk, op builder and data matcher records, the row held back, the last context ID and VMID;
a PTM's walk is the same class with an op builder of its own), seqs relative to the next
instruction's. Each range's start state is found by decoding again, rows dropped, from the
`WARM_SYNCS`-th A-sync before its start (`warm_start`), the way a decoder meets a stream that
started earlier; its packet errors are the range before's. The range then goes on from that
state (resumed, as it would be from any carry), and its end state is compared whole with the
next range's start (`Carry.joins`): a range whose warm-up came out otherwise (a value the
warm-up never saw, an A-sync taken from a zero run that the stream did not mean as one) is
decoded again from the end of the range before.

Numbering: how many instructions a range walks is known only once walked, so each range
numbers its rows from its start carry's `seq_base` (0 unless decoded again from the range
before), and batch/partition.py shifts each part's seqs to run on from the part before
(`NUMBERED_AFTER`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, BinaryIO

import numpy as np

from ...coresight.packets import K_A_SYNC, Packets, PacketScanner
from ...errors import CputraceError
from ...flow.program import Program
from ...inputs import InputFile
from ..base import Batch, DecodeContext
from ..etmv4.config import Etmv4Config
from ..splitrange import SplitRange, moved_starts
from .capture import CHUNK_BYTES, EtmSource, is_snapshot, open_captures, packet_decoder
from .decoder import PROTOCOLS, Unsynced, packet_error, source_program
from .source_walk import SourceWalk

__all__ = [
    "NUMBERED_AFTER", "Carry", "RangeDecode", "RangeFacts", "finish", "first_carries",
    "split_points", "whole",
]  # fmt: skip
"""The steps of a split, by the names every format's split module gives them (batch/partition.py)."""

NUMBERED_AFTER = True
"""Each range is numbered from its start carry's `seq_base`; the parts are shifted after."""

A_SYNC = re.compile(rb"\x00{5}\x80")
"""An A-sync's bytes (a longer zero run ends with the same)."""
WARM_SYNCS = 4
"""A-syncs before a range's start that its warm-up decodes from (fewer: from the input's start)."""
LOOK_BYTES = 64 << 10
"""How far to look for A-syncs from a split, at first (doubled up to `MAX_LOOK_BYTES`)."""
MAX_LOOK_BYTES = 64 << 20


def whole(source: InputFile, options: dict[str, Any], _images: Any) -> str | None:
    """Why the input is decoded whole (None: it splits): only one ETMv3 or PTM source's raw
    stream splits."""
    if is_snapshot(source.path):
        return "a snapshot's buffers are decoded whole"
    [capture] = open_captures(source.path, options)
    if capture.layout != "source_data":
        return f"a buffer in {capture.layout} frames is decoded whole; a raw stream (source_data) splits"
    if isinstance(capture.sources[0].config, Etmv4Config):
        return "an ETMv4 stream is decoded whole"
    return None


def split_points(source: InputFile, nominal: list[int]) -> list[int]:
    """Where the ranges start, 0 first: each offset of `nominal` (increasing) moved on to the
    first A-sync at or after it; offsets with none after them before the next are dropped."""
    return moved_starts(source, nominal, _a_sync_at)


def _a_sync_at(file: BinaryIO, offset: int, size: int) -> int | None:
    """The offset of the first A-sync at or after `offset` (None: none near)."""
    look = LOOK_BYTES
    while True:
        file.seek(offset)
        found = A_SYNC.search(file.read(look))
        if found is not None:
            return offset + found.start()
        if look >= MAX_LOOK_BYTES or offset + look >= size:
            return None
        look *= 2


def warm_start(file: BinaryIO, at: int) -> int:
    """Where a range starting at `at` is warmed up from: the `WARM_SYNCS`-th A-sync before it
    (0 when there are fewer; as far as `MAX_LOOK_BYTES` before it when none is nearer)."""
    look = LOOK_BYTES
    while True:
        first = max(at - look, 0)
        file.seek(first)
        found = [match.start() for match in A_SYNC.finditer(file.read(at - first))]
        if len(found) >= WARM_SYNCS:
            return first + found[-WARM_SYNCS]
        if first == 0 or look >= MAX_LOOK_BYTES:
            return first
        look *= 2


@dataclass
class Carry:
    """The decoding state at a cut: the A-sync packet's offset (`at`; None: the input ended
    before one, everything decoded) and the whole state there (None with `at` not None: not
    known yet, found by warming up); `seq_base` the next instruction's seq in the numbering
    of the range it came from."""

    seq_base: int = 0
    at: int | None = 0
    state: dict[str, Any] | None = None

    def joins(self, start: Carry, facts: RangeFacts) -> bool:
        """Whether the range decoded from `start` (or from its warm-up, when `start` was not
        known) went on from this carry: at the same cut, in the same state, whole."""
        given = start if start.state is not None or start.at is None else facts.warmed
        return (
            given is not None and self.at == given.at and (self.state is None) == (given.state is None)
            and (self.state is None or _same(self.state, given.state))
        )  # fmt: skip


def _same(a: Any, b: Any) -> bool:
    """Whether two carried states (dicts of arrays, nested) are equal, array by array and field
    by field."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[name], b[name]) for name in a)
    if not isinstance(b, np.ndarray) or a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.names is None:
        return np.array_equal(a, b)
    return all(np.array_equal(a[name], b[name]) for name in a.dtype.names)


@dataclass
class RangeFacts:
    """What a range's decoding found beyond its rows: the state its warm-up reached at its cut."""

    warmed: Carry | None = None


def first_carries(counts: list[None]) -> list[Carry]:
    """Each range's carry to start from: not known yet, each but the first's found by warming
    up (step 2 of the module docstring)."""
    return [Carry() for _ in counts]


@dataclass(eq=False)
class RangeDecode(SplitRange[Carry, RangeFacts]):
    """A byte range of a raw stream decoded from a carry (splitrange.SplitRange): `end` is the
    carry at the cut after it. The last range (`final`) decodes to the input's end."""

    facts: RangeFacts = field(default_factory=RangeFacts, init=False)
    end: Carry = field(default_factory=Carry, init=False)

    def batches(self) -> Iterator[Batch]:
        first, stop = self.byte_range
        [capture] = open_captures(self.source.path, self.ctx.options)
        etm = capture.sources[0]
        program = source_program({}, capture, etm, self.ctx)
        report = partial(packet_error, capture.path, etm, self.ctx)
        with open(self.source.path, "rb") as file:
            stream = _Stream(file, self.source.size, etm, program, report)
            if first > 0:
                warm = _Stream(file, self.source.size, etm, program, None, warm_start(file, first))
                for _ in (at := _Advance(warm, first)):
                    pass
                self.facts.warmed = Carry(0, at.cut, None if at.cut is None else warm.carried())
                start = self.start if self.start.state is not None else self.facts.warmed
                if start.at is None or start.state is None:  # the input ended before the range's A-sync
                    self.end = Carry(start.seq_base, None, None)
                    return
                stream.resume(start.at, start.state, start.seq_base)
            if self.final:
                yield from stream.to_end()
                if first == 0:  # the only range: the stream had no A-sync to split at
                    stream.unsynced.report(capture.path, etm, self.ctx)
                return
            yield from (at := _Advance(stream, stop))
            self.end = Carry(stream.walk.next_seq, at.cut, None if at.cut is None else stream.carried())


class _Stream:
    """One source's bytes from an offset on, decoded into packets and walked."""

    def __init__(
        self, file: BinaryIO, size: int, etm: EtmSource, program: Program,
        on_error: Callable[[Packets, int], None] | None, position: int = 0,
    ) -> None:  # fmt: skip
        self.file = file
        self.size = size
        self.decoder: PacketScanner = packet_decoder(etm.config)
        walk: type[SourceWalk] = PROTOCOLS[type(etm.config)][0]
        self.walk = walk(etm, program, 0, on_error)
        self.position = position  # of the next byte to decode
        self.unsynced = Unsynced()

    def carried(self) -> dict[str, Any]:
        """The whole decoding state, free of numbering (see the module docstring)."""
        return {"packets": self.decoder.carried(), "walk": self.walk.carried()}

    def resume(self, at: int, state: dict[str, Any], seq_base: int) -> None:
        """Go on from a carried `state` at the cut `at`, numbering from `seq_base`."""
        self.decoder.resume(state["packets"])
        self.walk.resume(state["walk"], seq_base)
        self.position = at

    def feed(self, stop: int) -> Iterator[Batch]:
        """The rows of the bytes up to `stop`."""
        for data, offsets in _chunks(self.file, self.position, stop):
            self.position += len(data)
            for packets in self.decoder.feed(data, offsets):
                self.unsynced.see(packets)
                yield from self.walk.batch(packets)

    def to_end(self) -> Iterator[Batch]:
        """The rows of the bytes to the input's end, and those the walk held back."""
        yield from self.feed(self.size)
        for packets in self.decoder.finish():
            self.unsynced.see(packets)
            yield from self.walk.batch(packets)
        yield from self.walk.finish()

    def next_a_sync(self, at: int) -> int | None:
        """The offset of the first A-sync packet at or after `at` that the packets decoded
        from here on give (None: none before the input's end), found by a copy of the decoder."""
        scout = self.decoder.copy()
        for data, offsets in _chunks(self.file, self.position, self.size):
            for packets in scout.feed(data, offsets):
                hits = np.flatnonzero((packets["kind"] == K_A_SYNC) & (packets["offset"] >= at))
                if len(hits):
                    return int(packets["offset"][hits[0]])
        return None


def _chunks(file: BinaryIO, start: int, stop: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The bytes from `start` up to `stop`, in chunks, with their offsets."""
    while start < stop:
        file.seek(start)
        data = np.frombuffer(file.read(min(CHUNK_BYTES, stop - start)), np.uint8)
        if not len(data):
            raise CputraceError(f"{file.name}: the input ended at byte {start}: was it cut short while read?")
        yield data, np.arange(start, start + len(data), dtype=np.int64)
        start += len(data)


class _Advance:
    """Iterating gives the rows of a stream up to its first A-sync packet at or after `at`
    (`cut`), or to the input's end when it has none (`cut` None)."""

    def __init__(self, stream: _Stream, at: int) -> None:
        self.stream = stream
        self.at = at
        self.cut: int | None = None

    def __iter__(self) -> Iterator[Batch]:
        stream = self.stream
        yield from stream.feed(max(self.at, stream.position))
        self.cut = stream.next_a_sync(self.at)
        if self.cut is None:
            yield from stream.to_end()
        else:
            yield from stream.feed(self.cut)
            yield from stream.walk.held()


def finish(_facts: list[RangeFacts], _ends: list[Carry], _path: str, _ctx: DecodeContext) -> None:
    """Nothing beyond the ranges' rows: a raw stream has no notes of its own."""
