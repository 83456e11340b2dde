"""Reading LEON/GR740 DSU trace buffers: raw dumps, their settings, and the text form.

A buffer is a run of 128-bit lines, each kept as four big-endian 32-bit words (DSU word
offsets +0, +4, +8, +C). A raw dump is the lines as read from the DSU, 16 bytes each. Its
settings (the ITBC0 register, the CPU, which buffer it is) come from a JSON file next to it,
`DUMP.json`, or from the ingest options; the text form carries them in `#` header lines:

    # leon-trace kind=itb cpu=0 itbc0=0x20000012
    0c000010 40001018 40001014 d6020000

A header line starting a new `kind=`/`cpu=` setting starts a new buffer, so one text file can
hold the buffers of several CPUs.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import TraceFormatError
from ...inputs import InputFile, read_exactly
from ..base import DecodeContext

LINE_BYTES = 16
MAX_BUFFER_BYTES = 64 << 20
"""Far above any DSU buffer (GR740: 256 lines per CPU); a larger input is not a buffer dump."""
MAX_SETTINGS_BYTES = 1 << 20
"""Far above any `DUMP.json`; a larger file is not one."""
KINDS = ("itb", "ahb")
MAX_CPU = 0xFFFF  # the model's cpu column is 16 bits
MAX_CONTROL = 0xFFFFFFFF  # a 32-bit DSU register
TEXT_MAGIC = b"# leon-trace"
_WORDS = re.compile(rb"\s*([0-9a-fA-F]{8})\s+([0-9a-fA-F]{8})\s+([0-9a-fA-F]{8})\s+([0-9a-fA-F]{8})\s*")
_LINE = "four 8-digit hex words (or a # header line)"
EXPECTED = {
    "cpu": f"a CPU number from 0 to {MAX_CPU}",
    "control": f"a 32-bit control register value (0 to 0x{MAX_CONTROL:x})",
}
_LIMITS = {"cpu": MAX_CPU, "control": MAX_CONTROL}


@dataclass
class Buffer:
    """One CPU's buffer as read out: lines in buffer order (line 0 first), not yet in time order."""

    kind: str  # "itb" (instruction trace) or "ahb" (AHB bus trace)
    cpu: int
    control: int | None  # ITBC0 (or the AHB buffer's control register): pointer and filter
    words: np.ndarray  # uint32, shape (lines, 4)
    src: np.ndarray  # int64: byte offset (raw dump) or 1-based line number (text) of each line
    src_unit: str  # "byte" or "line", for messages
    unparsed: list[tuple[int, str]] = field(default_factory=list)  # (line number, text): kept as text


