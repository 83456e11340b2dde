"""The `coresight` input format (`etmv3` names it too): CoreSight snapshots (their ETMv3, PTM and
ETMv4 sources) and trace buffers.

Sniffing knows a snapshot.ini, a trace port capture (frame syncs) and a raw ETMv3 stream that
starts with an A-sync; memory buffers (ETB, ETR) need `--format coresight`.
Packets become instructions by walking the program image (`source_walk`): a snapshot's
core memory dumps, or the images given with `--image` (which then replace the dumps).
A reserved or malformed packet fails a `--strict` decode (naming the buffer file, the offset
and what was expected); otherwise it is a warning and a `trace_gap` event, and the decode
resynchronises at the next A-sync.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import ClassVar

from ...coresight.dumps import DumpEntry
from ...coresight.frames import FrameStats
from ...coresight.packets import K_UNSYNCED, Packets
from ...errors import CputraceError
from ...flow.program import Program
from ...image import Image
from ...inputs import InputFile
from ..base import Batch, DecodeContext
from ..etmv3.config import EtmConfig
from ..etmv3.instructions import Etmv3SourceWalk
from ..etmv3.protocol import EXPECTED
from ..etmv4.config import Etmv4Config
from ..etmv4.instructions import Etmv4SourceWalk
from ..etmv4.protocol import EXPECTED as ETMV4_EXPECTED
from ..ptm.config import PtmConfig
from ..ptm.instructions import PtmSourceWalk
from ..ptm.protocol import EXPECTED as PTM_EXPECTED
from .capture import Capture, EtmSource, open_captures, source_packets
from .source_walk import SourceWalk

RAW_SHOWN = 16  # bytes of a bad packet an error message shows
PROTOCOLS: dict[type, tuple[type[SourceWalk], dict[int, str]]] = {
    EtmConfig: (Etmv3SourceWalk, EXPECTED),
    PtmConfig: (PtmSourceWalk, PTM_EXPECTED),
    Etmv4Config: (Etmv4SourceWalk, ETMV4_EXPECTED),
}
"""Each protocol's walk and what its packet errors expected (by ErrorReason), by the class of
its sources' registers."""


class CoresightDecoder:
    name: ClassVar[str] = "coresight"

    def decode(self, source: InputFile, ctx: DecodeContext) -> Iterator[Batch]:
        yield from decode_captures(open_captures(source.path, ctx.options), ctx)


def decode_captures(
    captures: list[Capture], ctx: DecodeContext, programs: dict[object, Program] | None = None
) -> Iterator[Batch]:
    """Instructions, events and memory of every source of `captures`, in one seq order: the
    sources one after the other (`source_packets`), seq numbering on.

    `programs` holds the decoded program images by core; pass the same dict to decode more
    captures of the same cores without decoding their code again."""
    programs = {} if programs is None else programs
    next_seq = 0
    for capture in captures:
        for etm, batches in source_packets(capture, on_frames=partial(_unfinished_frame, capture.path, ctx)):
            walk = None  # made at the source's first packets: a source without any needs no image
            unsynced = Unsynced()
            for packets in batches:
                if walk is None:
                    report = partial(packet_error, capture.path, etm, ctx)
                    walker, _ = PROTOCOLS[type(etm.config)]
                    walk = walker(etm, source_program(programs, capture, etm, ctx), next_seq, report)
                unsynced.see(packets)
                yield from walk.batch(packets)
            if walk is not None:
                yield from walk.finish()
                next_seq = walk.next_seq
            unsynced.report(capture.path, etm, ctx)


class Unsynced:
    """The bytes of a source before its first sync, while it has had none: a source that never
    syncs decodes to nothing, which `report` says (a buffer that wrapped starts unsynced, which
    is no fault)."""

    def __init__(self) -> None:
        self.size = 0  # bytes so far; -1 once the source has synced
        self.first = -1  # the offset of the first of them

    def see(self, packets: Packets) -> None:
        """Count a batch's packets."""
        if self.size < 0:
            return
        kinds = packets["kind"]
        if (kinds != K_UNSYNCED).any():
            self.size = -1
        elif len(kinds):
            self.size += int(packets["size"].sum())
            if self.first < 0:
                self.first = int(packets["offset"][0])

    def report(self, path: Path, etm: EtmSource, ctx: DecodeContext) -> None:
        """A warning (an error with --strict) when the source's bytes held no sync at all."""
        if self.size > 0:
            where = f"offset 0x{self.first:x} (source {etm.label})"
            ctx.doubt(str(path), where, f"no sync in its {self.size} bytes: nothing decoded")


def _unfinished_frame(path: Path, ctx: DecodeContext, frames: FrameStats) -> None:
    """A formatted buffer that ends inside a frame was cut short: it fails a --strict decode;
    otherwise it is a warning (the frame's bytes cannot be given to their sources)."""
    if frames.trailing_bytes:
        got = f"{frames.trailing_bytes} bytes of an unfinished last frame"
        where = f"offset 0x{frames.trailing_offset:x}"
        ctx.leave_out(str(path), where, "whole formatter frames", got, "a truncated buffer?")


def packet_error(path: Path, etm: EtmSource, ctx: DecodeContext, packets: Packets, row: int) -> None:
    """A reserved or malformed packet: it fails a --strict decode; otherwise it is a warning
    (its trace_gap event says where, and the trace resynchronises at the next A-sync)."""
    source = "" if etm.trace_id is None else f" (source {etm.label})"
    where = f"offset 0x{int(packets['offset'][row]):x}{source}"
    expected = PROTOCOLS[type(etm.config)][1][int(packets["info"][row])]
    raw = packets.raw(row)
    got = raw[:RAW_SHOWN].hex(" ") + (" ..." if len(raw) > RAW_SHOWN else "")
    ctx.leave_out(str(path), where, expected, got, "a trace gap to the next A-sync")


def source_program(
    programs: dict[object, Program], capture: Capture, etm: EtmSource, ctx: DecodeContext
) -> Program:
    """The program image of the source's core, shared by the sources of cores whose memory
    dumps are the same (an SMP snapshot's cores usually dump one kernel image). A data-only
    source traces no instructions: it walks nothing, and needs no image."""
    if isinstance(etm.config, EtmConfig) and etm.config.data_only:
        return Program(Image())
    given = ctx.image
    key: object = "given" if given is not None else None if etm.core is None else etm.core.dumped
    if key not in programs:
        programs[key] = Program(given if given is not None else _core_memory(capture, etm, ctx))
    return programs[key]


def _core_memory(capture: Capture, etm: EtmSource, ctx: DecodeContext) -> Image:
    """The memory the core's snapshot dumps. A dump file that is not there fails a --strict
    decode; otherwise it is a warning and its addresses are missing from the program image
    (the walk gives `no_code` gaps there), as the reference decoder reads such snapshots."""
    if capture.snapshot is None or etm.core is None:
        raise CputraceError(
            f"{capture.path}: source {etm.label} has no core memory dump to walk; "
            "give the program with --image"
        )
    core = str(etm.core.path)

    def missing(dump: DumpEntry) -> None:
        ctx.doubt(core, str(dump.line), f"dump of {dump.file} at {dump.address:#x}: no such file; "
                  "its addresses are left out of the program image")  # fmt: skip

    return capture.snapshot.memory(etm.core, missing)
