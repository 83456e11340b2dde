"""Recognising XScale trace buffers: the text form and OpenOCD's dump file (a raw buffer has no signature)."""

from __future__ import annotations

from .buffers import MOSTLY, openocd_share, text_share


def sniff(head: bytes) -> int:
    """How sure (0-100): the text form by its register lines, the dump by its entry words. A
    few malformed lines or words (a damaged input) lower the score but still name the format,
    so that decoding it reports where the damage is."""
    text = text_share(head)
    if text >= MOSTLY:
        return 80 if text == 1 else 50
    return 50 if openocd_share(head) >= MOSTLY else 0
