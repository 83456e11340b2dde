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
from .grammar import MAX_CORE

KIND_BLANK, KIND_INSN, KIND_REG, KIND_MEM, KIND_SLOW, KIND_LONG = 0, 1, 2, 3, 4, 5
SCANNED_ACCESS_BYTES = 8  # the largest access whose value fits the scanner's 64 bits

# Time units the scanner accepts (codes index TIME_UNITS); others go to the slow path.
TIME_UNITS = ("", "clk", "ns", "ps", "cs", "cyc", "tic")

# ISA codes follow model.Isa: A32=0, T32=1, A64=2, T32EE=3.
MEM_X, MEM_T, MEM_L, MEM_NS = 1, 2, 4, 8

# The helpers are plain compiled functions, which LLVM inlines into the scanner all the same:
# numba's own inlining (inline="always") made the scanner's first compilation three times as long.


@numba.njit(cache=True)
def _hex(c):
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


@numba.njit(cache=True)
def _space(c):
    return c == 32 or c == 9 or c == 13


@numba.njit(cache=True)
def _skip(d, p, e):
    while p < e and _space(d[p]):
        p += 1
    return p


@numba.njit(cache=True)
def _lower(c):
    if 65 <= c <= 90:
        return c + 32
    return c


@numba.njit(cache=True)
def _unit_code(d, a, b):
    n = b - a
    if n == 2:
        if d[a] == 110 and d[a + 1] == 115:  # ns
            return 2
        if d[a] == 112 and d[a + 1] == 115:  # ps
            return 3
        if d[a] == 99 and d[a + 1] == 115:  # cs
            return 4
    elif n == 3:
        if d[a] == 99 and d[a + 1] == 108 and d[a + 2] == 107:  # clk
            return 1
        if d[a] == 99 and d[a + 1] == 121 and d[a + 2] == 99:  # cyc
            return 5
        if d[a] == 116 and d[a + 1] == 105 and d[a + 2] == 99:  # tic
            return 6
    return 0


@numba.njit(cache=True)
def _hex_run(d, q, e):
    """Up to 16 hex digits from q: (value, digit count, position after them)."""
    val = 0
    nd = 0
    while q < e and _hex(d[q]) >= 0 and nd < 16:
        val = val * 16 + _hex(d[q])
        q += 1
        nd += 1
    return val, nd, q


@numba.njit(cache=True)
def _hex_digits_end(d, q, e):
    """Past 1 to 16 hex digits from q, or -1 if there are none or more."""
    q0 = q
    while q < e and _hex(d[q]) >= 0:
        q += 1
    return q if 0 < q - q0 <= 16 else -1


@numba.njit(cache=True)
def _address_end(d, q, e):
    """Past an address's `_NS`/`_S` security suffix, if it has one."""
    if q + 3 <= e and d[q] == 95 and d[q + 1] == 78 and d[q + 2] == 83:  # _NS
        return q + 3
    if q + 2 <= e and d[q] == 95 and d[q + 1] == 83:  # _S
        return q + 2
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
    while q < e and not _space(d[q]):
        h = _hex(d[q])
        if h >= 0:
            val = val * 16 + h
            nd += 1
        elif d[q] != 95 and not (colon_ok and d[q] == 58):
            ok = False
            break
        q += 1
    return val, nd, q, ok


