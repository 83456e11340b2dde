"""Input decoders and the sniffing that picks one from an input's first bytes."""

from __future__ import annotations

from ..errors import TraceFormatError
from .armulator import ArmulatorDecoder
from .base import Batch, DecodeContext, Decoder
from .etmv3 import Etmv3Decoder
from .leon import LeonAhbDecoder, LeonItbDecoder, LeonTextDecoder
from .tarmac import TarmacDecoder
from .xscale import XscaleDecoder

DECODERS: dict[str, Decoder] = {
    decoder.name: decoder
    for decoder in (
        TarmacDecoder(),
        ArmulatorDecoder(),
        Etmv3Decoder(),
        XscaleDecoder(),
        LeonItbDecoder(),
        LeonAhbDecoder(),
        LeonTextDecoder(),
    )
}

SNIFF_THRESHOLD = 30


def get_decoder(name: str) -> Decoder:
    try:
        return DECODERS[name]
    except KeyError:
        known = ", ".join(sorted(DECODERS))
        raise KeyError(f"unknown format {name!r} (known: {known})") from None


def sniff(head: bytes, path: str) -> Decoder:
    """The decoder most confident about `head`; a clear error when none is."""
    if not head.strip():
        raise TraceFormatError(path, "0", "a trace", "an empty input")
    scores = sorted(((d.sniff(head), d.name) for d in DECODERS.values()), reverse=True)
    best_score, best = scores[0]
    if best_score < SNIFF_THRESHOLD:
        known = ", ".join(sorted(DECODERS))
        raise TraceFormatError(
            path, "0", f"a recognisable trace format ({known}); name one with --format",
            head[:60].decode("latin-1"),
        )
    return DECODERS[best]


__all__ = ["DECODERS", "Batch", "DecodeContext", "Decoder", "get_decoder", "sniff"]
