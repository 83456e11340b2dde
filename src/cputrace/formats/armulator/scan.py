"""Compiled scanner for the ARMulator Tracer line shapes that make up nearly all of a trace.

It recognises, in one pass over raw bytes and without the GIL, each optionally after `T <time>`:
- instruction lines `IT|IS <address> <4 or 8 hex digit opcode> [disassembly]`;
- access lines `<cycle word> <address> [<data>] [(wait)|(abort)|(peek)|(poke)]` with one data
  word of at most 16 hex digits or two of at most 8 (an 8-byte access), a suffix or both;
- idle and coprocessor cycle lines `MI`, `MIO`, `MC`, `BI`... (a cycle word and anything);
- event lines `E <word1> <word2> <number> [name]`, the words of at most 16 hex digits, the
  number of at most 8;
- register lines `R|RCP <name>=<value>[, <name>=<value>...]` with at most 16 hex digits a value.
Every other line is marked SLOW and parsed by `armulator.LineParser`, which is the full
grammar; so is every line whose numbers may be out of range (a time of 2^63 or more, more
digits than the scanner's 64 bits hold) and every line with a byte the two could read apart:
one that is not ASCII (but the Tracer's no-break space, raw 0xA0 or UTF-8 C2 A0, read as a
space, as the parser reads it) or a control character Python takes for whitespace. The
scanner takes only what it can store exactly. Lines longer than the input's line cap are
marked LONG.

The cycle word of an access or idle line is only packed into `MEM.word` or `IDLE.word`: what it
means (and whether it is one) is `cycleword.parse_cycle_word`'s to say, once per distinct word
(`scanned_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...model import SCHEMAS
from ..base import Batch
from ..cycleword import CycleWord, parse_cycle_word
from ..linerows import canonical_names, merged, nonempty, strings
from ..linescan import (
    count_newlines,
    hex_digit,
    hex_run,
    is_digit,
    is_letter,
    is_space,
    line_end,
    skip_spaces,
)
from .events import event_kind

KIND_BLANK, KIND_INSN, KIND_MEM, KIND_REG, KIND_IDLE, KIND_EVENT, KIND_SLOW, KIND_LONG = range(8)
WORD_BYTES = 8  # the longest cycle word the scanner packs into MEM.word and IDLE.word
SUFFIXES = ("", "wait", "abort", "peek", "poke")
"""What an access line may end with, in parentheses (any case): `MEM.suffix` indexes it."""

LINE = np.dtype([("start", "<i8"), ("time", "<i8"), ("kind", "u1"), ("has_time", "?")], align=True)
"""One line: where it starts in the chunk, its KIND_* and its `T <time>` prefix (has_time False:
none). A last record holds only the start of the line after the chunk (its end)."""
INSN = np.dtype(
    [
        ("line", "<i8"), ("pc", "<u8"), ("opcode", "<u4"), ("dis_off", "<i4"), ("thumb", "?"),
        ("executed", "?"),
    ],
    align=True,
)  # fmt: skip
"""An instruction line: `line` index, pc, opcode (thumb: printed with 4 digits), executed (IT,
not IS) and where its disassembly starts in the disassembly buffer (the next record's offset
is its end)."""
MEM = np.dtype(
    [("line", "<i8"), ("addr", "<u8"), ("value", "<u8"), ("word", "<u8"), ("words", "u1"), ("suffix", "u1")],
    align=True,
)
"""An access line: `line` index, address, the data words' value (word0 | word1 << 32 for two),
how many data words were printed (none: a suffix only), its suffix (SUFFIXES) and the cycle
word's bytes, little-endian, zero-padded."""
IDLE = np.dtype([("line", "<i8"), ("word", "<u8"), ("text_off", "<i4")], align=True)
"""A line of a cycle word not followed by an access, as an idle or coprocessor cycle is: `line`
index, the word's bytes as in MEM and where the line's text (no-break spaces made spaces,
stripped) starts in the text buffer (the next record's offset is its end)."""
REG = np.dtype([("line", "<i8"), ("value", "<u8"), ("name_off", "<i4"), ("digits", "u1")], align=True)
"""A register of an `R` line (one line may give several): `line` index, value, how many hex
digits were printed and where its name starts in the name buffer (the next record's offset is
its end)."""
EVENT = np.dtype(
    [
        ("line", "<i8"), ("value", "<u8"), ("value1", "<u8"), ("number", "<u4"), ("text_off", "<i4"),
        ("name_off", "<i4"),
    ],
    align=True,
)  # fmt: skip
"""An event line: `line` index, its two words and number, and where its text (as IDLE's) and
its name (empty: none printed) start in their buffers (the next record's offsets are their
ends)."""
COUNTS = np.dtype([("insns", "<i8"), ("mems", "<i8"), ("regs", "<i8"), ("idles", "<i8"), ("events", "<i8")])
"""How many records of each kind the scanner has written."""


