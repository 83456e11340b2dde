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
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import TraceFormatError
from ...inputs import InputFile, read_exactly

LINE_BYTES = 16
MAX_BUFFER_BYTES = 64 << 20
"""Far above any DSU buffer (GR740: 256 lines per CPU); a larger input is not a buffer dump."""
KINDS = ("itb", "ahb")
TEXT_MAGIC = b"# leon-trace"
_WORDS = re.compile(rb"^\s*([0-9a-fA-F]{8})\s+([0-9a-fA-F]{8})\s+([0-9a-fA-F]{8})\s+([0-9a-fA-F]{8})\s*$")
_SETTING = re.compile(r"(\w+)=(\S+)")


@dataclass
class Buffer:
    """One CPU's buffer as read out: lines in buffer order (line 0 first), not yet in time order."""

    kind: str  # "itb" (instruction trace) or "ahb" (AHB bus trace)
    cpu: int
    control: int | None  # ITBC0 (or the AHB buffer's control register): pointer and filter
    words: np.ndarray  # uint32, shape (lines, 4)
    src: np.ndarray  # int64: byte offset (raw dump) or 1-based line number (text) of each line
    src_unit: str  # "byte" or "line", for messages


def _number(value: Any, path: str, key: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(str(value), 0)
    except ValueError:
        raise TraceFormatError(path, key, "a number (0x20000012 or 536870930)", str(value)) from None


def _settings(found: dict[str, Any], path: str, base: dict[str, Any]) -> dict[str, Any]:
    """kind, cpu and control from `found` (a header or a JSON file), falling back to `base`."""
    settings = dict(base)
    for key, value in found.items():
        key = key.lower()
        if key == "kind":
            if str(value).lower() not in KINDS:
                raise TraceFormatError(path, "kind", "kind itb or ahb", str(value))
            settings["kind"] = str(value).lower()
        elif key in ("cpu", "itbc0", "control"):
            settings["control" if key == "itbc0" else key] = _number(value, path, key)
    return settings


def option_settings(options: dict[str, Any]) -> dict[str, Any]:
    """The settings given to the ingest itself (Python API: `itbc0`, `cpu`)."""
    return _settings({k: v for k, v in options.items() if k in ("itbc0", "cpu")}, "options", _DEFAULTS)


_SETTINGS_FILE = "a JSON object of trace buffer settings"
_DEFAULTS: dict[str, Any] = {"kind": "itb", "cpu": 0, "control": None}


def sidecar_settings(path: str, base: dict[str, Any]) -> dict[str, Any]:
    """Settings from `DUMP.json` next to a raw dump, when there is one."""
    sidecar = Path(path + ".json")
    if not sidecar.is_file():
        return base
    try:
        loaded = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceFormatError(str(sidecar), "0", _SETTINGS_FILE, str(exc)) from None
    if not isinstance(loaded, dict):
        raise TraceFormatError(str(sidecar), "0", _SETTINGS_FILE, type(loaded).__name__)
    return _settings(loaded, str(sidecar), base)


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


def read_text(source: InputFile, base: dict[str, Any]) -> list[Buffer]:
    """The text form: `# leon-trace key=value ...` headers and four hex words per line."""
    data = _read_capped(source, "a trace buffer listing of at most 64 MiB")
    buffers: list[Buffer] = []
    settings = dict(base)
    rows: list[tuple[int, ...]] = []
    lines: list[int] = []

    def close() -> None:
        if rows:
            words = np.array(rows, np.uint32).reshape(-1, 4)
            src = np.array(lines, np.int64)
            buffers.append(Buffer(settings["kind"], settings["cpu"], settings["control"], words, src, "line"))
        rows.clear()
        lines.clear()

    for number, line in enumerate(data.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(b"#"):
            text = stripped.decode("latin-1")
            found = dict(_SETTING.findall(text))
            if found.keys() & {"kind", "cpu"}:
                close()
            settings = _settings(found, source.path, settings) if found else settings
            continue
        m = _WORDS.match(line)
        if m is None:
            raise TraceFormatError(
                source.path, f"line {number}", "four 8-digit hex words (or a # header line)",
                line.decode("latin-1"),
            )  # fmt: skip
        rows.append(tuple(int(w, 16) for w in m.groups()))
        lines.append(number)
    close()
    return buffers


def text_score(head: bytes) -> int:
    """How sure (0-100) that `head` starts a text listing of DSU trace buffer lines."""
    if head.startswith(TEXT_MAGIC):
        return 95
    body = [line for line in head.splitlines()[:20] if line.strip() and not line.lstrip().startswith(b"#")]
    if len(body) >= 2 and all(_WORDS.match(line) for line in body[:-1]):
        return 40
    return 0
