"""Intel XScale trace buffers: input forms, message parsing, and the walk through the image."""

from .buffers import TraceBuffer, read_buffers
from .decoder import XscaleDecoder
from .messages import Kind, Message, Parsed, parse_messages

__all__ = ["Kind", "Message", "Parsed", "TraceBuffer", "XscaleDecoder", "parse_messages", "read_buffers"]