class Records(NamedTuple):
    """Where the scanner writes (one bundle through its compiled functions): the LINE, INSN,
    MEM, REG, IDLE and EVENT records, and the bytes of the disassembly, register names, idle
    lines' texts, event lines' texts and event names their offsets index."""

    lines: np.ndarray
    insns: np.ndarray
    mems: np.ndarray
    regs: np.ndarray
    idles: np.ndarray
    events: np.ndarray
    disasm: np.ndarray
    names: np.ndarray
    texts: np.ndarray
    event_texts: np.ndarray
    event_names: np.ndarray


# The bytes the scanner compares with.
_NBSP, _UTF8_NBSP_LEAD = 0xA0, 0xC2
_VT, _FF, _FILE_SEPARATOR, _UNIT_SEPARATOR = 0x0B, 0x0C, 0x1C, 0x1F
_I, _T, _S, _R, _C, _P, _M, _B, _E = (ord(letter) for letter in "ITSRCPMBE")
_X_LOWER, _X_UPPER, _EQUALS, _COMMA, _UNDERSCORE = ord("x"), ord("X"), ord("="), ord(","), ord("_")
_OPEN, _CLOSE, _LOWER_CASE = ord("("), ord(")"), 0x20
_SUFFIX_KEYS = tuple(int.from_bytes(suffix.encode(), "little") for suffix in SUFFIXES[1:])
_LONGEST_SUFFIX = max(len(suffix) for suffix in SUFFIXES)
_ZERO = ord("0")
_SPACE = ord(" ")


@numba.njit(cache=True)
def _name_char(c):
    return is_letter(c) or is_digit(c) or c == _UNDERSCORE


@numba.njit(cache=True)
def _normalised(d, s, e, out):
    """Line s..e copied into `out` with each no-break space a space: its length, or -1 for a
    line with a byte the line parser may read otherwise (not ASCII, a control character that
    Python's `str.split` takes for whitespace: VT, FF, 0x1C-0x1F, or NUL, which would pad a
    packed cycle word)."""
    n = 0
    k = s
    while k < e:
        c = d[k]
        if c == _UTF8_NBSP_LEAD and k + 1 < e and d[k + 1] == _NBSP:
            c = _SPACE
            k += 1
        elif c == _NBSP:  # a raw 0xA0, never a continuation here: the byte before was whole
            c = _SPACE
        elif c >= 0x80 or c in (0, _VT, _FF) or _FILE_SEPARATOR <= c <= _UNIT_SEPARATOR:
            return -1
        out[n] = c
        n += 1
        k += 1
    return n


@numba.njit(cache=True)
def _token_end(d, q, e):
    while q < e and not is_space(d[q]):
        q += 1
    return q


@numba.njit(cache=True)
def _hex_token(d, q, e, most):
    """A whitespace-ended token of 1 to `most` hex digits from q: (value, digits, end); digits 0
    when it is not one."""
    val, nd, r = hex_run(d, q, e)
    if nd == 0 or nd > most or (r < e and not is_space(d[r])):
        return 0, 0, r
    return val, nd, r


