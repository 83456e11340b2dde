"""Arm ETMv3 trace: configuration, packets, and the inputs that carry them."""

from .capture import Capture, EtmSource, PacketReader, open_captures, split_sources
from .config import EtmConfig
from .decoder import Etmv3Decoder
from .packets import PACKET, PacketDecoder, Packets, decode_packets
from .protocol import ErrorReason, Flag, Kind

__all__ = [
    "PACKET",
    "Capture",
    "ErrorReason",
    "EtmConfig",
    "EtmSource",
    "Etmv3Decoder",
    "Flag",
    "Kind",
    "PacketDecoder",
    "PacketReader",
    "Packets",
    "decode_packets",
    "open_captures",
    "split_sources",
]
