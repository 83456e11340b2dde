"""Writing a store back out as a Fast-Models-style Tarmac trace.

Every table's rows for the selected instructions are written in their input order (`seq`,
then `src`), so ingesting the output gives the same instructions, register writes, memory
accesses and events. This is what lets Tarmac tools read traces from any input format.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

import pyarrow as pa

if TYPE_CHECKING:
    from ..trace import Trace

ISA_LETTER = {"A32": "A", "T32": "T", "A64": "O", "T32EE": "X"}
_BATCH = 65536
_TARMAC_UNITS = {"cycles": "cyc"}  # units of other formats, as Tarmac spells them


def write_tarmac(trace: Trace, selection: pa.Table, out: TextIO) -> None:
    """Write the instructions in `selection` (ordered by seq) and everything that belongs to them."""
    unit = (trace.manifest.get("time") or {}).get("unit") or "clk"
    unit = _TARMAC_UNITS.get(unit, unit)
    multicore = len(trace.manifest.get("cpus", [])) > 1
    for start in range(0, selection.num_rows, _BATCH):
        batch = selection.slice(start, _BATCH)
        seqs = batch.column("seq")
        low, high = seqs[0].as_py(), seqs[-1].as_py()
        trace.db.register("_selected", batch)
        try:  # the range lets the scan skip row groups (seq only grows); IN keeps a --where exact
            related = {
                name: trace.sql(
                    f"SELECT * FROM {name} WHERE seq BETWEEN {low} AND {high} "
                    "AND seq IN (SELECT seq FROM _selected) ORDER BY seq, src"
                ).to_pylist()
                for name in ("registers", "memory", "events")
            }
        finally:
            trace.db.unregister("_selected")
        for line in _lines(batch.to_pylist(), related, unit, multicore):
            out.write(line)
            out.write("\n")


def _lines(
    insns: list[dict[str, Any]], related: dict[str, list[dict[str, Any]]], unit: str, multicore: bool
) -> Iterator[str]:
    """All records in input order: by seq, then by their position in the input."""
    entries: list[tuple[int, int, int, str]] = []
    for r in insns:
        entries.append((r["seq"], r["src"] or 0, 0, _prefix(r, unit, multicore) + _instruction(r)))
    for order, (name, fmt) in enumerate(
        (("memory", _memory), ("registers", _register), ("events", _event)), start=1
    ):
        for r in related[name]:
            line = fmt(r)
            if line is None:
                continue
            raw = name == "events" and (r["name"] is None or r["kind"] == "header")
            prefix = "" if raw else _prefix(r, unit, multicore)
            entries.append((r["seq"], r["src"] or 0, order, prefix + line))
    entries.sort(key=lambda e: (e[0], e[1], e[2]))
    for entry in entries:
        yield entry[3]


def _prefix(r: dict[str, Any], unit: str, multicore: bool) -> str:
    time = "" if r["time"] is None else f"{r['time']} {unit} "
    return time + (f"cpu{r['cpu']} " if multicore else "")


def _hex(value: int, digits: int) -> str:
    return f"{value:0{digits}x}"


def instruction_record(
    ident: int,
    pc: int,
    opcode: int | None,
    size: int | None,
    isa: str | None,
    mode: str | None,
    executed: bool,
    disasm: str | None,
) -> str:
    """`IT|IS (ident) addr opcode ISA mode : disasm`; `ident` is the tick count or seq."""
    digits = 2 * (size or 4)
    opcode_text = "-" * digits if opcode is None else _hex(opcode, digits)
    kw = "IT" if executed else "IS"
    addr = _hex(pc, 8 if pc < 1 << 32 else 16)
    letter = ISA_LETTER.get(isa or "")
    if letter is None:
        return f"{kw} ({ident}) {addr} {opcode_text} {disasm or ''}".rstrip()
    return f"{kw} ({ident}) {addr} {opcode_text} {letter} {mode or ''} : {disasm or ''}".rstrip()


def _instruction(r: dict[str, Any]) -> str:
    return instruction_record(
        r["seq"], r["pc"], r["opcode"], r["size"], r["isa"], r["mode"], r["executed"], r["disasm"]
    )


def _masked_hex(data: bytes, mask: bytes | None) -> str:
    """Bytes (little-endian) as big-endian hex, `--` for bytes the mask says were not written."""
    if mask is None:
        return data[::-1].hex()
    pairs = []
    for i in reversed(range(len(data))):
        written = mask is None or (mask[i // 8] >> (i % 8)) & 1
        pairs.append(f"{data[i]:02x}" if written else "--")
    return "".join(pairs)


def register_record(reg: str, data: bytes, mask: bytes | None = None) -> str:
    """`R name value`: `data` little-endian, printed big-endian with `--` for unwritten bytes."""
    return f"R {reg} {_masked_hex(data, mask)}"


def _register(r: dict[str, Any]) -> str:
    if r["wide"] is not None:
        return register_record(r["reg"], r["wide"], r["mask"])
    size = r["size"] or (4 if (r["value"] or 0) < 1 << 32 else 8)
    return register_record(r["reg"], (r["value"] or 0).to_bytes(size, "little"), r["mask"])


def memory_record(
    op: str,
    size: int,
    addr: int,
    value: int | None,
    *,
    source: str = "core",
    paddr: int | None = None,
    attrs: str | None = None,
    wide: bytes | None = None,
) -> str:
    """A memory access in the record syntax its op and source call for (MR/MW/MU/B...)."""
    attr_list = (attrs or "").split()
    if op == "U":
        word = f"MU{size}_{attr_list[0] if attr_list else 'SWP'}"
    elif source == "bus":
        word = f"B{'R' if op == 'F' else op}{size}{'O' if op == 'F' else ''}"
    elif op == "F":
        word = f"MR{size}_I"
    else:
        word = f"M{op}{size}" + "".join(a for a in attr_list if a in ("X", "T", "L"))
    addr_text = _hex(addr, 8 if addr < 1 << 32 else 16)
    if paddr is not None:
        addr_text += ":" + _hex(paddr, 12)
    if "NS" in attr_list:
        addr_text += "_NS"
    if "ABORTED" in attr_list:
        data = "(ABORTED)"
    elif wide is not None:
        data = wide[::-1].hex()
    elif value is None:
        data = "x" * (2 * size)
    else:
        data = _hex(value, 2 * size)
    return f"{word} {addr_text} {data}"


def _memory(r: dict[str, Any]) -> str | None:
    if r["addr"] is None:  # an access whose address the input lacks (LEON ITB loads): Tarmac cannot say it
        return None
    return memory_record(
        r["op"], r["size"], r["addr"], r["value"],
        source=r["source"], paddr=r["paddr"], attrs=r["attrs"], wide=r["wide"],
    )  # fmt: skip


def _event(r: dict[str, Any]) -> str | None:
    """Events keep their record's text (without time and core), so it is written as is."""
    return r["text"]