@numba.njit(cache=True)
def _registers(d, q, e, li, regs, nr, names, name_pos):
    """The `name=value` pairs from q to e (the line's end) into `regs` from record nr: the
    record count after them, or -1 if the rest is not such pairs with 16 digits at most."""
    while True:
        if q >= e or not is_letter(d[q]):
            return -1
        n0 = q
        while q < e and _name_char(d[q]):
            q += 1
        n1 = q
        q = skip_spaces(d, q, e)
        if q >= e or d[q] != _EQUALS:
            return -1
        q = skip_spaces(d, q + 1, e)
        if q + 2 < e and d[q] == _ZERO and d[q + 1] in (_X_LOWER, _X_UPPER) and hex_digit(d[q + 2]) >= 0:
            q += 2
        val, nd, q = hex_run(d, q, e)
        if nd == 0 or (q < e and hex_digit(d[q]) >= 0):  # none, or more than 16
            return -1
        reg = regs[nr]
        reg.line = li
        reg.value = val
        reg.digits = nd
        reg.name_off = name_pos
        for k in range(n0, n1):
            names[name_pos] = d[k]
            name_pos += 1
        nr += 1
        regs[nr].name_off = name_pos
        r = skip_spaces(d, q, e)
        if r < e and d[r] == _COMMA:
            r = skip_spaces(d, r + 1, e)
            if r == e:  # a trailing comma
                return nr
        elif r == q and r < e:  # no separator
            return -1
        if r == e:
            return nr
        q = r


@numba.njit(cache=True)
def _suffix(d, q, e):
    """The suffix token from q (`(wait)`, any case...): (its SUFFIXES index, 0 for none, and
    where the token ends)."""
    t = _token_end(d, q, e)
    if d[q] != _OPEN or d[t - 1] != _CLOSE or t - q - 2 > _LONGEST_SUFFIX:
        return 0, t
    key = 0
    for k in range(t - 2, q, -1):
        key = key << 8 | (d[k] | _LOWER_CASE)  # letters only match: case is bit 5
    for index, suffix in enumerate(_SUFFIX_KEYS):
        if key == suffix:
            return index + 1, t
    return 0, t


@numba.njit(cache=True)
def _access(d, q, e, mem):
    """The address, data words and suffix from q to e (the line's end) into `mem`: whether they
    are those of an access line, one or two data words (at most 8 digits each for two) and/or
    one suffix."""
    addr, nd, q = _hex_token(d, skip_spaces(d, q, e), e, 16)
    if nd == 0:
        return False
    q = skip_spaces(d, q, e)
    value, nd, r = _hex_token(d, q, e, 16)
    words = 0
    if nd:
        words = 1
        q = skip_spaces(d, r, e)
        if q < e and d[q] != _OPEN:
            high, nd_high, r = _hex_token(d, q, e, 8)
            if nd > 8 or nd_high == 0:
                return False
            value |= high << 32
            words = 2
            q = skip_spaces(d, r, e)
    suffix = 0
    if q < e:
        suffix, q = _suffix(d, q, e)
        if suffix == 0 or skip_spaces(d, q, e) != e:  # one suffix at most: more are the parser's
            return False
    if words == 0 and suffix == 0:
        return False
    mem.addr = addr
    mem.value = value
    mem.words = words
    mem.suffix = suffix
    return True


@numba.njit(cache=True)
def _copy(d, s, e, buf, at):
    """Bytes s..e of `d` into `buf` from `at`: the position after them."""
    for k in range(s, e):
        buf[at] = d[k]
        at += 1
    return at


@numba.njit(cache=True)
def _event(d, q, e, text_start, li, out, at):
    """The words, number and name of an event line from q to e (the line's end), the line's
    text from `text_start`, into the next EVENT record: whether they are an event's."""
    value, nd, q = _hex_token(d, skip_spaces(d, q, e), e, 16)
    if nd == 0:
        return False
    value1, nd, q = _hex_token(d, skip_spaces(d, q, e), e, 16)
    if nd == 0:
        return False
    number, nd, q = _hex_token(d, skip_spaces(d, q, e), e, 8)
    if nd == 0:
        return False
    event = out.events[at.events]
    event.line = li
    event.value = value
    event.value1 = value1
    event.number = number
    following = out.events[at.events + 1]
    following.text_off = _copy(d, text_start, e, out.event_texts, event.text_off)
    following.name_off = _copy(d, skip_spaces(d, q, e), e, out.event_names, event.name_off)
    at.events += 1
    return True