@numba.njit(nogil=True, cache=True)
def _scan(
    d,
    max_line,
    check_ascii,
    line_start,
    kind,
    time,
    tunit,
    cpu,
    i_line,
    i_pc,
    i_opcode,
    i_size,
    i_isa,
    i_exec,
    i_fail,
    mode_off,
    mode_buf,
    dis_off,
    dis_buf,
    r_line,
    r_value,
    r_nbytes,
    name_off,
    name_buf,
    m_line,
    m_op,
    m_size,
    m_addr,
    m_paddr,
    m_has_paddr,
    m_value,
    m_attr,
):
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
        e = s
        while e < n_data and d[e] != 10:
            e += 1
        li = n_lines
        line_start[li] = s
        n_lines += 1
        nxt = e + 1
        kind[li] = KIND_SLOW
        cpu[li] = -1
        tunit[li] = 0
        time[li] = 0
        if e - s > max_line:
            kind[li] = KIND_LONG
            s = nxt
            continue
        p = _skip(d, s, e)
        if p == e:
            kind[li] = KIND_BLANK
            s = nxt
            continue
        # -- optional "<time> <unit>" -----------------------------------------------
        if 48 <= d[p] <= 57:
            q = p
            val = 0
            while q < e and 48 <= d[q] <= 57 and q - p < 18:
                val = val * 10 + (d[q] - 48)
                q += 1
            r = _skip(d, q, e)
            u0 = r
            while r < e and 97 <= d[r] <= 122:
                r += 1
            code = _unit_code(d, u0, r)
            if code == 0 or r >= e or not _space(d[r]) or (q < e and 48 <= d[q] <= 57):
                s = nxt
                continue
            time[li] = val
            tunit[li] = code
            p = _skip(d, r, e)
        # -- optional "cpuN" -------------------------------------------------------------
        if p + 3 < e and d[p] == 99 and d[p + 1] == 112 and d[p + 2] == 117 and 48 <= d[p + 3] <= 57:
            q = p + 3
            c = 0
            while q < e and 48 <= d[q] <= 57 and c <= MAX_CORE:
                c = c * 10 + (d[q] - 48)
                q += 1
            if q >= e or not _space(d[q]) or c > MAX_CORE:
                s = nxt
                continue
            cpu[li] = c
            p = _skip(d, q, e)
        if p + 2 >= e:
            s = nxt
            continue
        c0 = d[p]
        c1 = d[p + 1]
        # -- instruction -------------------------------------------------------------
        if ((c0 == 73 and (c1 == 84 or c1 == 83)) or (c0 == 69 and c1 == 83)) and _space(d[p + 2]):
            es = c0 == 69
            q = _skip(d, p + 2, e)
            if q >= e or d[q] != 40:  # '('
                s = nxt
                continue
            q += 1
            if es:
                pc, nd, q = _hex_run(d, q, e)
                if nd == 0 or q >= e or d[q] != 58:  # ':'
                    s = nxt
                    continue
                q += 1
            else:
                while q < e and 48 <= d[q] <= 57:
                    q += 1
                if q >= e or d[q] != 41:  # ')'
                    s = nxt
                    continue
                # a 17th digit is none of the characters allowed after an address: slow path
                pc, nd, q = _hex_run(d, _skip(d, q + 1, e), e)
                if nd == 0 or q >= e:
                    s = nxt
                    continue
                if d[q] == 58:  # ":paddr" (checked, not kept: instructions keep the virtual address)
                    q = _hex_digits_end(d, q + 1, e)
                    if q < 0:
                        s = nxt
                        continue
                q = _address_end(d, q, e)
                if q < e and d[q] == 44:  # ",nextaddr": the second halfword's address
                    q = _hex_digits_end(d, q + 1, e)
                    if q < 0:
                        s = nxt
                        continue
                    q = _address_end(d, q, e)
                if q >= e or not _space(d[q]):
                    s = nxt
                    continue
                q = _skip(d, q, e)
            # opcode
            o0 = q
            op = 0
            fail = False
            if q + 8 <= e and d[q] == 45:
                while q < e and d[q] == 45:
                    q += 1
                fail = True
            else:
                while q < e and _hex(d[q]) >= 0:
                    op = op * 16 + _hex(d[q])
                    q += 1
            nop = q - o0
            if nop != 4 and nop != 8:
                s = nxt
                continue
            if es:
                if q >= e or d[q] != 41:
                    s = nxt
                    continue
                q += 1
            if q >= e or not _space(d[q]):
                s = nxt
                continue
            q = _skip(d, q, e)
            # ISA letter
            if q + 1 >= e or not _space(d[q + 1]):
                s = nxt
                continue
            isa_c = d[q]
            if isa_c == 65:
                isa = 0
                size = 4
            elif isa_c == 84:
                isa = 1
                size = 2 if nop == 4 else 4
            elif isa_c == 79:
                isa = 2
                size = 4
            elif isa_c == 88:
                isa = 3
                size = 2 if nop == 4 else 4
            else:
                s = nxt
                continue
            q = _skip(d, q + 1, e)
            # mode, then ':' (separate or attached)
            m0 = q
            while q < e and not _space(d[q]):
                q += 1
            m1 = q
            if m1 > m0 and d[m1 - 1] == 58:
                m1 -= 1
            else:
                q = _skip(d, q, e)
                if q >= e or d[q] != 58 or (q + 1 < e and not _space(d[q + 1])):
                    s = nxt
                    continue
                q += 1
            q = _skip(d, q, e)
            executed = not (c0 == 73 and c1 == 83)
            if (
                q + 6 <= e
                and d[q] == 67
                and d[q + 1] == 67
                and d[q + 2] == 70
                and d[q + 3] == 65
                and d[q + 4] == 73
                and d[q + 5] == 76
                and (q + 6 == e or _space(d[q + 6]))
            ):
                executed = False
                q = _skip(d, q + 6, e)
            t = e
            while t > q and _space(d[t - 1]):
                t -= 1
            if check_ascii and not _ascii(d, m0, e):  # mode and disassembly: strings
                s = nxt
                continue
            i_line[ni] = li
            i_pc[ni] = pc
            i_opcode[ni] = op
            i_size[ni] = size
            i_isa[ni] = isa
            i_exec[ni] = executed
            i_fail[ni] = fail
            mode_off[ni] = mode_pos
            for k in range(m0, m1):
                mode_buf[mode_pos] = _lower(d[k])
                mode_pos += 1
            dis_off[ni] = dis_pos
            for k in range(q, t):
                dis_buf[dis_pos] = d[k]
                dis_pos += 1
            ni += 1
            mode_off[ni] = mode_pos
            dis_off[ni] = dis_pos
            kind[li] = KIND_INSN
        # -- register ------------------------------------------------------------------
        elif c0 == 82 and _space(c1):
            q = _skip(d, p + 1, e)
            n0 = q
            while q < e and not _space(d[q]):
                c = d[q]
                if not (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c == 95):
                    break
                q += 1
            n1 = q
            if n1 == n0 or q >= e or not _space(d[q]):
                s = nxt
                continue
            val, nd, q, ok = _value_token(d, _skip(d, q, e), e, True)
            if not ok or nd == 0 or nd > 16 or _skip(d, q, e) != e:
                s = nxt
                continue
            r_line[nr] = li
            r_value[nr] = val
            r_nbytes[nr] = (nd + 1) // 2
            name_off[nr] = name_pos
            for k in range(n0, n1):
                name_buf[name_pos] = _lower(d[k])
                name_pos += 1
            nr += 1
            name_off[nr] = name_pos
            kind[li] = KIND_REG
        # -- memory access -----------------------------------------------------------
        elif c0 == 77 and (c1 == 82 or c1 == 87) and p + 2 < e and 48 <= d[p + 2] <= 57:
            q = p + 2
            size = 0
            while q < e and 48 <= d[q] <= 57 and size <= SCANNED_ACCESS_BYTES:
                size = size * 10 + (d[q] - 48)
                q += 1
            attr = 0
            while q < e and not _space(d[q]):
                if d[q] == 88:
                    attr |= MEM_X
                elif d[q] == 84:
                    attr |= MEM_T
                elif d[q] == 76:
                    attr |= MEM_L
                else:
                    break
                q += 1
            if size == 0 or size > SCANNED_ACCESS_BYTES or q >= e or not _space(d[q]):
                s = nxt
                continue
            addr, nd, q = _hex_run(d, _skip(d, q, e), e)
            if nd == 0 or q >= e:
                s = nxt
                continue
            paddr = 0
            has_paddr = False
            if d[q] == 58:
                paddr, nd, q = _hex_run(d, q + 1, e)
                has_paddr = nd > 0
            if q + 3 <= e and d[q] == 95 and d[q + 1] == 78 and d[q + 2] == 83:  # _NS
                attr |= MEM_NS
                q += 3
            elif q + 2 <= e and d[q] == 95 and d[q + 1] == 83:  # _S
                q += 2
            if q >= e or not _space(d[q]):
                s = nxt
                continue
            val, nd, q, ok = _value_token(d, _skip(d, q, e), e, False)
            if not ok or nd == 0 or nd > 2 * size or _skip(d, q, e) != e:
                s = nxt
                continue
            m_line[nm] = li
            m_op[nm] = 1 if c1 == 87 else 0
            m_size[nm] = size
            m_addr[nm] = addr
            m_paddr[nm] = paddr
            m_has_paddr[nm] = has_paddr
            m_value[nm] = val
            m_attr[nm] = attr
            nm += 1
            kind[li] = KIND_MEM
        s = nxt
    line_start[n_lines] = n_data
    return n_lines, ni, nr, nm, mode_pos, dis_pos, name_pos


