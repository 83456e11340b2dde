"""Recognising XScale trace buffers: the text form and OpenOCD's dump file (a raw buffer has no signature)."""

from __future__ import annotations

from .buffers import looks_like_openocd, looks_like_text


def sniff(head: bytes) -> int:
    if looks_like_text(head):
        return 80
    return 50 if looks_like_openocd(head) else 0
