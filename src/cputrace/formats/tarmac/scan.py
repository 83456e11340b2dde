"""Compiled scanner for the Tarmac line shapes that make up nearly all of a large trace.

It recognises, in one pass over raw bytes and without the GIL:
- instruction lines `IT|IS (tick) vaddr[:paddr] opcode ISA mode : disasm` (Fast Models,
  gem5) and `ES (vaddr:opcode) ISA mode: [CCFAIL] disasm` (cycle models, RTL);
- register lines `R name value` with at most 64 bits of value;
- memory lines `MR<n>|MW<n>[XTL] vaddr[:paddr][_NS] data` with at most 64 bits of data;
each optionally preceded by `<time> <unit>` and `cpuN`. Every other line is marked SLOW and
parsed by `lines.TarmacLineParser`, which is the full grammar; so is every line whose numbers
may be out of range (more than 16 hex digits, a core above 65535) or whose mode or disassembly
is not ASCII: the scanner takes only what it can store exactly. Lines longer than the input's
line cap are marked LONG.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from ...inputs import MAX_LINE_BYTES
from ...model import Isa
from ...timeunits import COUNTING_UNITS, SECOND_EXPONENTS
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
from .grammar import MAX_CORE

KIND_BLANK, KIND_INSN, KIND_REG, KIND_MEM, KIND_SLOW, KIND_LONG = 0, 1, 2, 3, 4, 5
SCANNED_ACCESS_BYTES = 8  # the largest access whose value fits the scanner's 64 bits

TIME_UNITS = ("", *COUNTING_UNITS, *SECOND_EXPONENTS)
"""The time units the scanner reads, by code (0: none printed)."""

MEM_X, MEM_T, MEM_L, MEM_NS = 1, 2, 4, 8

LINE = np.dtype(
    [("start", "<i8"), ("time", "<i8"), ("cpu", "<i4"), ("kind", "u1"), ("tunit", "u1")], align=True
)
"""One line: where it starts in the chunk, its KIND_*, and its `<time> <unit>` (tunit 0: none;
else the index in TIME_UNITS) and `cpuN` (-1: none) prefixes. A last record holds only the
start of the line after the chunk (its end)."""
INSN = np.dtype(
    [
        ("line", "<i8"), ("pc", "<u8"), ("opcode", "<u4"), ("mode_off", "<i4"), ("dis_off", "<i4"),
        ("size", "u1"), ("isa", "i1"), ("executed", "?"), ("failed", "?"),
    ],
    align=True,
)  # fmt: skip
"""An instruction line: `line` index, pc, opcode (failed: a fetch that failed, printed as
dashes), size, isa (model.Isa), executed, and where its mode and disassembly start in the
text buffers (the next record's offsets are their ends)."""
REG = np.dtype([("line", "<i8"), ("value", "<u8"), ("name_off", "<i4"), ("nbytes", "u1")], align=True)
"""A register line: `line` index, value, its printed width in bytes and where its name starts
in the name buffer (the next record's offset is its end)."""
MEM = np.dtype(
    [
        ("line", "<i8"), ("addr", "<u8"), ("paddr", "<u8"), ("value", "<u8"), ("op", "u1"), ("size", "u1"),
        ("has_paddr", "?"), ("attr", "u1"),
    ],
    align=True,
)  # fmt: skip
"""A memory line: `line` index, op (0 read, 1 write), size in bytes, addresses, value and
MEM_* attributes."""

# The bytes the scanner compares with.
_OPEN, _CLOSE, _COLON, _COMMA, _DASH, _UNDERSCORE = ord("("), ord(")"), ord(":"), ord(","), ord("-"), ord("_")
_ZERO, _LOWER_A, _LOWER_Z = ord("0"), ord("a"), ord("z")
_UPPER_A, _UPPER_Z = ord("A"), ord("Z")
_I, _E, _T, _S, _R, _M, _W = ord("I"), ord("E"), ord("T"), ord("S"), ord("R"), ord("M"), ord("W")
_X, _L = ord("X"), ord("L")
_A32, _T32, _A64, _T32EE = (ord(letter) for letter in "ATOX")  # the ISA letters
_CPU = np.frombuffer(b"cpu", np.uint8)
_CCFAIL = np.frombuffer(b"CCFAIL", np.uint8)
_NS_SUFFIX = np.frombuffer(b"_NS", np.uint8)
_S_SUFFIX = np.frombuffer(b"_S", np.uint8)
_UNITS = np.zeros((len(TIME_UNITS), max(map(len, TIME_UNITS))), np.uint8)
for _code, _unit in enumerate(TIME_UNITS):
    _UNITS[_code, : len(_unit)] = np.frombuffer(_unit.encode(), np.uint8)
_UNIT_LENGTHS = np.array([len(unit) for unit in TIME_UNITS], np.int64)

# The helpers are plain compiled functions, as those of ..linescan (see there).


@numba.njit(cache=True)
def _lower(c):
    if _UPPER_A <= c <= _UPPER_Z:
        return c + (_LOWER_A - _UPPER_A)
    return c


@numba.njit(cache=True)
def _starts(d, q, e, word):
    """Whether the bytes from q (before e) begin with `word`."""
    if q + len(word) > e:
        return False
    k = 0
    while k < len(word) and d[q + k] == word[k]:
        k += 1
    return k == len(word)


@numba.njit(cache=True)
def _unit_code(d, a, b):
    """The index in TIME_UNITS of the unit in bytes a..b, 0 if it is none of them."""
    for code in range(1, len(_UNIT_LENGTHS)):
        if _UNIT_LENGTHS[code] == b - a and _starts(d, a, b, _UNITS[code, : b - a]):
            return code
    return 0


@numba.njit(cache=True)
def _hex_digits_end(d, q, e):
    """Past 1 to 16 hex digits from q, or -1 if there are none or more."""
    q0 = q
    while q < e and hex_digit(d[q]) >= 0:
        q += 1
    return q if 0 < q - q0 <= 16 else -1


@numba.njit(cache=True)
def _address_end(d, q, e):
    """Past an address's `_NS`/`_S` security suffix, if it has one."""
    if _starts(d, q, e, _NS_SUFFIX):
        return q + len(_NS_SUFFIX)
    if _starts(d, q, e, _S_SUFFIX):
        return q + len(_S_SUFFIX)
    return q


@numba.njit(cache=True)
def _ascii(d, a, b):
    """Whether bytes a..b are all ASCII (string fields stay valid UTF-8)."""
    k = a
    while k < b and d[k] < 128:
        k += 1
    return k == b


@numba.njit(cache=True)
def _value_token(d, q, e, colon_ok):
    """A whitespace-delimited hex value with `_` (and `:`) separators: (value, digits, end, ok)."""
    val = 0
    nd = 0
    ok = q < e
    while q < e and not is_space(d[q]):
        h = hex_digit(d[q])
        if h >= 0:
            val = val * 16 + h
            nd += 1
        elif d[q] != _UNDERSCORE and not (colon_ok and d[q] == _COLON):
            ok = False
            break
        q += 1
    return val, nd, q, ok


@numba.njit(nogil=True, cache=True)
def _scan(d, max_line, check_ascii, lines, insns, regs, mems, modes, disasm, names):
    """Fill LINE, INSN, REG and MEM records and the mode, disassembly and name text buffers;
    returns how many of each were written."""
    n_data = d.shape[0]
    n_lines = 0
    ni = 0
    nr = 0
    nm = 0
    mode_pos = 0
    dis_pos = 0
    name_pos = 0
    s = 0
    while s < n_data:
        e = line_end(d, s, n_data)
        li = n_lines
        line = lines[li]
        line.start = s
        n_lines += 1
        nxt = e + 1
        line.kind = KIND_SLOW
        line.cpu = -1
        line.tunit = 0
        line.time = 0
        if e - s > max_line:
            line.kind = KIND_LONG
            s = nxt
            continue
        p = skip_spaces(d, s, e)
        if p == e:
            line.kind = KIND_BLANK
            s = nxt
            continue
        # -- optional "<time> <unit>" -----------------------------------------------
        if is_digit(d[p]):
            q = p
            val = 0
            while q < e and is_digit(d[q]) and q - p < 18:
                val = val * 10 + (d[q] - _ZERO)
                q += 1
            r = skip_spaces(d, q, e)
            u0 = r
            while r < e and _LOWER_A <= d[r] <= _LOWER_Z:
                r += 1
            code = _unit_code(d, u0, r)
            if code == 0 or r >= e or not is_space(d[r]) or (q < e and is_digit(d[q])):
                s = nxt
                continue
            line.time = val
            line.tunit = code
            p = skip_spaces(d, r, e)
        # -- optional "cpuN" -------------------------------------------------------------
        if p + 3 < e and _starts(d, p, e, _CPU) and is_digit(d[p + 3]):
            q = p + 3
            c = 0
            while q < e and is_digit(d[q]) and c <= MAX_CORE:
                c = c * 10 + (d[q] - _ZERO)
                q += 1
            if q >= e or not is_space(d[q]) or c > MAX_CORE:
                s = nxt
                continue
            line.cpu = c
            p = skip_spaces(d, q, e)
        if p + 2 >= e:
            s = nxt
            continue
        c0 = d[p]
        c1 = d[p + 1]
        # -- instruction: IT, IS or ES -------------------------------------------------------
        if ((c0 == _I and c1 in (_T, _S)) or (c0 == _E and c1 == _S)) and is_space(d[p + 2]):
            es = c0 == _E
            q = skip_spaces(d, p + 2, e)
            if q >= e or d[q] != _OPEN:
                s = nxt
                continue
            q += 1
            if es:
                pc, nd, q = hex_run(d, q, e)
                if nd == 0 or q >= e or d[q] != _COLON:
                    s = nxt
                    continue
                q += 1
            else:
                while q < e and is_digit(d[q]):
                    q += 1
                if q >= e or d[q] != _CLOSE:
                    s = nxt
                    continue
                # a 17th digit is none of the characters allowed after an address: slow path
                pc, nd, q = hex_run(d, skip_spaces(d, q + 1, e), e)
                if nd == 0 or q >= e:
                    s = nxt
                    continue
                if d[q] == _COLON:  # ":paddr" (checked, not kept: instructions keep the virtual address)
                    q = _hex_digits_end(d, q + 1, e)
                    if q < 0:
                        s = nxt
                        continue
                q = _address_end(d, q, e)
                if q < e and d[q] == _COMMA:  # ",nextaddr": the second halfword's address
                    q = _hex_digits_end(d, q + 1, e)
                    if q < 0:
                        s = nxt
                        continue
                    q = _address_end(d, q, e)
                if q >= e or not is_space(d[q]):
                    s = nxt
                    continue
                q = skip_spaces(d, q, e)
            # opcode
            o0 = q
            op = 0
            fail = False
            if q + 8 <= e and d[q] == _DASH:
                while q < e and d[q] == _DASH:
                    q += 1
                fail = True
            else:
                while q < e and hex_digit(d[q]) >= 0:
                    op = op * 16 + hex_digit(d[q])
                    q += 1
            nop = q - o0
            if nop != 4 and nop != 8:
                s = nxt
                continue
            if es:
                if q >= e or d[q] != _CLOSE:
                    s = nxt
                    continue
                q += 1
            if q >= e or not is_space(d[q]):
                s = nxt
                continue
            q = skip_spaces(d, q, e)
            # ISA letter
            if q + 1 >= e or not is_space(d[q + 1]):
                s = nxt
                continue
            isa_c = d[q]
            if isa_c == _A32:
                isa = Isa.A32
                size = 4
            elif isa_c == _T32:
                isa = Isa.T32
                size = 2 if nop == 4 else 4
            elif isa_c == _A64:
                isa = Isa.A64
                size = 4
            elif isa_c == _T32EE:
                isa = Isa.T32EE
                size = 2 if nop == 4 else 4
            else:
                s = nxt
                continue
            q = skip_spaces(d, q + 1, e)
            # mode, then ':' (separate or attached)
            m0 = q
            while q < e and not is_space(d[q]):
                q += 1
            m1 = q
            if m1 > m0 and d[m1 - 1] == _COLON:
                m1 -= 1
            else:
                q = skip_spaces(d, q, e)
                if q >= e or d[q] != _COLON or (q + 1 < e and not is_space(d[q + 1])):
                    s = nxt
                    continue
                q += 1
            q = skip_spaces(d, q, e)
            executed = not (c0 == _I and c1 == _S)
            if _starts(d, q, e, _CCFAIL) and (q + len(_CCFAIL) == e or is_space(d[q + len(_CCFAIL)])):
                executed = False
                q = skip_spaces(d, q + len(_CCFAIL), e)
            t = e
            while t > q and is_space(d[t - 1]):
                t -= 1
            if check_ascii and not _ascii(d, m0, e):  # mode and disassembly: strings
                s = nxt
                continue
            insn = insns[ni]
            insn.line = li
            insn.pc = pc
            insn.opcode = op
            insn.size = size
            insn.isa = isa
            insn.executed = executed
            insn.failed = fail
            insn.mode_off = mode_pos
            for k in range(m0, m1):
                modes[mode_pos] = _lower(d[k])
                mode_pos += 1
            insn.dis_off = dis_pos
            for k in range(q, t):
                disasm[dis_pos] = d[k]
                dis_pos += 1
            ni += 1
            insns[ni].mode_off = mode_pos
            insns[ni].dis_off = dis_pos
            line.kind = KIND_INSN
        # -- register: R -----------------------------------------------------------------
        elif c0 == _R and is_space(c1):
            q = skip_spaces(d, p + 1, e)
            n0 = q
            while q < e and not is_space(d[q]):
                c = d[q]
                if not (is_digit(c) or is_letter(c) or c == _UNDERSCORE):
                    break
                q += 1
            n1 = q
            if n1 == n0 or q >= e or not is_space(d[q]):
                s = nxt
                continue
            val, nd, q, ok = _value_token(d, skip_spaces(d, q, e), e, True)
            if not ok or nd == 0 or nd > 16 or skip_spaces(d, q, e) != e:
                s = nxt
                continue
            reg = regs[nr]
            reg.line = li
            reg.value = val
            reg.nbytes = (nd + 1) // 2
            reg.name_off = name_pos
            for k in range(n0, n1):
                names[name_pos] = _lower(d[k])
                name_pos += 1
            nr += 1
            regs[nr].name_off = name_pos
            line.kind = KIND_REG
        # -- memory access: MR<n> or MW<n> ---------------------------------------------------
        elif c0 == _M and c1 in (_R, _W) and p + 2 < e and is_digit(d[p + 2]):
            q = p + 2
            size = 0
            while q < e and is_digit(d[q]) and size <= SCANNED_ACCESS_BYTES:
                size = size * 10 + (d[q] - _ZERO)
                q += 1
            attr = 0
            while q < e and not is_space(d[q]):
                if d[q] == _X:
                    attr |= MEM_X
                elif d[q] == _T:
                    attr |= MEM_T
                elif d[q] == _L:
                    attr |= MEM_L
                else:
                    break
                q += 1
            if size == 0 or size > SCANNED_ACCESS_BYTES or q >= e or not is_space(d[q]):
                s = nxt
                continue
            addr, nd, q = hex_run(d, skip_spaces(d, q, e), e)
            if nd == 0 or q >= e:
                s = nxt
                continue
            paddr = 0
            has_paddr = False
            if d[q] == _COLON:
                paddr, nd, q = hex_run(d, q + 1, e)
                has_paddr = nd > 0
            if _starts(d, q, e, _NS_SUFFIX):
                attr |= MEM_NS
                q += len(_NS_SUFFIX)
            elif _starts(d, q, e, _S_SUFFIX):
                q += len(_S_SUFFIX)
            if q >= e or not is_space(d[q]):
                s = nxt
                continue
            val, nd, q, ok = _value_token(d, skip_spaces(d, q, e), e, False)
            if not ok or nd == 0 or nd > 2 * size or skip_spaces(d, q, e) != e:
                s = nxt
                continue
            mem = mems[nm]
            mem.line = li
            mem.op = 1 if c1 == _W else 0
            mem.size = size
            mem.addr = addr
            mem.paddr = paddr
            mem.has_paddr = has_paddr
            mem.value = val
            mem.attr = attr
            nm += 1
            line.kind = KIND_MEM
        s = nxt
    lines[n_lines].start = n_data
    return n_lines, ni, nr, nm, mode_pos, dis_pos, name_pos


@dataclass
class Scan:
    """What the scanner found in one chunk (arrays trimmed to their counts)."""

    n_lines: int
    line_start: np.ndarray
    kind: np.ndarray
    time: np.ndarray
    tunit: np.ndarray
    cpu: np.ndarray
    insn: dict[str, np.ndarray]
    reg: dict[str, np.ndarray]
    mem: dict[str, np.ndarray]


def scan_chunk(data: bytes | bytearray | memoryview, max_line: int = MAX_LINE_BYTES) -> Scan:
    """Classify every line of `data` and extract the fields of the hot line shapes.

    Lines longer than `max_line` bytes are only classified (KIND_LONG). Modes and disassembly
    become strings: a chunk where any of them is not ASCII is scanned again, checking each
    instruction line and leaving those to the full grammar, which checks their UTF-8.
    """
    d = np.frombuffer(data, dtype=np.uint8)
    d.flags.writeable = False  # one compiled signature, whether the chunk is bytes or a buffer
    scan = _scanned(d, max_line, False)
    if scan.insn["mode_buf"].max(initial=0) >= 128 or scan.insn["dis_buf"].max(initial=0) >= 128:
        scan = _scanned(d, max_line, True)
    return scan


def _scanned(d: np.ndarray, max_line: int, check_ascii: bool) -> Scan:
    cap = count_newlines(d) + 1
    lines = np.empty(cap + 1, LINE)
    insns, regs, mems = np.zeros(cap + 1, INSN), np.zeros(cap + 1, REG), np.empty(cap, MEM)
    modes, disasm, names = (np.empty(len(d), np.uint8) for _ in range(3))
    n_lines, ni, nr, nm, n_mode, n_dis, n_name = _scan(
        d, max_line, check_ascii, lines, insns, regs, mems, modes, disasm, names
    )
    insn = {name: insns[name][:ni] for name in INSN.names}
    insn["mode_off"] = np.ascontiguousarray(insns["mode_off"][: ni + 1])  # string offsets: one more
    insn["dis_off"] = np.ascontiguousarray(insns["dis_off"][: ni + 1])
    insn["mode_buf"], insn["dis_buf"] = modes[:n_mode], disasm[:n_dis]
    reg = {name: regs[name][:nr] for name in REG.names}
    reg["name_off"] = np.ascontiguousarray(regs["name_off"][: nr + 1])
    reg["name_buf"] = names[:n_name]
    mem = {name: mems[name][:nm] for name in MEM.names}
    line = lines[:n_lines]
    starts = lines["start"][: n_lines + 1]
    return Scan(n_lines, starts, line["kind"], line["time"], line["tunit"], line["cpu"], insn, reg, mem)
