"""Coverage as Cobertura XML (coverage-04.dtd), as CI services and IDE plug-ins read it.

The image is one package, each source file one class (the object-code listing too, for
code without line information), each function one method with its own lines. A line
with conditional branches says `condition-coverage="P% (covered/outcomes)"`, two
outcomes (taken, not taken) per branch.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, BinaryIO

from .. import __version__
from ..analysis.coverage import Coverage, LineCoverage
from .covdata import coverage_of

if TYPE_CHECKING:
    from .registry import ExportRequest

DOCTYPE = '<!DOCTYPE coverage SYSTEM "http://cobertura.sourceforge.net/xml/coverage-04.dtd">\n'


def _rate(covered: int, total: int) -> str:
    return f"{covered / total:.4f}" if total else "1"


def _branch_counts(lines: list[LineCoverage]) -> tuple[int, int]:
    outcomes = sum(2 * len(line.branches) for line in lines)
    covered = sum((t > 0) + (n > 0) for line in lines for t, n, _ in line.branches)
    return covered, outcomes


def _rates(element: ET.Element, lines: list[LineCoverage]) -> None:
    covered, outcomes = _branch_counts(lines)
    element.set("line-rate", _rate(sum(1 for line in lines if line.hits), len(lines)))
    element.set("branch-rate", _rate(covered, outcomes))
    element.set("complexity", "0")


def _lines(parent: ET.Element, lines: list[LineCoverage]) -> None:
    container = ET.SubElement(parent, "lines")
    for line in lines:
        attrs = {"number": str(line.line), "hits": str(line.hits), "branch": "false"}
        if line.branches:
            covered, outcomes = _branch_counts([line])
            attrs["branch"] = "true"
            attrs["condition-coverage"] = f"{100 * covered // outcomes}% ({covered}/{outcomes})"
        ET.SubElement(container, "line", attrs)


def write_cobertura(coverage: Coverage, out: BinaryIO) -> None:
    all_lines = coverage.lines()
    by_file: dict[str, list[LineCoverage]] = defaultdict(list)
    for line in all_lines:
        by_file[line.file].append(line)
    totals = coverage.totals()
    root = ET.Element(
        "coverage",
        {
            "lines-valid": str(totals.lines),
            "lines-covered": str(totals.lines_covered),
            "branches-valid": str(totals.branches),
            "branches-covered": str(totals.branches_covered),
            "version": f"cputrace {__version__}",
            "timestamp": str(int(time.time() * 1000)),
        },
    )
    _rates(root, all_lines)
    ET.SubElement(ET.SubElement(root, "sources"), "source").text = "."
    package = ET.SubElement(ET.SubElement(root, "packages"), "package", {"name": coverage.image_name})
    _rates(package, all_lines)
    classes = ET.SubElement(package, "classes")
    functions = defaultdict(list)
    for function in coverage.functions():
        functions[function.file].append(function)
    for file, lines in by_file.items():
        cls = ET.SubElement(classes, "class", {"name": PurePosixPath(file).stem or file, "filename": file})
        _rates(cls, lines)
        methods = ET.SubElement(cls, "methods")
        index = {line.line: line for line in lines}
        for function in functions.get(file, []):
            mine = [index[n] for n in function.lines]
            method = ET.SubElement(methods, "method", {"name": function.name, "signature": ""})
            _rates(method, mine)
            _lines(method, mine)
        _lines(cls, lines)
    ET.indent(root, " ")
    out.write(b'<?xml version="1.0" ?>\n')
    out.write(DOCTYPE.encode())
    out.write(ET.tostring(root, encoding="utf-8"))
    out.write(b"\n")


def write_cobertura_file(request: ExportRequest) -> None:
    """The `cobertura` exporter (needs --image)."""
    coverage = coverage_of(request)
    with open(request.output, "wb") as out:
        write_cobertura(coverage, out)
