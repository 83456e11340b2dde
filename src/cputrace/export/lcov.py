"""Coverage as an lcov tracefile (`.info`), the input of genhtml and most coverage services.

One record per source file: functions (FN/FNDA/FNF/FNH), branches (BRDA/BRF/BRH: for each
conditional branch instruction of a line, outcome 0 is taken and 1 not taken, `-` when the
branch never ran) and lines (DA/LF/LH). Code without line information is in the record of
the object-code listing (`Coverage.listing`), which genhtml shows once it is written out.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, TextIO

from ..analysis.coverage import Coverage
from .covdata import coverage_of

if TYPE_CHECKING:
    from .registry import ExportRequest


def write_lcov(coverage: Coverage, out: TextIO, test_name: str = "") -> None:
    functions = defaultdict(list)
    for function in coverage.functions():
        functions[function.file].append(function)
    lines = defaultdict(list)
    for line in coverage.lines():
        lines[line.file].append(line)
    for file in coverage.files:
        if file not in lines:
            continue
        out.write(f"TN:{_name(test_name)}\nSF:{file}\n")
        mine = functions.get(file, [])
        for f in mine:
            out.write(f"FN:{f.line},{f.name}\n")
        for f in mine:
            out.write(f"FNDA:{f.entries},{f.name}\n")
        out.write(f"FNF:{len(mine)}\nFNH:{sum(1 for f in mine if f.entries)}\n")
        found = hit = 0
        for line in lines[file]:
            for block, (taken, not_taken, reached) in enumerate(line.branches):
                for outcome, count in enumerate((taken, not_taken)):
                    out.write(f"BRDA:{line.line},{block},{outcome},{count if reached else '-'}\n")
                    found += 1
                    hit += count > 0
        out.write(f"BRF:{found}\nBRH:{hit}\n")
        for line in lines[file]:
            out.write(f"DA:{line.line},{line.hits}\n")
        out.write(f"LF:{len(lines[file])}\nLH:{sum(1 for line in lines[file] if line.hits)}\n")
        out.write("end_of_record\n")


def _name(test_name: str) -> str:
    """lcov test names are word characters only."""
    return "".join(c if c.isalnum() else "_" for c in test_name)


def write_lcov_file(request: ExportRequest) -> None:
    """The `lcov` exporter (needs --image)."""
    coverage = coverage_of(request)
    with open(request.output, "w") as out:
        write_lcov(coverage, out, request.trace.path.stem)
