"""Where ETMv3, PTM and ETMv4 trace comes from, and reading its packets source by source.

An input is a CoreSight snapshot (its snapshot.ini, or the directory holding it) or a bare
buffer with its ETM registers given as options or a device file (see `bare`). Either way
it becomes one `Capture` per trace buffer: the buffer file, its layout, and the sources in it,
each with its registers (an `EtmConfig`, a `ptm.config.PtmConfig` or an
`etmv4.config.Etmv4Config`) and a core number
(`cpu`): the position of its core among a snapshot's cores; in a bare formatted buffer, the
trace ID; in a raw stream, 0. The option `source` (a trace ID) keeps one source.

`PacketReader` streams a capture in chunks: it splits formatted buffers by trace ID and
decodes each source's bytes, yielding packet batches as they complete.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...coresight.frames import Deformatter, FrameStats
from ...coresight.packets import Packets, PacketScanner
from ...coresight.snapshot import SNAPSHOT_INI, Device, Snapshot, read_snapshot
from ...coresight.sniff import is_snapshot_ini, sniff_layout
from ...errors import CputraceError, UsageError
from ...inputs import InputFile, read_exactly
from ..etmv3.config import EtmConfig
from ..etmv3.packets import PacketDecoder
from ..etmv4 import packets as etmv4_packets
from ..etmv4.config import PROTOCOLS as ETMV4_PROTOCOLS
from ..etmv4.config import Etmv4Config
from ..ptm import packets as ptm_packets
from ..ptm.config import PtmConfig
from .bare import bare_buffer_settings
from .options import BARE_BUFFER_OPTIONS, SOURCE, TRACE_IDS

CHUNK_BYTES = 4 << 20
ETMV3_PROTOCOL = "ETM3"
PTM_PROTOCOLS = frozenset({"PTM", "PTM1", "PFT", "PFT1"})
"""Device types of PTMs without their minor version, as snapshots spell them (PTM1.0, PFT1.1...)."""
UNDECODED_PROTOCOLS = frozenset({"ITM", "STM"})
"""Trace sources of software messages, not of instructions: left alone in a snapshot."""

SourceConfig = EtmConfig | PtmConfig | Etmv4Config


def packet_decoder(config: SourceConfig) -> PacketScanner:
    """The packet decoder of a source's protocol."""
    if isinstance(config, PtmConfig):
        return ptm_packets.PacketDecoder(config)
    if isinstance(config, Etmv4Config):
        return etmv4_packets.PacketDecoder(config)
    return PacketDecoder(config)


@dataclass(frozen=True)
class EtmSource:
    """One ETMv3, PTM or ETMv4 trace source: its registers, trace ID (None: an unformatted
    stream) and core."""

    config: SourceConfig
    trace_id: int | None
    cpu: int
    name: str
    core: Device | None = None

    @property
    def label(self) -> str:
        return "-" if self.trace_id is None else f"0x{self.trace_id:02x}"


@dataclass
class Capture:
    """A trace buffer and the ETMv3, PTM and ETMv4 sources to decode from it."""

    path: Path
    layout: str  # coresight, dstream_coresight or source_data
    sources: list[EtmSource]
    any_source: EtmConfig | None = None  # bare formatted buffer: decode every ID found with this
    snapshot: Snapshot | None = None


def is_snapshot(path: str | os.PathLike[str]) -> bool:
    """A snapshot directory, or a file that reads like a snapshot.ini."""
    path = Path(path)
    if path.is_dir():
        return (path / SNAPSHOT_INI).is_file()
    with open(path, "rb") as f:
        return is_snapshot_ini(f.read(4096))


def open_captures(path: str | os.PathLike[str], options: Mapping[str, Any] | None = None) -> list[Capture]:
    """The captures of a snapshot or a bare buffer, narrowed to options["source"] if given."""
    options = options or {}
    if is_snapshot(path):
        given = [option.name for option in BARE_BUFFER_OPTIONS if options.get(option.name) is not None]
        if given:
            dropped = ", ".join(f"option {name}" for name in given)
            raise UsageError(f"{path}: a snapshot gives the ETM registers; {dropped}: bare buffers only")
        return _snapshot_captures(read_snapshot(path), SOURCE.read(options))
    return [_bare_capture(Path(path), options)]