@numba.njit(cache=True)
def _line(d, e, li, line, out, at):
    """Line 0..e of `d` (no-break spaces made spaces) into `line` and the records of `out`,
    counted in `at` (a COUNTS record)."""
    while e > 0 and is_space(d[e - 1]):
        e -= 1
    first = p = skip_spaces(d, 0, e)
    if p == e:
        line.kind = KIND_BLANK
        return
    # -- optional "T <time>" ---------------------------------------------------------------
    if d[p] == _T and p + 1 < e and is_space(d[p + 1]):
        time, nd, q = _hex_token(d, skip_spaces(d, p + 1, e), e, 16)
        # time < 0: 16 digits from 8 on (2^63 or more) wrapped round; a bare time is a
        # timestamp event, left to the line parser
        if nd == 0 or time < 0 or q == e:
            return
        line.time = time
        line.has_time = True
        p = skip_spaces(d, q, e)
    w = _token_end(d, p, e)
    c0 = d[p]
    # -- instruction: IT or IS -------------------------------------------------------------
    if w - p == 2 and c0 == _I and d[p + 1] in (_T, _S):
        pc, nd, q = _hex_token(d, skip_spaces(d, w, e), e, 16)
        if nd == 0 or q == e:
            return
        opcode, nop, q = _hex_token(d, skip_spaces(d, q, e), e, 8)
        if nop != 4 and nop != 8:
            return
        insn = out.insns[at.insns]
        insn.line = li
        insn.pc = pc
        insn.opcode = opcode
        insn.thumb = nop == 4
        insn.executed = d[p + 1] == _T
        at.insns += 1
        out.insns[at.insns].dis_off = _copy(d, skip_spaces(d, q, e), e, out.disasm, insn.dis_off)
        line.kind = KIND_INSN
    # -- register: R or RCP ------------------------------------------------------------------
    elif (w - p == 1 and c0 == _R) or (w - p == 3 and c0 == _R and d[p + 1] == _C and d[p + 2] == _P):
        name_pos = out.regs[at.regs].name_off
        nr = _registers(d, skip_spaces(d, w, e), e, li, out.regs, at.regs, out.names, name_pos)
        if nr < 0:  # what the line wrote is overwritten by the next
            return
        at.regs = nr
        line.kind = KIND_REG
    # -- event: E ------------------------------------------------------------------------------
    elif w - p == 1 and c0 == _E:
        if _event(d, w, e, first, li, out, at):
            line.kind = KIND_EVENT
    # -- a cycle word: an access (address, data words, suffix), or an idle or coprocessor cycle --
    elif c0 in (_M, _B) and w - p <= WORD_BYTES:
        word = 0
        for k in range(w - 1, p - 1, -1):
            word = word << 8 | d[k]
        mem = out.mems[at.mems]
        if _access(d, w, e, mem):
            mem.line = li
            mem.word = word
            at.mems += 1
            line.kind = KIND_MEM
        else:  # the word decides (scanned_rows): an idle cycle's line, or the parser's to reject
            idle = out.idles[at.idles]
            idle.line = li
            idle.word = word
            at.idles += 1
            out.idles[at.idles].text_off = _copy(d, first, e, out.texts, idle.text_off)
            line.kind = KIND_IDLE


@numba.njit(nogil=True, cache=True)
def _scan(d, max_line, out, counts, text):
    """Fill the records of `out`, counted in `counts` (one COUNTS record); returns how many lines
    there are. `text` is room for one line (its no-break spaces made spaces)."""
    at = counts[0]
    n_data = d.shape[0]
    n_lines = 0
    s = 0
    while s < n_data:
        e = line_end(d, s, n_data)
        line = out.lines[n_lines]
        line.start = s
        line.kind = KIND_SLOW
        line.has_time = False
        line.time = 0
        if e - s > max_line:
            line.kind = KIND_LONG
        else:
            n = _normalised(d, s, e, text)
            if n >= 0:
                _line(text, n, n_lines, line, out, at)
        n_lines += 1
        s = e + 1
    out.lines[n_lines].start = n_data
    return n_lines


