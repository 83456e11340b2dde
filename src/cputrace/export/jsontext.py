"""Streaming JSON: arrays of millions of items written in pieces, never built whole in memory."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from typing import TextIO

_PIECE = 65536


def write_items(out: TextIO, items: Iterable[str]) -> None:
    """Comma-separated JSON texts (the inside of an array), in pieces of bounded size."""
    iterator = iter(items)
    first = True
    while piece := list(islice(iterator, _PIECE)):
        if not first:
            out.write(", ")
        out.write(", ".join(piece))
        first = False


def number(value: float) -> str:
    """A JSON number: integral values without a fraction."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))
