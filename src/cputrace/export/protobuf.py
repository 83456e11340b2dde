"""The protobuf wire format, as much as writing Perfetto traces needs: varints and byte fields.

Writers emit millions of fields, so keys and small numbers come from precomputed tables.
"""

from __future__ import annotations

from functools import cache

_VARINT = 0
_LENGTH_DELIMITED = 2
_SMALL = 1 << 14


def _encode(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_VARINTS = tuple(_encode(v) for v in range(_SMALL))


def varint(value: int) -> bytes:
    """Base-128 varint; negative numbers as their 64-bit two's complement (int64 fields)."""
    if 0 <= value < _SMALL:
        return _SMALL_VARINTS[value]
    return _encode(value & ((1 << 64) - 1))


@cache
def _key(number: int, wire_type: int) -> bytes:
    return _encode(number << 3 | wire_type)


def uint_field(number: int, value: int) -> bytes:
    """A varint field: integers, enums and bools."""
    return _key(number, _VARINT) + varint(value)


def bytes_field(number: int, data: bytes) -> bytes:
    """A length-delimited field: embedded messages and bytes."""
    return _key(number, _LENGTH_DELIMITED) + varint(len(data)) + data


def string_field(number: int, text: str) -> bytes:
    return bytes_field(number, text.encode("utf-8"))