@dataclass
class Scan:
    """What the scanner found in one chunk (arrays trimmed to their counts)."""

    n_lines: int
    newlines: int  # the lines that end in the chunk (all, or all but an unfinished last)
    line_start: np.ndarray  # one more than the lines: the end of the last
    kind: np.ndarray
    time: np.ndarray
    has_time: np.ndarray
    insn: dict[str, np.ndarray]
    mem: dict[str, np.ndarray]
    reg: dict[str, np.ndarray]
    idle: dict[str, np.ndarray]
    event: dict[str, np.ndarray]


def scan_chunk(data: bytes | bytearray | memoryview, max_line: int) -> Scan:
    """Classify every line of `data` and extract the fields of the hot line shapes (lines longer
    than `max_line` bytes are only classified, KIND_LONG)."""
    d = np.frombuffer(data, dtype=np.uint8)
    d.flags.writeable = False  # one compiled signature, whether the chunk is bytes or a buffer
    newlines = count_newlines(d)
    cap = newlines + 1
    out = Records(
        lines=np.empty(cap + 1, LINE),
        insns=np.zeros(cap + 1, INSN),  # zeros: the first string offsets
        mems=np.empty(cap, MEM),
        regs=np.zeros(int(np.count_nonzero(d == ord("="))) + 1, REG),
        idles=np.zeros(cap + 1, IDLE),
        events=np.zeros(cap + 1, EVENT),
        disasm=np.empty(len(d), np.uint8),
        names=np.empty(len(d), np.uint8),
        texts=np.empty(len(d), np.uint8),
        event_texts=np.empty(len(d), np.uint8),
        event_names=np.empty(len(d), np.uint8),
    )
    counts = np.zeros(1, COUNTS)
    n_lines = _scan(d, max_line, out, counts, np.empty(min(len(d), max_line), np.uint8))
    ni, nm, nr, nidle, nevent = (int(counts[0][name]) for name in COUNTS.names)
    insn = {name: out.insns[name][:ni] for name in INSN.names}
    insn["dis_off"] = np.ascontiguousarray(out.insns["dis_off"][: ni + 1])  # string offsets: one more
    insn["dis_buf"] = out.disasm[: insn["dis_off"][-1]]
    reg = {name: out.regs[name][:nr] for name in REG.names}
    reg["name_off"] = np.ascontiguousarray(out.regs["name_off"][: nr + 1])
    reg["name_buf"] = out.names[: reg["name_off"][-1]]
    idle = {name: out.idles[name][:nidle] for name in IDLE.names}
    idle["text_off"] = np.ascontiguousarray(out.idles["text_off"][: nidle + 1])
    idle["text_buf"] = out.texts[: idle["text_off"][-1]]
    event = {name: out.events[name][:nevent] for name in EVENT.names}
    for offsets, buf in (("text_off", out.event_texts), ("name_off", out.event_names)):
        event[offsets] = np.ascontiguousarray(out.events[offsets][: nevent + 1])
        event[offsets.replace("_off", "_buf")] = buf[: event[offsets][-1]]
    mem = {name: out.mems[name][:nm] for name in MEM.names}
    line = out.lines[:n_lines]
    starts = out.lines["start"][: n_lines + 1]
    kind = line["kind"].copy()  # scanned_rows marks some access and idle lines SLOW
    return Scan(n_lines, newlines, starts, kind, line["time"], line["has_time"], insn, mem, reg, idle, event)


@dataclass(frozen=True)
class ScannedChunk:
    """What decoding keeps of a chunk's scan: the rows of the lines the scanner took, and the
    lines it left to the line parser (the scanner's records, several times the chunk's size,
    are freed while the chunks before are still being parsed)."""

    rows: Batch
    left: np.ndarray  # the left lines' indices in the chunk
    starts: np.ndarray  # where each left line starts in the chunk
    ends: np.ndarray  # where each ends (after its newline)
    long: np.ndarray  # whether each is longer than the line cap (KIND_LONG)
    newlines: int  # the lines that end in the chunk (all, or all but an unfinished last)