def _number(value: Any, key: str) -> int | None:
    """`value` as a setting's number (an int, or a string in any base Python reads), in range."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        try:
            number = int(str(value), 0)
        except ValueError:
            return None
    return number if 0 <= number <= _LIMITS[key] else None


def _settings(found: dict[str, Any], base: dict[str, Any], path: str, where: str) -> dict[str, Any]:
    """kind, cpu and control from `found` (a header line or a JSON file), falling back to `base`.

    A value out of its range is an error in every mode: settings say how to read the whole
    buffer, so there is no record to keep as text instead. `where` names the line, if any.
    """
    settings = dict(base)
    for key, value in found.items():
        key = key.lower()
        at = f"{where}, {key}" if where else key
        if key == "kind":
            if str(value).lower() not in KINDS:
                raise TraceFormatError(path, at, "kind itb or ahb", str(value))
            settings["kind"] = str(value).lower()
        elif key in ("cpu", "itbc0", "control"):
            name = "control" if key == "itbc0" else key
            number = _number(value, name)
            if number is None:
                raise TraceFormatError(path, at, EXPECTED[name], str(value))
            settings[name] = number
    return settings


_SETTINGS_FILE = f"a JSON object of trace buffer settings (at most {MAX_SETTINGS_BYTES >> 20} MiB)"


def sidecar_settings(path: str, base: dict[str, Any]) -> dict[str, Any]:
    """Settings from `DUMP.json` next to a raw dump, when there is one (a folder or anything
    else there that cannot be read as one is an error, not settings left out unsaid)."""
    sidecar = Path(path + ".json")
    if not os.path.lexists(sidecar):
        return base
    try:
        with sidecar.open("rb") as stream:
            data = stream.read(MAX_SETTINGS_BYTES + 1)
        if len(data) > MAX_SETTINGS_BYTES:
            raise TraceFormatError(str(sidecar), f"byte {MAX_SETTINGS_BYTES}", _SETTINGS_FILE)
        loaded = json.loads(data.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: bad UTF-8 or JSON, huge numbers
        raise TraceFormatError(str(sidecar), "0", _SETTINGS_FILE, str(exc)) from None
    if not isinstance(loaded, dict):
        raise TraceFormatError(str(sidecar), "0", _SETTINGS_FILE, type(loaded).__name__)
    return _settings(loaded, base, str(sidecar), "")


def _read_capped(source: InputFile, expected: str) -> bytes:
    """The whole input, which a trace buffer keeps small; an error past MAX_BUFFER_BYTES."""
    stream = source.open()
    try:
        data = read_exactly(stream, MAX_BUFFER_BYTES + 1, source.path)
    finally:
        stream.close()
    if len(data) > MAX_BUFFER_BYTES:
        raise TraceFormatError(source.path, f"byte {MAX_BUFFER_BYTES}", expected)
    return data


def read_raw(source: InputFile, settings: dict[str, Any]) -> Buffer:
    """A raw dump: whole 16-byte lines, big-endian words."""
    data = _read_capped(source, "a trace buffer dump of at most 64 MiB")
    if not data or len(data) % LINE_BYTES:
        raise TraceFormatError(
            source.path, f"byte {len(data) - len(data) % LINE_BYTES}",
            "whole 16-byte trace buffer lines", f"{len(data) % LINE_BYTES or 0} bytes",
        )  # fmt: skip
    words = np.frombuffer(data, ">u4").astype(np.uint32).reshape(-1, 4)
    src = np.arange(len(words), dtype=np.int64) * LINE_BYTES
    return Buffer(settings["kind"], settings["cpu"], settings["control"], words, src, "byte")


def _header_settings(text: str, path: str, where: str) -> dict[str, str]:
    """The `key=value` words of a `#` line (split, not a pattern: time linear in the line); a key
    given twice is an error, as no value of the two can be told right."""
    found: dict[str, str] = {}
    for word in text.lstrip("#").split():
        key, equals, value = word.partition("=")
        if equals and key and value:
            if key.lower() in found:
                raise TraceFormatError(path, where, f"{key}= once in a header", text.strip())
            found[key.lower()] = value
    return found


def read_text(source: InputFile, base: dict[str, Any], ctx: DecodeContext) -> list[Buffer]:
    """The text form: `# leon-trace key=value ...` headers and four hex words per line.

    A line that is neither is an error with --strict; otherwise it is kept as text, and its
    place in the buffer stays, as an unwritten (all-zero) line, so the pointer still counts
    the buffer's lines right.
    """
    data = _read_capped(source, "a trace buffer listing of at most 64 MiB")
    buffers: list[Buffer] = []
    settings = dict(base)
    rows: list[tuple[int, ...]] = []
    lines: list[int] = []
    unparsed: list[tuple[int, str]] = []

    def close() -> None:
        if rows or unparsed:
            words = np.array(rows, np.uint32).reshape(-1, 4)
            src = np.array(lines, np.int64)
            buffers.append(Buffer(settings["kind"], settings["cpu"], settings["control"], words, src, "line",
                                  list(unparsed)))  # fmt: skip
        rows.clear()
        lines.clear()
        unparsed.clear()

    for number, line in enumerate(data.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(b"#"):
            found = _header_settings(stripped.decode("latin-1"), source.path, f"line {number}")
            if found.keys() & {"kind", "cpu"}:
                close()
            settings = _settings(found, settings, source.path, f"line {number}")
            continue
        m = _WORDS.fullmatch(line)
        if m is None:
            text = line.decode("utf-8", "replace")
            ctx.reject(source.path, f"line {number}", _LINE, text)
            unparsed.append((number, text))
            rows.append((0, 0, 0, 0))
        else:
            rows.append(tuple(int(w, 16) for w in m.groups()))
        lines.append(number)
    close()
    return buffers


def text_score(head: bytes) -> int:
    """How sure (0-100) that `head` starts a text listing of DSU trace buffer lines."""
    if head.startswith(TEXT_MAGIC):
        return 95
    body = [line for line in head.splitlines()[:20] if line.strip() and not line.lstrip().startswith(b"#")]
    if len(body) >= 2 and all(_WORDS.fullmatch(line) for line in body[:-1]):
        return 40
    return 0
