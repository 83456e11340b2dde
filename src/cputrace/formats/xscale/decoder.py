"""The `xscale` input format: Intel XScale (80200, PXA2xx, IXP4xx) trace buffers.

The buffer holds only instruction counts between branches and the addresses of indirect
branches, so instructions come from walking the program image (`--image`). Sniffing knows the
text form and OpenOCD's dump file; a raw buffer needs `--format xscale`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from ...errors import CputraceError, TraceFormatError
from ...inputs import InputFile, read_exactly
from ..base import Batch, DecodeContext, arm_vector_base
from .buffers import Unread, read_buffers
from .messages import parse_messages
from .ops import BufferWalk

MAX_INPUT_BYTES = 64 << 20
"""Larger than any series of 256-byte buffers a debugger collects; read whole."""
UNREAD_BATCH = 4096
"""Lines or byte runs left out (lenient mode) per batch of events."""


class XscaleDecoder:
    name: ClassVar[str] = "xscale"

    def decode(self, source: InputFile, ctx: DecodeContext) -> Iterator[Batch]:
        image = ctx.image
        if image is None:
            raise CputraceError(
                f"{source.path}: an XScale trace buffer holds only instruction counts and branch addresses; "
                "the program image is required to recover the instructions: give it with --image PATH "
                "(PATH@ADDR for a raw binary)"
            )
        vector_base = arm_vector_base(ctx.options)
        stream = source.open()
        try:
            data = read_exactly(stream, MAX_INPUT_BYTES + 1, source.path)
            if len(data) > MAX_INPUT_BYTES:
                raise TraceFormatError(source.path, "0", "at most 64 MiB of XScale trace buffers", "more")
        finally:
            stream.close()
        walk = BufferWalk(image, vector_base)
        unread: list[Unread] = []  # what lenient reading left out, as events in batches
        for item in read_buffers(data, source.path, ctx):
            if isinstance(item, Unread):
                unread.append(item)
                if len(unread) == UNREAD_BATCH:
                    yield walk.unread(unread)
                    unread = []
                continue
            if unread:
                yield walk.unread(unread)
                unread = []
            parsed = parse_messages(item)
            bad = parsed.bad_index
            if bad is not None:  # lenient: the walk's gap event says which bytes were dropped
                ctx.reject(source.path, item.where(bad), "an XScale message byte", f"0x{item.data[bad]:02x}")
            yield from walk.buffer(item, parsed)
        if unread:
            yield walk.unread(unread)