def scanned_chunk(data: bytes | bytearray | memoryview, max_line: int, cpu: int) -> ScannedChunk:
    """The rows of the lines of `data` the scanner takes, and the lines it leaves."""
    scan = scan_chunk(data, max_line)
    rows = scanned_rows(scan, cpu)
    left = np.flatnonzero(scan.kind >= KIND_SLOW)
    starts, ends = scan.line_start[left], scan.line_start[left + 1]
    return ScannedChunk(rows, left, starts, ends, scan.kind[left] == KIND_LONG, scan.newlines)


def scanned_rows(scan: Scan, cpu: int) -> Batch:
    """The rows of the lines the scanner understood, `src` the line's index in the chunk, seq
    null (fetch.py numbers them). An access line whose word is no cycle word that moves data,
    or whose two data words do not make an 8-byte access, and an idle line whose word is no
    idle or coprocessor cycle, are marked SLOW: the line parser reads them."""
    mem, cycles = _accesses(scan)
    idle, names = _idles(scan)
    tables: Batch = {}
    for name, f, columns_of in (
        ("instructions", scan.insn, _instruction_columns),
        ("registers", scan.reg, _register_columns),
        ("memory", mem, partial(_memory_columns, cycles=cycles)),
        ("events", idle, partial(_idle_columns, names=names)),
        ("events", scan.event, _event_columns),
    ):
        n = len(f["line"])
        values = {
            "time": pa.array(scan.time[f["line"]], pa.int64(), mask=~scan.has_time[f["line"]]),
            "cpu": pa.array(np.full(n, cpu, np.uint16)),
            "src": pa.array(f["line"], pa.int64()),
            **columns_of(f),
        }
        schema = SCHEMAS[name]
        arrays = [values[field.name] if field.name in values else pa.nulls(n, field.type) for field in schema]
        table = pa.Table.from_arrays(arrays, schema=schema)
        tables[name] = merged(tables[name], table) if name in tables else table
    return tables


def _cycle_words(packed: np.ndarray) -> tuple[list[CycleWord | None], np.ndarray]:
    """The meanings of the distinct packed cycle words (None: no cycle word), and which of them
    each of `packed` is."""
    keys, inverse = np.unique(packed, return_inverse=True)
    words = [key.to_bytes(WORD_BYTES, "little").rstrip(b"\0").decode() for key in keys.tolist()]
    return [parse_cycle_word(word) for word in words], inverse


def _kept(scan: Scan, f: dict[str, np.ndarray], ok: np.ndarray) -> dict[str, np.ndarray]:
    """The records `ok` of `f`; the lines of the others marked SLOW."""
    scan.kind[f["line"][~ok]] = KIND_SLOW
    return {name: values[ok] for name, values in f.items()}


def _accesses(scan: Scan) -> tuple[dict[str, np.ndarray], list[CycleWord]]:
    """The access records whose cycle word moves data, with `cycle` indexing the meanings of
    their words (the list returned); those of the other lines dropped, the lines marked SLOW."""
    f = scan.mem
    cycles, inverse = _cycle_words(f["word"])
    moves = np.array([cycle is not None and cycle.op != "" for cycle in cycles], bool)
    size = np.array([cycle.size if cycle is not None else 0 for cycle in cycles], np.uint8)
    ok = moves[inverse] & ((f["words"] != 2) | (size[inverse] == 8))
    kept = _kept(scan, f, ok)
    used, kept["cycle"] = np.unique(inverse[ok], return_inverse=True)
    return kept, [cycle for index in used.tolist() if (cycle := cycles[index]) is not None]  # all: `moves`


def _idles(scan: Scan) -> tuple[dict[str, np.ndarray], list[str]]:
    """The idle records whose word is an idle or coprocessor cycle, with `name` indexing their
    event names (the list returned); those of the other lines dropped, the lines marked SLOW."""
    f = {name: scan.idle[name] for name in ("line", "word")}
    cycles, inverse = _cycle_words(f["word"])
    idle = np.array([cycle is not None and cycle.op == "" for cycle in cycles], bool)
    ok = idle[inverse]
    texts = strings(scan.idle["text_off"], scan.idle["text_buf"]).filter(pa.array(ok))
    kept = _kept(scan, f, ok)
    used, kept["name"] = np.unique(inverse[ok], return_inverse=True)
    kept["text"] = texts
    return kept, [_idle_name(cycle) for index in used.tolist() if (cycle := cycles[index]) is not None]