@numba.njit(nogil=True, cache=True)
def _count_newlines(d):
    n = 0
    for c in d:
        n += c == 10
    return n


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
    cap = _count_newlines(d) + 1
    n_bytes = len(d)
    line_start = np.empty(cap + 1, np.int64)
    kind = np.empty(cap, np.uint8)
    time = np.empty(cap, np.int64)
    tunit = np.empty(cap, np.uint8)
    cpu = np.empty(cap, np.int32)
    insn = {
        "line": np.empty(cap, np.int64),
        "pc": np.empty(cap, np.uint64),
        "opcode": np.empty(cap, np.uint32),
        "size": np.empty(cap, np.uint8),
        "isa": np.empty(cap, np.int8),
        "executed": np.empty(cap, np.bool_),
        "failed": np.empty(cap, np.bool_),
        "mode_off": np.zeros(cap + 1, np.int32),
        "mode_buf": np.empty(n_bytes, np.uint8),
        "dis_off": np.zeros(cap + 1, np.int32),
        "dis_buf": np.empty(n_bytes, np.uint8),
    }
    reg = {
        "line": np.empty(cap, np.int64),
        "value": np.empty(cap, np.uint64),
        "nbytes": np.empty(cap, np.uint8),
        "name_off": np.zeros(cap + 1, np.int32),
        "name_buf": np.empty(n_bytes, np.uint8),
    }
    mem = {
        "line": np.empty(cap, np.int64),
        "op": np.empty(cap, np.uint8),
        "size": np.empty(cap, np.uint8),
        "addr": np.empty(cap, np.uint64),
        "paddr": np.empty(cap, np.uint64),
        "has_paddr": np.empty(cap, np.bool_),
        "value": np.empty(cap, np.uint64),
        "attr": np.empty(cap, np.uint8),
    }
    n_lines, ni, nr, nm, n_mode, n_dis, n_name = _scan(
        d, max_line, check_ascii, line_start, kind, time, tunit, cpu,
        insn["line"], insn["pc"], insn["opcode"], insn["size"], insn["isa"],
        insn["executed"], insn["failed"], insn["mode_off"], insn["mode_buf"],
        insn["dis_off"], insn["dis_buf"],
        reg["line"], reg["value"], reg["nbytes"], reg["name_off"], reg["name_buf"],
        mem["line"], mem["op"], mem["size"], mem["addr"], mem["paddr"],
        mem["has_paddr"], mem["value"], mem["attr"],
    )  # fmt: skip
    for key in ("line", "pc", "opcode", "size", "isa", "executed", "failed"):
        insn[key] = insn[key][:ni]
    insn["mode_off"] = insn["mode_off"][: ni + 1]
    insn["dis_off"] = insn["dis_off"][: ni + 1]
    insn["mode_buf"] = insn["mode_buf"][:n_mode]
    insn["dis_buf"] = insn["dis_buf"][:n_dis]
    for key in ("line", "value", "nbytes"):
        reg[key] = reg[key][:nr]
    reg["name_off"] = reg["name_off"][: nr + 1]
    reg["name_buf"] = reg["name_buf"][:n_name]
    for key in mem:
        mem[key] = mem[key][:nm]
    return Scan(
        n_lines,
        line_start[: n_lines + 1],
        kind[:n_lines],
        time[:n_lines],
        tunit[:n_lines],
        cpu[:n_lines],
        insn,
        reg,
        mem,
    )
