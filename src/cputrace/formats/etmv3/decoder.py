"""The `etmv3` input format: CoreSight snapshots and ETMv3 trace buffers.

Sniffing knows a snapshot.ini, a trace port capture (frame syncs) and a raw ETMv3 stream that
starts with an A-sync; memory buffers (ETB, ETR) need `--format etmv3`.
The packet layer is complete; turning packets into instructions needs the flow layer
(`cputrace.flow`), so `decode` checks the input and its ETM settings, then says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from ...coresight.frames import sniff_layout
from ...coresight.snapshot import is_snapshot_ini
from ...errors import CputraceError
from ...inputs import InputFile
from ..base import Batch, DecodeContext
from .capture import open_captures


class Etmv3Decoder:
    name: ClassVar[str] = "etmv3"
    description: ClassVar[str] = "Arm ETMv3 trace: CoreSight snapshots (snapshot.ini) and trace buffers"

    def sniff(self, head: bytes) -> int:
        if is_snapshot_ini(head):
            return 90
        return 60 if sniff_layout(head) != "coresight" else 0

    def decode(self, source: InputFile, ctx: DecodeContext) -> Iterator[Batch]:
        captures = open_captures(source.path, ctx.options)
        names = ", ".join(s.label for c in captures for s in c.sources) or "every trace ID in the buffer"
        raise CputraceError(
            f"{source.path}: ETMv3 packets decode (sources {names}; see `cputrace etm packets`), but "
            "turning them into instructions needs the flow layer, which is not in this version yet"
        )