def _idle_name(cycle: CycleWord) -> str:
    """The event name of an idle or coprocessor cycle (decoder.py's docstring)."""
    if "O" in cycle.flags:
        return "instruction_idle"
    return "coprocessor" if cycle.cycle == "C" else "idle"


def _idle_columns(f: dict[str, np.ndarray], names: list[str]) -> dict[str, pa.Array]:
    n = len(f["line"])
    return {
        "kind": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), ["signal"]),
        "name": pa.array(names, pa.string()).take(pa.array(f["name"].astype(np.int32))),
        "text": f["text"],
    }


def _event_columns(f: dict[str, np.ndarray]) -> dict[str, pa.Array]:
    numbers, number = np.unique(f["number"], return_inverse=True)
    meanings = [event_kind(value) for value in numbers.tolist()]
    indices = pa.array(number.astype(np.int32))
    kinds = pa.array([kind for kind, _ in meanings], pa.string()).dictionary_encode()
    names = pa.array([name for _, name in meanings], pa.string()).take(indices)
    return {
        "kind": kinds.take(indices),
        "number": pa.array(f["number"].astype(np.int64)),
        "name": pc.coalesce(nonempty(strings(f["name_off"], f["name_buf"])), names),
        "value": pa.array(f["value"], pa.uint64()),
        "value1": pa.array(f["value1"], pa.uint64()),
        "text": strings(f["text_off"], f["text_buf"]),
    }


def _instruction_columns(f: dict[str, np.ndarray]) -> dict[str, pa.Array]:
    thumb = f["thumb"]
    return {
        "pc": pa.array(f["pc"], pa.uint64()),
        "opcode": pa.array(f["opcode"], pa.uint32()),
        "size": pa.array(np.where(thumb, 2, 4).astype(np.uint8)),
        "isa": pa.DictionaryArray.from_arrays(pa.array(thumb.astype(np.int32)), ["A32", "T32"]),
        "executed": pa.array(f["executed"], pa.bool_()),
        "flags": pa.array(np.zeros(len(thumb), np.uint16)),
        "disasm": nonempty(strings(f["dis_off"], f["dis_buf"])),
    }


def _register_columns(f: dict[str, np.ndarray]) -> dict[str, pa.Array]:
    nbytes = (f["digits"].astype(np.uint16) + 1) // 2
    names = strings(f["name_off"], f["name_buf"]).dictionary_encode()
    return {
        "reg": canonical_names(names, nbytes),
        "size": pa.array(nbytes, pa.uint16()),
        "value": pa.array(f["value"], pa.uint64()),
    }


def _memory_columns(f: dict[str, np.ndarray], cycles: list[CycleWord]) -> dict[str, pa.Array]:
    cycle = f["cycle"]

    def coded(values: list[str]) -> pa.DictionaryArray:
        dictionary, index = np.unique(np.array(values, object), return_inverse=True)
        indices = pa.array(index[cycle].astype(np.int32))
        return pa.DictionaryArray.from_arrays(indices, pa.array(dictionary.tolist(), pa.string()))

    # attrs: the cycle type, flags and suffix, one string for each of their pairs
    pairs, pair = np.unique(cycle.astype(np.int64) * len(SUFFIXES) + f["suffix"], return_inverse=True)
    attrs = []
    for key in pairs.tolist():
        index, suffix = divmod(key, len(SUFFIXES))
        c = cycles[index]
        attrs.append(" ".join(filter(None, (c.cycle, c.flags, SUFFIXES[suffix]))) or None)
    return {
        "op": coded(["F" if c.fetch else c.op for c in cycles]),
        "source": coded(["bus" if c.bus else "core" for c in cycles]),
        "size": pa.array(np.array([c.size for c in cycles], np.uint8)[cycle]),
        "addr": pa.array(f["addr"], pa.uint64()),
        "value": pa.array(f["value"], pa.uint64(), mask=f["words"] == 0),
        "attrs": pa.array(attrs, pa.string()).take(pa.array(pair.astype(np.int32))),
    }