def _snapshot_captures(snapshot: Snapshot, wanted: int | None) -> list[Capture]:
    captures: dict[Path, Capture] = {}
    found = []
    unbuffered: list[str] = []
    for position, device in enumerate(snapshot.sources):
        if device.protocol == ETMV3_PROTOCOL:
            kind: type[SourceConfig] = EtmConfig
        elif device.protocol in PTM_PROTOCOLS:
            kind = PtmConfig
        elif device.protocol in ETMV4_PROTOCOLS:
            kind = Etmv4Config
        elif device.protocol in UNDECODED_PROTOCOLS:
            continue
        else:  # its bytes would be left out in silence, or another source's buffer blamed
            raise CputraceError(
                f"{device.path}: trace source {device.name} of type {device.type}: expected ETM3.x, "
                "PTM1.x or PFT1.x, ETM4.x (decoded) or ITM, STM (not decoded)"
            )
        core = snapshot.core_of(device)
        config = kind.from_device(device, core)
        buffer = snapshot.buffer_of(device)
        if buffer is None:  # a source that traced nothing into this snapshot's buffers
            if wanted is not None and config.trace_id == wanted:
                raise CputraceError(f"{snapshot.path}: no trace buffer is listed for source {device.name}")
            unbuffered.append(device.name)
            continue
        formatted = buffer.format != "source_data"
        if config.trace_id is None and formatted:
            register = "TRCTRACEIDR" if kind is Etmv4Config else "ETMTRACEIDR"
            raise CputraceError(f"{device.path}: no {register} to find its bytes in {buffer.path.name} by")
        if formatted and config.trace_id not in TRACE_IDS:
            register = "TRCTRACEIDR" if kind is Etmv4Config else "ETMTRACEIDR"
            raise CputraceError(
                f"{device.path}: {register} gives trace ID 0x{config.trace_id:02x}, which no source's bytes "
                f"in {buffer.path.name} can have (expected 0x01 to 0x6F)"
            )
        cpu = snapshot.cpu_of(core) if core else len(snapshot.cores) + position
        source = EtmSource(config, config.trace_id if formatted else None, cpu, device.name, core)
        found.append((device, source))
        if wanted is None or config.trace_id == wanted:
            new = Capture(buffer.path, buffer.format, [], None, snapshot)
            captures.setdefault(buffer.path, new).sources.append(source)
    if not found and unbuffered:
        names = ", ".join(unbuffered)
        raise CputraceError(f"{snapshot.path}: no trace buffer is listed for any trace source ({names})")
    if not found:
        kinds = ", ".join(sorted({d.type for d in snapshot.sources})) or "none"
        message = f"no ETMv3, PTM or ETMv4 trace source in this snapshot (sources: {kinds})"
        raise CputraceError(f"{snapshot.path}: {message}")
    if not captures:
        raise CputraceError(f"{snapshot.path}: {_unknown_source(snapshot, wanted, found)}")
    return list(captures.values())


def _unknown_source(snapshot: Snapshot, wanted: int | None, found: list[tuple[Device, EtmSource]]) -> str:
    listed = ", ".join(f"{s.label} ({d.name})" for d, s in found)
    for device in snapshot.sources:
        if device.registers.get("ETMTRACEIDR", device.registers.get("TRCTRACEIDR", -1)) & 0x7F == wanted:
            kind = f"{device.name} ({device.type})"
            return f"source 0x{wanted:02x} is {kind}, not ETMv3, PTM or ETMv4 ({listed})"
    return f"no ETMv3, PTM or ETMv4 source with trace ID 0x{wanted:02x} (they are: {listed})"


def _bare_capture(path: Path, options: Mapping[str, Any]) -> Capture:
    settings = bare_buffer_settings(path, options)
    layout = settings.layout or sniff_layout(InputFile(path).head(64))
    config = settings.config
    if layout == "source_data":
        return Capture(path, layout, [EtmSource(config, None, 0, "-")])
    if config.trace_id is None:
        return Capture(path, layout, [], any_source=config)
    if config.trace_id not in TRACE_IDS:  # only a configuration file's ETMTRACEIDR can give one
        raise CputraceError(
            f"{settings.config_file}: etmtraceidr gives trace ID 0x{config.trace_id:02x}, which no source's "
            f"bytes in {path.name} can have (expected 0x01 to 0x6F)"
        )
    trace_id = config.trace_id
    return Capture(path, layout, [EtmSource(config, trace_id, trace_id, f"0x{trace_id:02x}")])


def _chunks(stream: Any, path: Path, size: int) -> Iterator[tuple[bytes, int]]:
    """Blocks of `size` bytes (the last one shorter) and the offset of each."""
    offset = 0
    while block := read_exactly(stream, size, str(path)):
        yield block, offset
        offset += len(block)


def split_sources(capture: Capture) -> list[Capture]:
    """One capture per source, for listings that go source by source.

    A bare formatted buffer names no sources, so its trace IDs are found by a pass over it."""
    if capture.any_source is None:
        return [dataclasses.replace(capture, sources=[source]) for source in capture.sources]
    deformatter = Deformatter(capture.layout)
    stream = InputFile(capture.path).open(report=False)
    try:
        for block, offset in _chunks(stream, capture.path, CHUNK_BYTES):
            deformatter.feed(block, offset)
    finally:
        stream.close()
    found = sorted(deformatter.stats.bytes_per_id)
    return [
        dataclasses.replace(capture, sources=[_found_source(capture.any_source, i)], any_source=None)
        for i in found
    ]


