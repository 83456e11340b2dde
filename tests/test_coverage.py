"""Coverage: branch outcomes against an independent reading of the trace text, lcov, Cobertura."""

from __future__ import annotations

import io
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from elftools.elf.elffile import ELFFile
from paths import DATA, shared

import cputrace
from cputrace.analysis.coverage import Coverage, compute_coverage
from cputrace.cli import cli
from cputrace.export.cobertura import write_cobertura
from cputrace.export.lcov import write_lcov
from cputrace.image import load_elf
from cputrace.ingest import ingest
from cputrace.model import Isa

COV = DATA / "coverage"

_LINE = re.compile(r"\d+ clk (IT|IS) \(\d+\) ([0-9a-f]+) ([0-9a-f]+) \w \S+ : (\S+)\s*(.*)")
_CONDITIONS = "eq|ne|cs|cc|hs|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le"
_CONDITIONAL = re.compile(rf"b\.({_CONDITIONS})|b({_CONDITIONS})(\.[wn])?|cbn?z|tbn?z")
_TARGET = re.compile(r"(?:#|; )0x([0-9a-f]+)\s*$")


def outcomes_from_text(path: Path) -> dict[int, Counter]:
    """Taken / not-taken counts per conditional branch, read from the Tarmac text alone."""
    rows = []
    for line in path.read_text().splitlines():
        m = _LINE.match(line)
        if m:
            kind, pc, opcode, mnemonic, operands = m.groups()
            rows.append((kind == "IT", int(pc, 16), len(opcode) // 2, mnemonic, operands))
    counts: dict[int, Counter] = {}
    for (executed, pc, size, mnemonic, operands), following in zip(rows, [*rows[1:], None], strict=True):
        if not _CONDITIONAL.fullmatch(mnemonic.lower()):
            continue
        target = int(_TARGET.search(operands.lower()).group(1), 16)
        count = counts.setdefault(pc, Counter())
        if following is None:
            continue
        if executed and following[1] == target:
            count["taken"] += 1
        elif not executed or following[1] == pc + size:
            count["not taken"] += 1
    return counts


@pytest.fixture(scope="module")
def opened(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], cputrace.Trace]:
    """Ingest a trace once per module into a temporary store (not next to the test data)."""
    stores = tmp_path_factory.mktemp("coverage")
    cache: dict[Path, cputrace.Trace] = {}

    def open_trace(path: Path) -> cputrace.Trace:
        if path not in cache:
            cache[path] = cputrace.open(ingest([path], stores / f"{path.name}.ctrace").store)
        return cache[path]

    return open_trace


def _coverage(opened, trace: Path, elf: Path, **kwargs) -> Coverage:
    return compute_coverage(opened(trace), load_elf(elf), image_name=elf.name, **kwargs)


CASES = {
    "a64": lambda: (COV / "cov-a64.tarmac", COV / "cov-a64.elf"),
    "t32": lambda: (COV / "cov-t32.tarmac", COV / "cov-t32.elf"),
    "quicksort": lambda: (
        shared("tarmac-trace-utilities", "tests", "quicksort.tarmac"),
        DATA / "image" / "quicksort.elf",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_branch_outcomes_match_the_trace_text(opened, case: str) -> None:
    trace, elf = CASES[case]()
    coverage = _coverage(opened, trace, elf)
    expected = outcomes_from_text(trace)
    code = coverage.code
    branches = code.address[code.conditional_branch].tolist()
    assert set(expected) <= set(branches)  # every branch the trace shows is in the image
    assert len(expected) >= 3
    for address in branches:
        i = int(code.index_of([address])[0])
        want = expected.get(address, Counter())
        assert (coverage.taken[i], coverage.not_taken[i]) == (want["taken"], want["not taken"]), hex(address)


def test_functions_lines_and_totals_of_a_dwarf_program(opened) -> None:
    coverage = _coverage(opened, COV / "cov-a64.tarmac", COV / "cov-a64.elf")
    functions = {f.name: f for f in coverage.functions()}
    assert set(functions) == {"swap", "partition", "quicksort", "classify", "never_called", "leave", "_start"}
    assert functions["never_called"].covered == 0 and functions["never_called"].entries == 0
    assert functions["classify"].entries == 16  # called once per element
    assert functions["_start"].entries == 1
    assert all(f.file == "cov.c" for f in functions.values())
    source = (COV / "cov.c").read_text().splitlines()
    body = functions["never_called"].line  # two lines after the signature
    assert "int never_called(int x)" in source[body - 3]
    lines = {line.line: line for line in coverage.lines()}
    assert lines[functions["never_called"].line].hits == 0
    assert coverage.listing is None and coverage.outside == 0
    totals = coverage.totals()
    assert totals.functions == 7 and totals.functions_covered == 6
    assert totals.instructions == len(coverage.code) > totals.instructions_covered
    never = functions["never_called"]
    assert (never.address, never.address + never.size) in coverage.uncovered()


def test_thumb_code_is_decoded_as_thumb(opened) -> None:
    coverage = _coverage(opened, COV / "cov-t32.tarmac", COV / "cov-t32.elf")
    sizes = set(coverage.code.size.tolist())
    assert sizes == {2, 4}
    trace = opened(COV / "cov-t32.tarmac")
    executed = set(trace.sql("SELECT DISTINCT pc FROM instructions").column("pc").to_pylist())
    assert executed <= set(coverage.code.address.tolist())  # a sweep that lost sync would miss some
    assert coverage.outside == 0


def test_object_code_coverage_of_a_range(opened) -> None:
    trace, elf = CASES["quicksort"]()
    image = load_elf(elf)
    start = image.symbols.address_of("quicksort")
    coverage = compute_coverage(opened(trace), image, address_range=(start, 0x40))
    assert coverage.code.address.tolist() == list(range(start, start + 0x40, 4))
    assert coverage.listing is not None  # no DWARF: lines are listing lines
    listing = coverage.listing_text().splitlines()
    assert listing[0] == "quicksort:" and len(listing) == 17
    for i, address in enumerate(coverage.code.address.tolist()):
        assert listing[coverage.line[i] - 1].startswith(f"  {address:08x}:")


def parse_lcov(text: str) -> list[dict]:
    """Records of an lcov tracefile, checking each summary line against its details."""
    records = []
    record: dict = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "end_of_record":
            assert record["LF"] == len(record["DA"])
            assert record["LH"] == sum(1 for h in record["DA"].values() if h)
            assert record["FNF"] == len(record["FN"])
            assert record["FNH"] == sum(1 for h in record["FNDA"].values() if h)
            assert record["BRF"] == len(record["BRDA"])
            assert record["BRH"] == sum(1 for b in record["BRDA"] if b[3] not in ("-", "0"))
            assert set(record["FNDA"]) == set(record["FN"])
            records.append(record)
            record = {}
        elif key in ("TN", "SF"):
            record[key] = value
            record.update(DA={}, FN={}, FNDA={}, BRDA=[])
        elif key == "FN":
            number, name = value.split(",")
            record["FN"][name] = int(number)
        elif key == "FNDA":
            count, name = value.split(",")
            record["FNDA"][name] = int(count)
        elif key == "DA":
            number, hits = value.split(",")
            assert int(number) not in record["DA"]
            record["DA"][int(number)] = int(hits)
        elif key == "BRDA":
            record["BRDA"].append(tuple(value.split(",")))
        elif key in ("LF", "LH", "FNF", "FNH", "BRF", "BRH"):
            record[key] = int(value)
        else:
            raise AssertionError(f"unexpected lcov line {line!r}")
    assert not record
    return records


def test_lcov_matches_the_coverage(opened) -> None:
    coverage = _coverage(opened, COV / "cov-a64.tarmac", COV / "cov-a64.elf")
    out = io.StringIO()
    write_lcov(coverage, out, "cov a64")
    (record,) = parse_lcov(out.getvalue())
    totals = coverage.totals()
    assert record["TN"] == "cov_a64" and record["SF"] == "cov.c"
    assert (record["LF"], record["LH"]) == (totals.lines, totals.lines_covered)
    assert (record["FNF"], record["FNH"]) == (totals.functions, totals.functions_covered)
    assert (record["BRF"], record["BRH"]) == (totals.branches, totals.branches_covered)
    assert record["FNDA"]["classify"] == 16


def _check_cobertura(data: bytes, coverage: Coverage) -> ET.Element:
    root = ET.fromstring(data)
    totals = coverage.totals()
    assert root.tag == "coverage"
    assert int(root.get("lines-valid")) == totals.lines
    assert int(root.get("lines-covered")) == totals.lines_covered
    assert int(root.get("branches-valid")) == totals.branches
    assert int(root.get("branches-covered")) == totals.branches_covered
    for element in root.iter():  # the attributes coverage-04.dtd requires
        required = {
            "coverage": {"line-rate", "branch-rate", "version", "timestamp"},
            "package": {"name", "line-rate", "branch-rate", "complexity"},
            "class": {"name", "filename", "line-rate", "branch-rate", "complexity"},
            "method": {"name", "signature", "line-rate", "branch-rate"},
            "line": {"number", "hits"},
        }.get(element.tag, set())
        assert required <= set(element.attrib), element.tag
    lines = [line for cls in root.iter("class") for line in cls.find("lines")]
    assert len(lines) == totals.lines
    outcomes = 0
    for line in lines:
        if line.get("branch") == "true":
            m = re.fullmatch(r"(\d+)% \((\d+)/(\d+)\)", line.get("condition-coverage"))
            assert int(m.group(1)) == 100 * int(m.group(2)) // int(m.group(3))
            outcomes += int(m.group(3))
    assert outcomes == totals.branches
    return root


def test_cobertura_is_consistent(opened) -> None:
    coverage = _coverage(opened, COV / "cov-t32.tarmac", COV / "cov-t32.elf")
    out = io.BytesIO()
    write_cobertura(coverage, out)
    assert out.getvalue().startswith(b'<?xml version="1.0" ?>\n<!DOCTYPE coverage SYSTEM')
    root = _check_cobertura(out.getvalue(), coverage)
    methods = {m.get("name"): m for m in root.iter("method")}
    assert float(methods["never_called"].get("line-rate")) == 0
    assert float(methods["swap"].get("line-rate")) == 1


def test_cli_writes_reports_and_listing(tmp_path: Path, opened) -> None:
    trace, elf = CASES["quicksort"]()
    store = opened(trace).path  # a store: the command would otherwise make one beside the shared input
    lcov, xml = tmp_path / "qs.info", tmp_path / "qs.xml"
    result = CliRunner().invoke(
        cli, ["coverage", str(store), "--image", str(elf), "--lcov", str(lcov), "--cobertura", str(xml)]
    )
    assert result.exit_code == 0, result.output
    assert "branch outcomes │ 8       │ 8" in result.output
    listing = tmp_path / "qs.info.lst"
    (record,) = parse_lcov(lcov.read_text())
    assert record["SF"] == str(listing)
    listing_lines = listing.read_text().splitlines()
    assert all(listing_lines[n - 1].startswith("  0000") for n in record["DA"])
    root = ET.fromstring(xml.read_bytes())
    assert [c.get("filename") for c in root.iter("class")] == [str(listing)]
    if shutil.which("genhtml"):  # where lcov is installed, the report must render
        done = subprocess.run(
            ["genhtml", "--branch-coverage", "-o", str(tmp_path / "html"), str(lcov)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "html" / "index.html").is_file()
    missing = CliRunner().invoke(cli, ["coverage", str(trace)])
    assert missing.exit_code == 2


# -- images without symbols ------------------------------------------------------------------

_SHT_NULL = 0


def stripped(elf: Path, out: Path) -> Path:
    """A copy of `elf` as `strip` leaves it: no symbol table and no DWARF. Their section headers
    become unnamed SHT_NULL entries; code, data and the other sections stay where they were."""
    data = bytearray(elf.read_bytes())
    with elf.open("rb") as f:
        image = ELFFile(f)
        order = "<" if image.little_endian else ">"
        offset, entry = image["e_shoff"], image["e_shentsize"]
        for index, section in enumerate(image.iter_sections()):
            if section.name in (".symtab", ".strtab") or section.name.startswith(".debug"):
                struct.pack_into(f"{order}II", data, offset + index * entry, 0, _SHT_NULL)  # sh_name, sh_type
    out.write_bytes(bytes(data))
    return out


def _code_sections(elf: Path) -> list[tuple[int, int]]:
    with elf.open("rb") as f:
        return [
            (s["sh_addr"], s["sh_addr"] + s["sh_size"])
            for s in ELFFile(f).iter_sections()
            if s["sh_flags"] & 0x6 == 0x6 and s["sh_type"] == "SHT_PROGBITS"  # SHF_ALLOC | SHF_EXECINSTR
        ]


def test_a_stripped_image_is_covered_by_its_code_sections(opened, tmp_path: Path) -> None:
    """Every word of the executable sections is an A64 instruction; what ran is the trace's
    distinct pcs there, each as often as the trace has it; no functions, the listing for lines."""
    elf = stripped(COV / "cov-a64.elf", tmp_path / "cov-a64-stripped.elf")
    image = load_elf(elf)
    assert not len(image.symbols) and not image.lines.files
    trace = opened(COV / "cov-a64.tarmac")
    coverage = compute_coverage(trace, image, image_name=elf.name)
    sections = _code_sections(elf)
    assert coverage.code.address.tolist() == [a for lo, hi in sections for a in range(lo, hi, 4)]
    inside = " OR ".join(f"(pc >= {lo} AND pc < {hi})" for lo, hi in sections)
    counted = trace.sql(f"SELECT pc, count(*) AS n FROM instructions WHERE {inside} GROUP BY pc").to_pylist()
    assert {a: int(h) for a, h in zip(coverage.code.address.tolist(), coverage.hits, strict=True) if h} == {
        row["pc"]: row["n"] for row in counted
    }
    outside = trace.sql(f"SELECT count(*) AS n FROM instructions WHERE NOT ({inside})").column("n")[0].as_py()
    assert coverage.outside == outside
    assert coverage.functions() == [] and coverage.listing is not None
    with_symbols = _coverage(opened, COV / "cov-a64.tarmac", COV / "cov-a64.elf")
    assert coverage.totals().branches_covered == with_symbols.totals().branches_covered


def test_a_stripped_thumb_image_is_read_in_the_instruction_set_the_trace_ran(opened, tmp_path: Path) -> None:
    elf = stripped(COV / "cov-t32.elf", tmp_path / "cov-t32-stripped.elf")
    trace = opened(COV / "cov-t32.tarmac")
    coverage = compute_coverage(trace, load_elf(elf))
    assert set(coverage.code.isa.tolist()) == {Isa.T32}
    executed = set(trace.sql("SELECT DISTINCT pc FROM instructions").column("pc").to_pylist())
    assert executed <= set(coverage.code.address.tolist())  # a sweep out of step would miss some


@pytest.mark.parametrize("fmt", ["lcov", "cobertura"])
def test_reports_of_a_stripped_image(opened, tmp_path: Path, fmt: str) -> None:
    """`export --to lcov/cobertura` with a stripped image: object-code lines, one per instruction."""
    elf = stripped(COV / "cov-a64.elf", tmp_path / "s.elf")
    trace = opened(COV / "cov-a64.tarmac")
    out = tmp_path / f"report.{fmt}"
    command = ["export", str(trace.path), "--to", fmt, "--image", str(elf), "-o", str(out)]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 0, result.output
    coverage = compute_coverage(trace, load_elf(elf), listing=str(tmp_path / "report.lst"))
    listing = Path(f"{out}.lst").read_text().splitlines()
    instructions = [n for n, text in enumerate(listing, 1) if text.startswith("  ")]
    if fmt == "lcov":
        (record,) = parse_lcov(out.read_text())
        assert sorted(record["DA"]) == instructions and record["FN"] == {}
        assert record["LH"] == coverage.totals().instructions_covered
    else:
        root = _check_cobertura(out.read_bytes(), coverage)
        assert [int(line.get("number")) for line in root.find(".//class/lines")] == instructions


def test_an_image_cputrace_cannot_decode_is_a_clear_error(opened, tmp_path: Path) -> None:
    host = Path(sys.executable).resolve()
    if host.read_bytes()[:4] != b"\x7fELF" or load_elf(host).architecture.isas:
        pytest.skip("the host's programs are not ELF of an architecture cputrace does not decode")
    store = str(opened(COV / "cov-a64.tarmac").path)
    report = tmp_path / "x.info"
    for command in (["coverage", store], ["export", store, "--to", "lcov", "-o", str(report)]):
        result = CliRunner().invoke(cli, [*command, "--image", str(host)])
        assert result.exit_code == 1, result.output
        assert "code, which cputrace does not decode" in result.output
        assert not report.exists()


def test_an_empty_range_has_no_coverage_and_no_crash(opened) -> None:
    trace, elf = CASES["quicksort"]()
    coverage = compute_coverage(opened(trace), load_elf(elf), address_range=(0x100000, 0))
    assert len(coverage.code) == 0 and coverage.lines() == [] and coverage.totals().instructions == 0
