"""Callgrind profiles (KCachegrind, callgrind_annotate): self costs per instruction (and source
line with DWARF), and calls with their inclusive costs.

Events are `Ir` (instructions executed) and, when the trace has time, `Time` (trace time
units). Each instruction is charged to the function of the frame it ran in, as call
detection found it; call lines sum the callee frames entered from each call site. On
multi-core traces each function name carries its core (`main [cpu1]`).
"""

from __future__ import annotations

from typing import TextIO

import numpy as np
import pyarrow as pa

from .. import __version__
from ..image import Image
from ..image.symbols import function_names
from .calldata import call_sums
from .registry import ExportRequest


class _Names:
    """Callgrind's name compression: `(id) name` the first time, `(id)` after."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def __call__(self, name: str) -> str:
        known = self._ids.get(name)
        if known is not None:
            return f"({known})"
        self._ids[name] = len(self._ids) + 1
        return f"({len(self._ids)}) {name}"


class _Lines:
    """(file, line) per address from the image's DWARF line table, looked up once."""

    def __init__(self, image: Image | None, addresses: np.ndarray) -> None:
        self.enabled = image is not None and len(addresses) > 0
        self._at: dict[int, tuple[str, int]] = {}
        if not self.enabled or image is None:
            return
        distinct = np.unique(addresses)
        files, lines = image.lines.lines_for_many(distinct)
        names = image.lines.files
        self.enabled = bool((files >= 0).any())
        for address, file, line in zip(distinct.tolist(), files.tolist(), lines.tolist(), strict=True):
            self._at[address] = (names[file], line) if file >= 0 else ("???", 0)

    def at(self, address: int) -> tuple[str, int]:
        return self._at.get(address, ("???", 0))


def write_callgrind(request: ExportRequest) -> None:
    sums = call_sums(request, self_costs=True)
    costs = sums.self_costs()
    edges = sums.call_edges()
    timed = sums.has_time
    symbols = request.image.symbols if request.image is not None else None
    addresses = np.concatenate([costs.column("pc").to_numpy(), costs.column("function").to_numpy()])
    lines = _Lines(request.image, addresses)
    multicore = len(set(costs.column("cpu").to_pylist())) > 1
    functions = np.unique(
        np.concatenate([costs.column("function").to_numpy(), edges.column("callee").to_numpy()])
    )
    plain = dict(zip(functions.tolist(), function_names(functions, symbols), strict=True))

    def name(cpu: int, function: int) -> str:
        return f"{plain[function]} [cpu{cpu}]" if multicore else plain[function]

    with open(request.output, "w", encoding="utf-8") as out:
        out.write("# callgrind format\nversion: 1\n")
        out.write(f"creator: cputrace {__version__}\ncmd: {request.trace.path.name}\n")
        out.write(f"positions: instr{' line' if lines.enabled else ''}\n")
        out.write(f"events: Ir{' Time' if timed else ''}\n")
        totals = [int(pa.compute.sum(costs.column("count")).as_py() or 0)]
        if timed:
            totals.append(int(pa.compute.sum(costs.column("time")).as_py() or 0))
        out.write(f"summary: {' '.join(map(str, totals))}\n\n")
        out.write(f"ob={request.trace.path.name}\n")
        _write_functions(out, costs, edges, name, lines, timed)


def _position(address: int, lines: _Lines) -> str:
    return f"{address:#x} {lines.at(address)[1]}" if lines.enabled else f"{address:#x}"


class _FileSwitch:
    """The source file the next cost or call line is read against, switched only when it changes.

    `fl=` names a function's file, the file of its entry; `fi=` switches to another file inside
    the function (inlined code) and `fe=` back to the function's own. A call line's position is
    read against the current file too (the format's "source position of the call"), so the file
    is switched before call lines as well as before cost lines.
    """

    def __init__(self, out: TextIO, files: _Names) -> None:
        self._out = out
        self._files = files
        self._home = self._current = ""

    def start(self, file: str) -> None:
        self._out.write(f"fl={self._files(file)}\n")
        self._home = self._current = file

    def to(self, file: str) -> None:
        if file != self._current:
            key = "fe" if file == self._home else "fi"
            self._out.write(f"{key}={self._files(file)}\n")
            self._current = file


def _write_functions(out: TextIO, costs: pa.Table, edges: pa.Table, name, lines: _Lines, timed: bool) -> None:
    files = _Names()
    functions = _Names()
    switch = _FileSwitch(out, files)
    calls_by_caller: dict[tuple[int, int], list[dict]] = {}
    for edge in edges.to_pylist():
        calls_by_caller.setdefault((edge["cpu"], edge["caller"]), []).append(edge)
    cpu_column = costs.column("cpu").to_numpy()
    function_column = costs.column("function").to_numpy()
    pcs = costs.column("pc").to_numpy()
    counts = costs.column("count").to_numpy()
    times = costs.column("time").fill_null(0).to_numpy()
    keys = sorted(set(zip(cpu_column.tolist(), function_column.tolist(), strict=True)) | set(calls_by_caller))
    starts = {}
    for row, key in enumerate(zip(cpu_column.tolist(), function_column.tolist(), strict=True)):
        starts.setdefault(key, []).append(row)

    def file_of(address: int) -> str:
        return lines.at(address)[0] if lines.enabled else "???"

    for cpu, function in keys:
        switch.start(file_of(function))
        out.write(f"fn={functions(name(cpu, function))}\n")
        for row in starts.get((cpu, function), ()):
            address = int(pcs[row])
            switch.to(file_of(address))
            cost = f" {int(times[row])}" if timed else ""
            out.write(f"{_position(address, lines)} {int(counts[row])}{cost}\n")
        for edge in calls_by_caller.get((cpu, function), ()):
            callee = edge["callee"]
            site = edge["site"] if edge["site"] is not None else function
            switch.to(file_of(site))
            out.write(f"cfi={files(file_of(callee))}\ncfn={functions(name(cpu, callee))}\n")
            out.write(f"calls={edge['calls']} {_position(callee, lines)}\n")
            cost = f" {edge['time']}" if timed else ""
            out.write(f"{_position(site, lines)} {edge['insns']}{cost}\n")
        out.write("\n")
