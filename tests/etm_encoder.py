"""A small ETMv3 trace encoder for tests, written from the architecture's packet formats.

`EtmEncoder` appends packets to a byte stream and does its own address, timestamp and
data-address compression (only the low-order bytes that changed are sent), so tests know
exactly what a stream holds. `format_frames` packs several sources' streams into CoreSight
formatter frames, `port_capture` turns frames into a trace port capture with frame syncs.
`encode_run` turns a recorded run (the instructions of a full Tarmac trace) into the packets
an ETM would emit for it, with the choices a test wants (cycle counts, timestamps, trace
off, overflow, exception cancel bits), and returns the instructions a decoder should give.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from cputrace.isa import BlockCache
from cputrace.model import Isa

ISA_SHIFT = {"A32": 2, "T32": 1, "T32EE": 1, "Jazelle": 0}
FULL_SYNC = b"\xff\xff\xff\x7f"
HALF_SYNC = b"\xff\x7f"


def _continued(value: int, sizes: list[int]) -> bytes:
    """`value` in bytes of len(sizes), sizes[i] bits in byte i, bit 7 set on all but the last."""
    out = bytearray()
    for i, bits in enumerate(sizes):
        byte = value & ((1 << bits) - 1)
        value >>= bits
        out.append(byte | (0x80 if i < len(sizes) - 1 else 0))
    return bytes(out)


@dataclass
class EtmEncoder:
    """Builds an ETMv3 byte stream packet by packet."""

    cycle_accurate: bool = False
    context_id_bytes: int = 0
    alt_branch: bool = False
    timestamp_64: bool = False
    data_address: bool = False
    data_value: bool = False
    data_only: bool = False
    out: bytearray = field(default_factory=bytearray)
    address: int = 0
    isa: str = "A32"
    alt_isa: bool = False
    timestamp_sent: int = 0
    data_address_sent: int = 0
    big_endian: bool = False

    @property
    def data(self) -> bytes:
        return bytes(self.out)

    def raw(self, data: bytes) -> EtmEncoder:
        self.out += data
        return self

    def a_sync(self) -> EtmEncoder:
        return self.raw(b"\x00" * 5 + b"\x80")

    def _cycles(self, count: int) -> bytes:
        sizes = [7, 7, 7, 7, 4]
        n = 1
        while n < 5 and count >> sum(sizes[:n]):
            n += 1
        return _continued(count, sizes[:n])

    def cycle_count(self, count: int) -> EtmEncoder:
        return self.raw(b"\x04" + self._cycles(count))

    def i_sync(
        self, address: int, isa: str = "A32", reason: int = 0, *, ns: bool = False, alt_isa: bool = False,
        hyp: bool = False, cycles: int | None = None, context_id: int = 0, lsip: int | None = None,
    ) -> EtmEncoder:  # fmt: skip
        out = bytearray([0x08 if cycles is None else 0x70])
        if cycles is not None:
            out += self._cycles(cycles)
        out += context_id.to_bytes(4, "little")[: self.context_id_bytes]
        info = (reason << 5) | (0x10 if isa == "Jazelle" else 0) | (ns << 3) | (alt_isa << 2) | (hyp << 1)
        out.append(info | (0x80 if lsip is not None else 0))
        if not self.data_only:
            word = address if isa == "Jazelle" else (address & ~1) | (isa in ("T32", "T32EE"))
            out += word.to_bytes(4, "little")
            self.address, self.isa, self.alt_isa = address, isa, alt_isa
        self.out += out
        if lsip is not None:
            self.out += self._address(lsip, isa, exception=None)
            self.address = address  # the I-sync address stays the base of later compression
        return self

    def _address(self, address: int, isa: str, exception: bytes | None, full: bool = False) -> bytes:
        """Address bytes (compressed against the last address unless the ISA changes or `full`)."""
        shift = ISA_SHIFT[isa]
        value = address >> shift
        changed = (value ^ (self.address >> ISA_SHIFT[self.isa])).bit_length()
        last_bits = 6 if self.alt_branch else 7
        capacities = [6] + [6 + 7 * (n - 1) + last_bits for n in range(1, 4)]  # 1-4 bytes
        n = next((i + 1 for i, c in enumerate(capacities) if changed <= c), 5)
        if exception is not None:  # byte 1 has no room for the flag; the original encoding needs all five
            n = max(n, 2) if self.alt_branch else 5
        if full or shift != ISA_SHIFT[self.isa]:
            n = 5
        self.address, self.isa = address, isa
        if n == 5:
            top = {"A32": (3, 0x08), "T32": (4, 0x10), "T32EE": (4, 0x10), "Jazelle": (5, 0x20)}[isa]
            out = bytearray(_continued(value << 1 | 1, [7, 7, 7, 7, 8]))
            out[4] = ((value >> 27) & ((1 << top[0]) - 1)) | top[1] | (0x40 if exception else 0)
            return bytes(out) + (exception or b"")
        sizes = [7] + [7] * (n - 2) + ([last_bits] if n > 1 else [])
        out = bytearray(_continued(value << 1 | 1, sizes))
        if exception is not None:
            out[-1] |= 0x40
        return bytes(out) + (exception or b"")

    def branch(
        self, address: int, isa: str | None = None, *, exception: int | None = None, cancel: bool = False,
        ns: bool = False, hyp: bool | None = None, resume: int | None = None, full: bool = False,
    ) -> EtmEncoder:  # fmt: skip
        """A branch address packet; exception bytes when `exception` is not None, or when the
        target switches between Thumb and ThumbEE (the AltISA bit travels in them)."""
        isa = isa or self.isa
        alt_isa = isa == "T32EE" if isa in ("T32", "T32EE") else self.alt_isa
        if exception is None and alt_isa != self.alt_isa:
            exception = 0
        info = None
        if exception is not None:
            more = hyp is not None or resume is not None or exception > 0xF
            info = bytearray([(more << 7) | (alt_isa << 6) | (cancel << 5) | ((exception & 0xF) << 1) | ns])
            if hyp is not None or exception > 0xF:
                info.append(((resume is not None) << 7) | (bool(hyp) << 5) | ((exception >> 4) & 0x1F))
            if resume is not None:
                info.append(0x40 | resume)
            self.alt_isa = alt_isa
        return self.raw(self._address(address, isa, bytes(info) if info else None, full))

    def deprecated_exception(self, address: int, code: int, cancel: bool = False) -> EtmEncoder:
        """The deprecated 5-byte form: ARM state, exception code in byte 5 bits 5:3."""
        value = address >> 2
        out = bytearray(_continued(value << 1 | 1, [7, 7, 7, 7, 8]))
        out[4] = 0x80 | (cancel << 6) | (code << 3) | ((value >> 27) & 7)
        self.address, self.isa = address, "A32"
        return self.raw(bytes(out))

    def atoms(self, pattern: str) -> EtmEncoder:
        """Non-cycle-accurate format-1 P-headers for a string of E and N atoms."""
        while pattern:
            e = len(pattern) - len(pattern.lstrip("E"))
            e = min(e, 15)
            n = pattern[e : e + 1] == "N"
            self.out.append(0x80 | (n << 6) | (e << 2))
            pattern = pattern[e + n :]
        return self

    def atoms_format2(self, first: str, second: str) -> EtmEncoder:
        return self.raw(bytes([0x82 | ((first == "N") << 3) | ((second == "N") << 2)]))

    def ca_format1(self, e: int, n: bool) -> EtmEncoder:
        """Cycle-accurate: e E atoms then an N if `n`, each with one cycle."""
        return self.raw(bytes([0x80 | (n << 6) | (e << 2)]))

    def ca_format2(self, first: str, second: str) -> EtmEncoder:
        """Cycle-accurate: one cycle, then two atoms."""
        return self.raw(bytes([0x82 | ((first == "N") << 3) | ((second == "N") << 2)]))

    def ca_format3(self, waits: int, e: bool) -> EtmEncoder:
        """Cycle-accurate: `waits` (1-8) cycles, then an E atom if `e`."""
        return self.raw(bytes([0xA0 | (e << 6) | ((waits - 1) << 2)]))

    def ca_format4(self, atom: str) -> EtmEncoder:
        """Cycle-accurate: one atom, no cycle."""
        return self.raw(bytes([0x92 | ((atom == "N") << 2)]))

    def timestamp(self, value: int, clock_changed: bool = False) -> EtmEncoder:
        last = 8 if self.timestamp_64 else 6
        sizes = [7] * last + [8 if self.timestamp_64 else 6]
        changed = (value ^ self.timestamp_sent).bit_length()
        n = next((i + 1 for i in range(len(sizes)) if changed <= sum(sizes[: i + 1])), len(sizes))
        out = bytearray(_continued(value, sizes[:n]))
        if n == len(sizes):
            out[-1] = (value >> (7 * last)) & ((1 << sizes[-1]) - 1)
        self.timestamp_sent = value
        return self.raw(bytes([0x46 if clock_changed else 0x42]) + bytes(out))

    def context_id(self, value: int) -> EtmEncoder:
        return self.raw(b"\x6e" + value.to_bytes(4, "little")[: self.context_id_bytes])

    def vmid(self, value: int) -> EtmEncoder:
        return self.raw(bytes([0x3C, value]))

    def trigger(self) -> EtmEncoder:
        return self.raw(b"\x0c")

    def ignore(self) -> EtmEncoder:
        return self.raw(b"\x66")

    def exception_exit(self) -> EtmEncoder:
        return self.raw(b"\x76")

    def exception_entry(self) -> EtmEncoder:
        return self.raw(b"\x7e")

    def store_failed(self) -> EtmEncoder:
        return self.raw(b"\x50")

    def data_suppressed(self) -> EtmEncoder:
        return self.raw(b"\x62")

    def _data_address(self, address: int, big_endian: bool | None) -> bytes:
        sizes = [7, 7, 7, 7, 4]
        changed = (address ^ self.data_address_sent).bit_length()
        n = next((i + 1 for i in range(5) if changed <= sum(sizes[: i + 1])), 5)
        if big_endian is not None and big_endian != self.big_endian:
            n = 5
        out = bytearray(_continued(address, sizes[:n]))
        if n == 5:
            self.big_endian = bool(big_endian) if big_endian is not None else self.big_endian
            out[4] = ((address >> 28) & 0xF) | (self.big_endian << 4)
        self.data_address_sent = address
        return bytes(out)

    @staticmethod
    def _value(value: int, size: int) -> tuple[int, bytes]:
        code = {0: 0, 1: 1, 2: 2, 4: 3}[size]
        return code, value.to_bytes(4, "little")[:size]

    def normal_data(
        self, value: int = 0, size: int = 4, address: int | None = None, big_endian: bool | None = None
    ) -> EtmEncoder:
        code, data = self._value(value, size)
        has_address = address is not None
        head = bytes([0x02 | (has_address << 5) | (code << 2)])
        return self.raw(head + (self._data_address(address, big_endian) if has_address else b"") + data)

    def ooo_data(self, tag: int, value: int = 0, size: int = 4) -> EtmEncoder:
        code, data = self._value(value, size)
        return self.raw(bytes([(tag << 5) | (code << 2)]) + data)

    def ooo_placeholder(self, tag: int, address: int | None = None) -> EtmEncoder:
        head = bytes([0x50 | ((address is not None) << 5) | (tag << 2)])
        return self.raw(head + (self._data_address(address, None) if address is not None else b""))

    def value_not_traced(self, address: int | None = None) -> EtmEncoder:
        head = bytes([0x6A | ((address is not None) << 4)])
        return self.raw(head + (self._data_address(address, None) if address is not None else b""))


def format_frames(chunks: list[tuple[int, bytes]]) -> bytes:
    """CoreSight formatter frames carrying `chunks` (trace ID, bytes) in order.

    An ID change that would fall on an odd byte goes on the even byte before it instead, and
    that byte's data moves after the ID with its flag bit set (it still belongs to the old
    ID), as the formatter does. The last frame is padded with the null ID.
    """
    frames = bytearray()
    frame: list[tuple[str, int, bool]] = []  # ("id", id, data after it is the old ID's) / ("data", byte, _)

    def change(trace_id: int) -> None:
        if len(frame) % 2:
            moved = frame.pop()
            frame.extend([("id", trace_id, True), moved])
        else:
            frame.append(("id", trace_id, False))

    def emit() -> None:
        out = bytearray(16)
        for position, (what, value, delayed) in enumerate(frame):
            if what == "id":
                out[position] = (value << 1) | 1
                out[15] |= delayed << (position // 2)
            elif position % 2 == 0:
                out[position] = value & 0xFE
                out[15] |= (value & 1) << (position // 2)
            else:
                out[position] = value
        frames.extend(out)
        frame.clear()

    current = None
    for trace_id, data in chunks:
        for byte in data:
            if trace_id != current:
                change(trace_id)
                current = trace_id
                if len(frame) == 15:  # the ID took the last even byte: its data starts the next frame
                    emit()
            frame.append(("data", byte, False))
            if len(frame) == 15:
                emit()
    if frame:
        change(0)
        frame.extend([("data", 0, False)] * (15 - len(frame)))
        emit()
    return bytes(frames)


def port_capture(frames: bytes, rng: random.Random, garbage: bytes = b"\x12\x34\x56") -> bytes:
    """A trace port capture of `frames`: junk, then full syncs between frames and half syncs
    at random even positions inside them."""
    out = bytearray(garbage + FULL_SYNC)
    for start in range(0, len(frames), 16):
        for pair in range(0, 16, 2):
            while rng.random() < 0.1:
                out += HALF_SYNC
            out += frames[start + pair : start + pair + 2]
        while rng.random() < 0.3:
            out += FULL_SYNC
    return bytes(out)


@dataclass(frozen=True)
class Step:
    """One recorded instruction: where it ran and what became of it."""

    pc: int
    isa: str  # A32, T32
    executed: bool
    exception: int | None = None  # ETM exception number taken after it
    cancels: bool = False  # the exception cancels it (undefined instruction, prefetch abort)


@dataclass(frozen=True)
class Transfer:
    """One recorded data transfer of an instruction."""

    op: str  # R, W
    addr: int
    size: int
    value: int


@dataclass
class Expected:
    """What a decoder should give for an encoded run: rows of (pc, isa, executed, cancelled,
    cycles, time), event kinds in order, and memory rows (seq, op, addr, size, value; None
    for what the trace did not carry)."""

    rows: list[tuple[int, str, bool, bool, int | None, int | None]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    memory: list[tuple[int, str, int | None, int, int | None]] = field(default_factory=list)


TRACED, NOT_TRACED, FILTERED = "traced", "not traced", "filtered"
"""What the data filter does with a transfer: traced, a value-not-traced packet, no packet."""


def encode_data(
    enc: EtmEncoder, seq: int, transfers: list[Transfer], choice: Callable[[int], str], expected: Expected
) -> None:
    """The data packets of one instruction's transfers, in address order as the core makes
    them. Transfers before the first one `choice` traces make no packet (a partially traced
    LSM); after it every transfer has one, a value-not-traced packet when `choice` says so.
    The address goes with the first packet and with any not sequential to the one before."""
    previous: int | None = None
    for k, t in enumerate(sorted(transfers, key=lambda t: t.addr)):
        how = choice(k)
        if previous is None and how != TRACED:
            continue
        address = t.addr if enc.data_address and (previous is None or t.addr != previous + 4) else None
        if how == TRACED:
            value = t.value if enc.data_value else 0
            size = 0 if not value else 1 if value < 0x100 else 2 if value < 0x10000 else 4
            enc.normal_data(value, size, address)
        else:
            enc.value_not_traced(address)
        previous = t.addr
        expected.memory.append((
            seq, t.op, t.addr if enc.data_address else None, t.size,
            t.value if how == TRACED and enc.data_value else None,
        ))  # fmt: skip


def encode_run(
    enc: EtmEncoder, steps: list[Step], blocks: BlockCache, *, rng: random.Random | None = None,
    off: Callable[[int], tuple[int, ...] | None] = lambda i: None, timestamp_every: int = 0,
    memory: dict[int, list[Transfer]] | None = None, data: Callable[[int, int], str] = lambda i, k: TRACED,
) -> Expected:  # fmt: skip
    """Encode `steps` into `enc` as an ETM would: an I-sync, atoms, a branch address after
    each taken branch whose target the image does not give, an exception branch address
    after each exception. In cycle-accurate mode each atom gets random wait cycles, spread
    over P-header formats 1, 3 and 4 by `rng`. `off(i)` may return (resume index, I-sync
    reason[, LSiP]): the trace stops after step i and resumes with an I-sync at that step
    (reason 2: overflow); with LSiP true, the I-sync gives the load/store before that step
    as in progress, and the step as where the trace goes on. `timestamp_every` n sends a
    timestamp before every n-th step. `memory` gives the transfers of steps by index: each
    executed step's are sent as data packets after the P-header with its atom, traced or not
    as `data(i, k)` says for transfer k (see `encode_data`)."""
    expected = Expected()
    pending = ""  # non-cycle-accurate atoms not yet in a P-header
    time: int | None = None

    def flush() -> None:
        nonlocal pending
        enc.atoms(pending)
        pending = ""

    def sync(i: int, reason: int, lsip: bool = False) -> None:
        flush()
        cycles = 100 if enc.cycle_accurate else None
        if lsip:
            in_progress = steps[i - 1]
            enc.i_sync(in_progress.pc, in_progress.isa, reason, cycles=cycles, lsip=steps[i].pc)
            expected.rows.append((in_progress.pc, in_progress.isa, True, False, None, time))
        else:
            enc.i_sync(steps[i].pc, steps[i].isa, reason, cycles=cycles)
        expected.events.append("trace_on")
        if reason == 2:
            expected.events.append("overflow")

    sync(0, 1)
    i = 0
    while i < len(steps):
        step = steps[i]
        if timestamp_every and i % timestamp_every == 0:
            flush()
            time = 1000 + 7 * i
            enc.timestamp(time)
            expected.events.append("timestamp")
        cycles = _encode_atom(enc, step.executed, rng) if enc.cycle_accurate else None
        if not enc.cycle_accurate:
            pending += "E" if step.executed else "N"
        expected.rows.append(
            (step.pc, step.isa, step.executed and not step.cancels, step.cancels, cycles, time)
        )
        if memory and step.executed and not step.cancels and i in memory:
            flush()
            encode_data(enc, len(expected.rows) - 1, memory[i], partial(data, i), expected)
        following = steps[i + 1] if i + 1 < len(steps) else None
        if following is not None:
            info = blocks.insn_at(step.pc, Isa[step.isa])
            to = (following.pc, following.isa)
            if step.exception is not None:
                flush()
                enc.branch(following.pc, following.isa, exception=step.exception, cancel=step.cancels)
                expected.events.append("exception")
            elif (
                step.executed
                and info.is_branch
                and not (
                    info.is_direct and info.next_isa is not None and (info.target, info.next_isa.name) == to
                )
            ):
                flush()
                enc.branch(following.pc, following.isa)
        resume = off(i)
        if resume is not None:
            i = resume[0]
            sync(i, *resume[1:])
            continue
        i += 1
    flush()
    return expected


def _encode_atom(enc: EtmEncoder, executed: bool, rng: random.Random | None) -> int:
    """One atom in cycle-accurate mode, with some W cycles before it; returns its cycles."""
    rng = rng or random.Random(0)
    atom = "E" if executed else "N"
    waits = rng.choice([0, 0, 1, 3, 8, 11])
    cycles = 0
    while waits - cycles > 8:
        enc.ca_format3(8, False)
        cycles += 8
    if waits > cycles:
        if executed and rng.random() < 0.5:
            enc.ca_format3(waits - cycles, True)  # the E atom takes the header's cycles
            return waits
        enc.ca_format3(waits - cycles, False)
        cycles = waits
    if rng.random() < 0.7:
        enc.ca_format1(int(executed), not executed)
        return cycles + 1
    enc.ca_format4(atom)
    return cycles