def _found_source(config: SourceConfig, trace_id: int) -> EtmSource:
    """A source a bare formatted buffer holds, decoded with its registers (`config`); its core
    number is its trace ID."""
    return EtmSource(dataclasses.replace(config, trace_id=trace_id), trace_id, trace_id, f"0x{trace_id:02x}")


def source_packets(
    capture: Capture,
    chunk_bytes: int | None = None,
    on_frames: Callable[[FrameStats], None] | None = None,
) -> Iterator[tuple[EtmSource, Iterator[Packets]]]:
    """Each source of `capture` with its packet batches, the sources one after the other.

    A formatted buffer that fits in one chunk (`chunk_bytes`, default CHUNK_BYTES) is split by
    trace ID once, in memory; a longer one is read once per source (`split_sources`), so that
    memory stays bounded. `on_frames` hears what the formatter frames held, once they are read
    (a formatted buffer's)."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    whole = None if capture.layout == "source_data" else _whole_buffer(capture.path, chunk_bytes)
    if whole is None:
        for single in split_sources(capture):
            reader = PacketReader(single, chunk_bytes)
            yield single.sources[0], (batch for _, batch in reader)
            if on_frames is not None and reader.frame_stats is not None:
                on_frames(reader.frame_stats)  # every source's reader reads the same frames
                on_frames = None
        return
    deformatter = Deformatter(capture.layout)
    streams = deformatter.feed(whole, 0, final=True)
    if on_frames is not None:
        on_frames(deformatter.stats)
    if capture.any_source is None:
        sources = capture.sources
    else:
        sources = [_found_source(capture.any_source, i) for i in sorted(streams)]
    for source in sources:
        if source.trace_id in streams:
            stream = streams[source.trace_id]
            yield source, packet_decoder(source.config).feed(stream.data, stream.offsets, final=True)


def _whole_buffer(path: Path, chunk_bytes: int) -> bytes | None:
    """The buffer's content when it is at most `chunk_bytes` long; None otherwise."""
    stream = InputFile(path).open()
    try:
        content = read_exactly(stream, chunk_bytes + 1, str(path))
    finally:
        stream.close()
    return content if len(content) <= chunk_bytes else None


@dataclass
class PacketReader:
    """Reads a capture's buffer in chunks and yields (source, packets) as batches complete.

    A formatted buffer's sources come interleaved, chunk by chunk; a capture of one source
    (`split_sources`) has that source's bytes alone taken from the frames. `frame_stats`
    describes the formatter frames once the buffer has been read.
    """

    capture: Capture
    chunk_bytes: int = CHUNK_BYTES
    on_read: Callable[[int], None] | None = None
    frame_stats: FrameStats | None = None
    discovered: list[EtmSource] = field(default_factory=list)  # bare buffers: sources found

    def __iter__(self) -> Iterator[tuple[EtmSource, Packets]]:
        capture = self.capture
        source_file = InputFile(capture.path, on_read=self.on_read)
        stream = source_file.open()
        try:
            if capture.layout == "source_data":
                yield from self._single(stream, capture.sources[0])
            else:
                yield from self._formatted(stream)
        finally:
            stream.close()

    def _single(self, stream: Any, source: EtmSource) -> Iterator[tuple[EtmSource, Packets]]:
        decoder = packet_decoder(source.config)
        for block, offset in _chunks(stream, self.capture.path, self.chunk_bytes):
            data = np.frombuffer(block, dtype=np.uint8)
            for batch in decoder.feed(data, np.arange(offset, offset + len(data), dtype=np.int64)):
                yield source, batch
        for batch in decoder.finish():
            yield source, batch

    def _formatted(self, stream: Any) -> Iterator[tuple[EtmSource, Packets]]:
        capture = self.capture
        single = len(capture.sources) == 1 and capture.any_source is None
        deformatter = Deformatter(capture.layout, only=capture.sources[0].trace_id if single else None)
        decoders = {s.trace_id: (s, packet_decoder(s.config)) for s in capture.sources}
        end = 0
        for block, offset in _chunks(stream, self.capture.path, self.chunk_bytes):
            yield from self._decode(deformatter.feed(block, offset), decoders)
            end = offset + len(block)
        yield from self._decode(deformatter.feed(b"", end, final=True), decoders)
        self.frame_stats = deformatter.stats
        for source, decoder in decoders.values():
            for batch in decoder.finish():
                yield source, batch

    def _decode(
        self, streams: dict[int, Any], decoders: dict[int | None, tuple[EtmSource, Any]]
    ) -> Iterator[tuple[EtmSource, Packets]]:
        for trace_id, data in streams.items():
            if trace_id not in decoders:
                if self.capture.any_source is None:
                    continue
                source = _found_source(self.capture.any_source, trace_id)
                self.discovered.append(source)
                decoders[trace_id] = (source, packet_decoder(source.config))
            source, decoder = decoders[trace_id]
            for batch in decoder.feed(data.data, data.offsets):
                yield source, batch
