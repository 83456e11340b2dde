"""`PATH[@ADDR]` image specifications, as given to `--image`, loaded by content."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from .elf import load_elf
from .errors import ImageError
from .ihex import load_ihex
from .memory import ADDRESS_SPACE, Image
from .raw import load_raw
from .srec import load_srec

_IHEX = re.compile(rb"\s*:[0-9A-Fa-f]{10}")
_SREC = re.compile(rb"\s*S[0-9][0-9A-Fa-f]{6}")


def parse_image_spec(spec: str) -> tuple[Path, int | None]:
    """Split `path@ADDR` (ADDR in Python integer syntax: 0x8000, 32768); `@` may be in paths."""
    path, sep, address = spec.rpartition("@")
    if sep and path:
        try:
            return Path(path), int(address, 0)
        except ValueError:
            pass
    return Path(spec), None


def sniff_image(head: bytes) -> str:
    """The loader for a file starting with `head`: "elf", "ihex", "srec" or "raw"."""
    if head.startswith(b"\x7fELF"):
        return "elf"
    if _IHEX.match(head):
        return "ihex"
    if _SREC.match(head):
        return "srec"
    return "raw"


def load_image_spec(spec: str) -> Image:
    """Load `path[@ADDR]`, choosing the loader by content.

    ELF, Intel HEX and S-records carry their addresses, and ADDR (if given) is an offset
    added to all of them; a raw binary is placed at ADDR, which it then requires.
    """
    path, address = parse_image_spec(spec)
    if address is not None and not -ADDRESS_SPACE < address < ADDRESS_SPACE:
        shown = spec.rpartition("@")[2]
        expected = "an address (for ELF, HEX and S-records an offset) of 64 bits after @"
        raise ImageError(f"{spec}: expected {expected}, got {shown}")
    try:
        with open(path, "rb") as stream:
            head = stream.read(64)
    except OSError as exc:
        raise ImageError(f"{path}: cannot read: {exc.strerror}") from exc
    kind = sniff_image(head)
    if kind == "elf":
        return load_elf(path, address or 0)
    if kind == "ihex":
        return load_ihex(path, address or 0)
    if kind == "srec":
        return load_srec(path, address or 0)
    if address is None:
        raise ImageError(
            f"{path}: not ELF, Intel HEX or S-record, so a raw binary: give its load address "
            f"as {path}@0xADDRESS"
        )
    return load_raw(path, address)


def load_image_specs(specs: Iterable[str | os.PathLike[str]]) -> Image | None:
    """The images `specs` name (`PATH[@ADDR]` each), merged into one; None when there are none."""
    images = [load_image_spec(str(spec)) for spec in specs]
    return Image.merge(images) if images else None
