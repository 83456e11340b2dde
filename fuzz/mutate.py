"""Mutations of seed files and options, each drawn from a seeded RNG so a case can be made again.

Every mutator takes the bytes and the RNG and returns the new bytes with a short description
of what it did (kept in a crasher's description). Binary mutators apply to every file; the
line, ini and JSON mutators know those shapes, so a mutant stays close enough to the format
to reach the parsers behind the first check: near-misses find more than noise.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MAX_BYTES = 16 << 20
"""No mutant grows past this: large enough for lines over any sane cap, small enough to run often."""

INTERESTING_BYTES = (
    b"\x00", b"\xff", b"\x80", b"\x7f", b"\xa0", b"\r", b"\n", b"\t", b"\x1a", b"#", b":", b"=", b"(", b")",
)  # fmt: skip
NON_UTF8 = (b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\xe9", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\x80\x80")
NUMBERS = (
    b"0", b"-1", b"-0", b"65535", b"65536", b"2147483648", b"4294967296", b"9223372036854775807",
    b"9223372036854775808", b"18446744073709551615", b"18446744073709551616", b"ffffffffffffffff",
    b"10000000000000000", b"fffffffffffffffff", b"0x" + b"f" * 33, b"9" * 40, b"9" * 4301, b"1" * 20000,
    b"-9223372036854775809", b"1e309", b"nan", b"0x", b"", b"1.5", b"1_000",
)  # fmt: skip
WORDS = (0, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0x00010000, 0xFFFF, 1)
OPTION_VALUES = (
    "-1", "0", "", "zz", "1.5", "0x", "true", "none", "18446744073709551616", "0x" + "f" * 17, "9" * 5000,
    "-9223372036854775809", "65536", "4294967296",
)  # fmt: skip
_HUGE = "\0huge\0"
"""Stands for a 5,000-digit integer in a sidecar (Python's int-to-text limit keeps json.dumps from
writing one)."""
JSON_VALUES: tuple[object, ...] = (
    -1, 0, 1 << 16, 1 << 31, 1 << 32, 1 << 64, _HUGE, "zz", "", "0x" + "f" * 20, None, [], {}, 1.5, True,
    "itb", "ahb", "-0x1",
)  # fmt: skip
LONG_LINE_BYTES = (4 << 10, 64 << 10, 1 << 20, 4 << 20)
_NUMBER = re.compile(rb"(?<![0-9A-Za-z_])(?:0x)?[0-9A-Fa-f]+(?![0-9A-Za-z_])")
_TOKEN = re.compile(rb"[^\s]+")
_INI_VALUE = re.compile(rb"^([^=\[\n#;]+)=([^\n]*)$", re.MULTILINE)
_INI_SECTION = re.compile(rb"^\[[^\]\n]*\][^\[]*", re.MULTILINE)


@dataclass
class Donors:
    """Other seeds of the same kind, to splice from."""

    files: Sequence[bytes]

    def pick(self, rng: random.Random, fallback: bytes) -> bytes:
        usable = [f for f in self.files if f]
        return rng.choice(usable) if usable else fallback


Mutator = Callable[[bytes, random.Random, Donors], tuple[bytes, str]]


def _position(data: bytes, rng: random.Random) -> int:
    return rng.randrange(len(data) + 1)


def _span(data: bytes, rng: random.Random, most: int = 256) -> tuple[int, int]:
    start = rng.randrange(len(data)) if data else 0
    return start, min(len(data), start + rng.randint(1, most))


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


# --- bytes ----------------------------------------------------------------------------------


def flip_bits(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    if not data:
        return b"\x01", "flip bits of nothing: one byte"
    out = bytearray(data)
    flips = [(rng.randrange(len(out)), rng.randrange(8)) for _ in range(rng.choice((1, 1, 2, 4, 8)))]
    for offset, bit in flips:
        out[offset] ^= 1 << bit
    return bytes(out), "flip bits " + ",".join(f"{o}.{b}" for o, b in flips)


def set_bytes(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    at = rng.randrange(len(data)) if data else 0
    value = rng.choice((*INTERESTING_BYTES, bytes([rng.randrange(256)])))
    return data[:at] + value + data[at + len(value) :], f"set byte {at} to {value!r}"


def set_word(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    """An aligned 32-bit word set to an edge value (a field of a binary record, mostly)."""
    at = rng.randrange(0, max(len(data) - 3, 1), 4) if len(data) >= 4 else 0
    order = rng.choice(("big", "little"))
    value = rng.choice((*WORDS, rng.getrandbits(32)))
    return data[:at] + value.to_bytes(4, order) + data[at + 4 :], f"set word {at} to {value:#x} ({order})"


def insert_bytes(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    at = _position(data, rng)
    if rng.random() < 0.5:
        value = rng.choice(INTERESTING_BYTES + NON_UTF8) * rng.choice((1, 1, 4, 64))
    else:
        value = rng.randbytes(rng.randint(1, 64))
    return data[:at] + value + data[at:], f"insert {len(value)} bytes at {at}"


def delete_range(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    start, end = _span(data, rng)
    return data[:start] + data[end:], f"delete bytes {start}:{end}"


def truncate(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    at = rng.randrange(len(data)) if data else 0
    return data[:at], f"truncate at {at}"


def duplicate_range(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    start, end = _span(data, rng, 4096)
    times = rng.choice((1, 2, 16, 1000))
    times = max(1, min(times, (MAX_BYTES - len(data)) // max(end - start, 1)))
    return data[:end] + data[start:end] * times + data[end:], f"repeat bytes {start}:{end} {times} times"


def splice(data: bytes, rng: random.Random, donors: Donors) -> tuple[bytes, str]:
    """The head of this file and the tail of another seed (or of itself, elsewhere)."""
    other = donors.pick(rng, data)
    at, cut = _position(data, rng), _position(other, rng)
    return data[:at] + other[cut:], f"splice at {at} with a donor's bytes from {cut}"


# --- lines ----------------------------------------------------------------------------------


def long_line(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    lines = _lines(data)
    size = rng.choice(LONG_LINE_BYTES)
    unit = (
        rng.choice(lines).rstrip(b"\r\n") + b" " if lines and rng.random() < 0.6 else rng.choice((b"A", b"0"))
    )
    line = (unit * (size // max(len(unit), 1) + 1))[:size]
    at = rng.randrange(len(lines) + 1)
    newline = b"\n" if rng.random() < 0.8 else b""  # sometimes the last line, with no end
    lines.insert(at, line + newline)
    return b"".join(lines), f"insert a {size}-byte line at line {at + 1}"


def nul_in_line(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    lines = _lines(data) or [b""]
    n = rng.randrange(len(lines))
    at = rng.randrange(len(lines[n]) + 1)
    lines[n] = lines[n][:at] + b"\x00" * rng.choice((1, 1, 3)) + lines[n][at:]
    return b"".join(lines), f"NUL in line {n + 1} at column {at}"


def non_utf8(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    """A token replaced by (or given) bytes that are not UTF-8."""
    tokens = list(_TOKEN.finditer(data))
    bad = rng.choice(NON_UTF8)
    if not tokens:
        return bad + data, "non-UTF-8 bytes at 0"
    m = rng.choice(tokens)
    replacement = bad if rng.random() < 0.5 else m.group()[:1] + bad + m.group()[1:]
    return data[: m.start()] + replacement + data[m.end() :], f"non-UTF-8 bytes in the token at {m.start()}"


def huge_number(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    numbers = list(_NUMBER.finditer(data))
    value = rng.choice(NUMBERS)
    if not numbers:
        at = _position(data, rng)
        return data[:at] + value + data[at:], f"insert number {value[:24]!r} at {at}"
    m = rng.choice(numbers)
    if m.group().startswith(b"0x") and not value.startswith((b"0x", b"-")):
        value = b"0x" + value
    return data[: m.start()] + value + data[m.end() :], f"number at {m.start()} -> {value[:24]!r}"


def edit_lines(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    """A line repeated (up to thousands of times: linear time?), dropped or moved."""
    lines = _lines(data)
    if not lines:
        return data, "no lines to edit"
    n = rng.randrange(len(lines))
    action = rng.choice(("repeat", "drop", "move"))
    if action == "repeat":
        times = rng.choice((1, 2, 100, 10_000))
        times = max(1, min(times, (MAX_BYTES - len(data)) // max(len(lines[n]), 1)))
        lines[n:n] = [lines[n]] * times
        return b"".join(lines), f"repeat line {n + 1} {times} times"
    line = lines.pop(n)
    if action == "move":
        lines.insert(rng.randrange(len(lines) + 1), line)
    return b"".join(lines), f"{action} line {n + 1}"


def swap_token(data: bytes, rng: random.Random, donors: Donors) -> tuple[bytes, str]:
    """A token replaced by a token of another line or seed: grammar-shaped nonsense."""
    tokens = list(_TOKEN.finditer(data))
    others = list(_TOKEN.finditer(donors.pick(rng, data)))
    if not tokens or not others:
        return data, "no tokens to swap"
    m, donor = rng.choice(tokens), rng.choice(others).group()
    return data[: m.start()] + donor + data[m.end() :], f"token at {m.start()} -> {donor[:24]!r}"


def line_endings(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    choice = rng.choice(("crlf", "cr", "no final newline", "tabs", "nbsp"))
    if choice == "crlf":
        return data.replace(b"\n", b"\r\n"), "line ends CRLF"
    if choice == "cr":
        return data.replace(b"\n", b"\r"), "line ends CR"
    if choice == "no final newline":
        return data.rstrip(b"\r\n"), "no final newline"
    return data.replace(
        b" ", b"\t" if choice == "tabs" else b"\xa0", rng.randint(1, 50)
    ), f"spaces to {choice}"


# --- ini files and JSON sidecars ----------------------------------------------------------------


def ini_value(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    """A key's value replaced: numbers at the edges, nonsense, missing files, nothing."""
    pairs = list(_INI_VALUE.finditer(data))
    value = rng.choice((*NUMBERS, b"missing.bin", b"..", b"/", b"snapshot.ini", b"zz", b" ", b"0x1=2"))
    if not pairs:
        return data + b"\nkey=" + value + b"\n", "append a key"
    m = rng.choice(pairs)
    key = m.group(1)
    return data[: m.start(2)] + value + data[m.end(2) :], f"ini {key.strip()[:40]!r} = {value[:24]!r}"


