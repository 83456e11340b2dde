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


def write_tarmac(trace: Trace, selection: pa.Table, out: TextIO) -> None:
    """Write the instructions in `selection` (ordered by seq) and everything that belongs to them."""
    unit = (trace.manifest.get("time") or {}).get("unit") or "clk"
    multicore = len(trace.manifest.get("cpus", [])) > 1
    for start in range(0, selection.num_rows, _BATCH):
        batch = selection.slice(start, _BATCH)
        trace.db.register("_selected", batch)
        try:
            related = {
                name: trace.sql(
                    f"SELECT * FROM {name} WHERE seq IN (SELECT seq FROM _selected) "
                    "ORDER BY seq, src"
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


def _instruction(r: dict[str, Any]) -> str:
    digits = 2 * (r["size"] or 4)
    opcode = "-" * digits if r["opcode"] is None else _hex(r["opcode"], digits)
    kw = "IT" if r["executed"] else "IS"
    addr = _hex(r["pc"], 8 if r["pc"] < 1 << 32 else 16)
    letter = ISA_LETTER.get(r["isa"] or "")
    if letter is None:
        return f"{kw} ({r['seq']}) {addr} {opcode} {r['disasm'] or ''}".rstrip()
    return f"{kw} ({r['seq']}) {addr} {opcode} {letter} {r['mode'] or ''} : {r['disasm'] or ''}".rstrip()


def _masked_hex(data: bytes, mask: bytes | None) -> str:
    """Bytes (little-endian) as big-endian hex, `--` for bytes the mask says were not written."""
    pairs = []
    for i in reversed(range(len(data))):
        written = mask is None or (mask[i // 8] >> (i % 8)) & 1
        pairs.append(f"{data[i]:02x}" if written else "--")
    return "".join(pairs)


def _register(r: dict[str, Any]) -> str:
    if r["wide"] is not None:
        return f"R {r['reg']} {_masked_hex(r['wide'], r['mask'])}"
    size = r["size"] or (4 if (r["value"] or 0) < 1 << 32 else 8)
    data = (r["value"] or 0).to_bytes(size, "little")
    return f"R {r['reg']} {_masked_hex(data, r['mask'])}"


def _memory(r: dict[str, Any]) -> str:
    size = r["size"]
    attrs = (r["attrs"] or "").split()
    if r["op"] == "U":
        word = f"MU{size}_{attrs[0] if attrs else 'SWP'}"
    elif r["source"] == "bus":
        word = f"B{'R' if r['op'] == 'F' else r['op']}{size}{'O' if r['op'] == 'F' else ''}"
    elif r["op"] == "F":
        word = f"MR{size}_I"
    else:
        word = f"M{r['op']}{size}" + "".join(a for a in attrs if a in ("X", "T", "L"))
    addr = _hex(r["addr"], 8 if r["addr"] < 1 << 32 else 16)
    if r["paddr"] is not None:
        addr += ":" + _hex(r["paddr"], 12)
    if "NS" in attrs:
        addr += "_NS"
    if "ABORTED" in attrs:
        data = "(ABORTED)"
    elif r["wide"] is not None:
        data = r["wide"][::-1].hex()
    elif r["value"] is None:
        data = "x" * (2 * size)
    else:
        data = _hex(r["value"], 2 * size)
    return f"{word} {addr} {data}"


def _event(r: dict[str, Any]) -> str | None:
    """Events keep their record's text (without time and core), so it is written as is."""
    return r["text"]