def ini_structure(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    """A key or section dropped or doubled, or a key renamed."""
    action = rng.choice(("drop key", "rename key", "drop section", "double section"))
    if action in ("drop key", "rename key"):
        pairs = list(_INI_VALUE.finditer(data))
        if not pairs:
            return data, "no keys"
        m = rng.choice(pairs)
        if action == "drop key":
            return data[: m.start()] + data[m.end() :], f"drop ini key {m.group(1).strip()[:40]!r}"
        renamed = rng.choice((m.group(1).upper(), b"x" + m.group(1), m.group(1) + b"(0x999)", b""))
        return data[: m.start(1)] + renamed + data[m.end(1) :], f"rename ini key {m.group(1).strip()[:40]!r}"
    sections = list(_INI_SECTION.finditer(data))
    if not sections:
        return data, "no sections"
    m = rng.choice(sections)
    if action == "drop section":
        return data[: m.start()] + data[m.end() :], f"drop section at {m.start()}"
    return data[: m.end()] + m.group() + data[m.end() :], f"double section at {m.start()}"


def json_edit(data: bytes, rng: random.Random, _: Donors) -> tuple[bytes, str]:
    """A sidecar's value set to the wrong type or range, a key dropped or added, or no object."""
    try:
        loaded = json.loads(data)
    except ValueError:
        return flip_bits(data, rng, Donors(()))
    if not isinstance(loaded, dict) or not loaded or rng.random() < 0.1:
        shape = rng.choice(([], [loaded], "itb", 3, None))
        return json.dumps(shape).encode(), f"sidecar as {type(shape).__name__}"
    action = rng.choice(("value", "value", "drop", "add"))
    key = rng.choice(sorted(loaded))
    if action == "drop":
        del loaded[key]
    elif action == "add":
        key = rng.choice(("kind", "cpu", "itbc0", "control", "Cpu", "unknown"))
        loaded[key] = rng.choice(JSON_VALUES)
    else:
        loaded[key] = rng.choice(JSON_VALUES)
    return _dumps(loaded), f"sidecar {action} {key!r}"


def _dumps(value: object) -> bytes:
    return json.dumps(value).replace(json.dumps(_HUGE), "9" * 5000).encode()


BINARY: tuple[tuple[Mutator, int], ...] = (
    (flip_bits, 6), (set_bytes, 3), (set_word, 3), (insert_bytes, 2), (delete_range, 2), (truncate, 2),
    (duplicate_range, 1), (splice, 2),
)  # fmt: skip
TEXT = (
    *BINARY, (long_line, 2), (nul_in_line, 2), (non_utf8, 2), (huge_number, 6), (edit_lines, 3),
    (swap_token, 4), (line_endings, 1),
)  # fmt: skip
MUTATORS: dict[str, tuple[tuple[Mutator, int], ...]] = {
    "binary": BINARY,
    "image": ((flip_bits, 4), (set_word, 2), (truncate, 1)),
    "text": TEXT,
    "ini": (*TEXT, (ini_value, 12), (ini_structure, 6)),
    "json": ((json_edit, 10), (flip_bits, 1), (truncate, 1), (insert_bytes, 1)),
}


def mutate(data: bytes, kind: str, rng: random.Random, donors: Donors) -> tuple[bytes, list[str]]:
    """`data` after one to a few mutations of its kind (most often one)."""
    functions, weights = zip(*MUTATORS[kind], strict=True)
    count = rng.choices((1, 2, 3, 5), (60, 25, 10, 5))[0]
    done = []
    for function in rng.choices(functions, weights, k=count):
        data, what = function(data, rng, donors)
        done.append(what)
    return data[:MAX_BYTES], done


def mutate_options(
    options: dict[str, str], keys: Sequence[str], rng: random.Random
) -> tuple[dict[str, str], list[str]]:
    """One option dropped or set to a value at an edge or of the wrong type."""
    options = dict(options)
    key = rng.choice(sorted({*keys, *options}))
    if key in options and rng.random() < 0.2:
        del options[key]
        return options, [f"drop option {key}"]
    options[key] = rng.choice(OPTION_VALUES)
    return options, [f"option {key}={options[key][:24]}"]
