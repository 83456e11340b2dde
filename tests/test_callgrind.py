"""Callgrind export read by the real reader: callgrind_annotate's per-line, per-function and
per-call-site figures for recorded corpus programs, against the store's instructions, the
ELF's symbol table (pyelftools) and binutils' addr2line.

The programs run code of one file from another (crt0 calls main in calls.c; functions of
semihost.c run from calls.c), so a cost or call line read against the wrong file shows.
"""

from __future__ import annotations

import posixpath
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import test_calls
from elftools.elf.elffile import ELFFile

import cputrace
from cputrace.analysis.calls.log import Method
from cputrace.export.registry import EXPORTERS, ExportRequest
from cputrace.image import load_elf
from cputrace.ingest import ingest
from cputrace.record import record

CORPUS = Path(__file__).parent / "corpus"
ANNOTATE = shutil.which("callgrind_annotate")
ADDR2LINE = shutil.which("addr2line")
pytestmark = pytest.mark.skipif(
    not (ANNOTATE and ADDR2LINE), reason="needs callgrind_annotate (valgrind) and addr2line (binutils)"
)

# The call instructions (Arm ARM): (mask, value) of BL/BLX/BLR per instruction set, read from
# the opcodes as Tarmac records them (a 32-bit T32 instruction as first halfword << 16 | second).
_CALLS = {
    "A64": ((0xFC000000, 0x94000000), (0xFFFFFC1F, 0xD63F0000)),  # BL imm26, BLR Xn
    # BL (and BLX imm, its cond 0b1111 form), BLX imm, BLX Rm
    "A32": ((0x0F000000, 0x0B000000), (0xFE000000, 0xFA000000), (0x0FFFFFF0, 0x012FFF30)),
    "T32": ((0xF800D000, 0xF000D000), (0xF800D001, 0xF000C000), (0xFFFFFF87, 0x00004780)),
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Each corpus program recorded and ingested once."""
    done: dict[str, tuple[cputrace.Trace, Path]] = {}

    def get(program: str) -> tuple[cputrace.Trace, Path]:
        if program not in done:
            folder = tmp_path_factory.mktemp(program)
            elf = CORPUS / f"{program}.elf"
            tarmac = record(elf, folder / "trace.tarmac").trace
            done[program] = cputrace.open(ingest([tarmac], folder / "trace.ctrace").store), elf
        return done[program]

    return get


def _source_lines(elf: Path, addresses: list[int]) -> dict[int, tuple[str, int]]:
    """addr2line's (file, line) per address, paths normalised as DWARF joins them."""
    text = subprocess.run(
        [ADDR2LINE, "-e", str(elf), *(f"{a:#x}" for a in addresses)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    answer = {}
    for address, line in zip(addresses, text.splitlines(), strict=True):
        file, _, number = line.rpartition(":")
        number = number.split()[0]
        known = number != "?"  # no row in the line table (a linker's veneer): callgrind's ???, 0
        answer[address] = (posixpath.normpath(file), int(number)) if known else ("???", 0)
    return answer


def _function_symbols(elf: Path) -> list[tuple[int, str]]:
    """(entry, name) of the functions, by address: function symbols, and the global labels of
    code sections (an assembly `_start` has neither type nor size)."""
    with elf.open("rb") as f:
        image = ELFFile(f)
        symbols = []
        for s in image.get_section_by_name(".symtab").iter_symbols():
            kind, binding = s["st_info"]["type"], s["st_info"]["bind"]
            in_code = isinstance(s["st_shndx"], int) and image.get_section(s["st_shndx"])["sh_flags"] & 4
            if kind == "STT_FUNC" or (kind == "STT_NOTYPE" and binding == "STB_GLOBAL" and in_code):
                symbols.append((s["st_value"] & ~1, s.name))
        return sorted(symbols)


def _function_at(symbols: list[tuple[int, str]], address: int) -> str:
    return [name for start, name in symbols if start <= address][-1]


def _annotate(path: Path, *options: str) -> str:
    """callgrind_annotate's report; it must read every line (it warns of the ones it cannot)."""
    command = [ANNOTATE, "--show=Ir", "--show-percs=no", "--threshold=100", *options, str(path)]
    run = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "WARNING" not in run.stderr, run.stderr
    return run.stdout


def _function_totals(report: str, trace: cputrace.Trace) -> Counter:
    """Ir per `file:function` of callgrind_annotate's function table (which adds the object, the
    store's name, to the functions it first met under `fl=`)."""
    totals: Counter = Counter()
    for text in report.split("file:function")[1].split("\n\n")[0].splitlines()[2:]:
        cost, name = text.split(maxsplit=1)
        totals[name.removesuffix(f" [{trace.path.name}]")] += _number(cost)
    return totals


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _annotated_sources(report: str) -> tuple[Counter, Counter]:
    """callgrind_annotate's auto-annotated sources: Ir per (file, line), and calls per
    (file, line of the call, callee as file:function)."""
    costs: Counter = Counter()
    calls: Counter = Counter()
    file, line = None, 0
    lines = iter(report.splitlines())
    for text in lines:
        header = re.match(r"-- Auto-annotated source: (.*) \+ (.*)$", text)
        if header:
            file, line = header[2], 0
            next(lines), next(lines), next(lines)  # rule, event names, blank
            continue
        if text.startswith("-----"):
            file = None
        if file is None:
            continue
        marker = re.match(r"-- line (\d+) -+$", text)
        call = re.match(r"\s*([\d,]+)\s+=> (\S+) \((\d+)x\)$", text)
        if marker:
            line = int(marker[1]) - 1
        elif call:
            calls[file, line, call[2]] += int(call[3])
        else:
            line += 1
            cost = text.split()[0] if text.strip() else "."
            if cost != ".":
                costs[file, line] += _number(cost)
    return costs, calls


def _is_call(row: dict) -> bool:
    return row["executed"] is not False and any(row["opcode"] & m == v for m, v in _CALLS[row["isa"]])


@pytest.mark.parametrize(
    ("program", "method"),
    [
        ("calls-a64", Method.ISA),
        ("calls-a64", Method.AUTO),
        ("calls-a32", Method.ISA),
        ("calls-t32", Method.ISA),
    ],
)
def test_callgrind_annotate_reads_every_cost_and_call_where_it_ran(recorded, tmp_path, program, method):
    """Per-line costs are addr2line's lines of the executed instructions; every call is shown
    at the line of an executed call instruction to that callee; with instruction-semantics
    detection, at every one of them, and A64's function totals are the symbol table's."""
    trace, elf = recorded(program)
    path = tmp_path / "out.callgrind"
    EXPORTERS["callgrind"].load()(ExportRequest(trace, path, image=load_elf(elf), method=method))
    executed = trace.sql("SELECT pc, opcode, isa, executed FROM instructions ORDER BY seq").to_pylist()
    pcs = [row["pc"] for row in executed]
    symbols = _function_symbols(elf)
    entries = {start: name for start, name in symbols if not name.startswith("__")}  # not veneers
    where = _source_lines(elf, sorted(set(pcs) | set(entries)))

    sources = [f"--include={CORPUS}", f"--include={CORPUS / 'src'}", "--context=100000"]
    costs, calls = _annotated_sources(_annotate(path, "--auto=yes", *sources))
    assert costs == Counter(where[pc] for pc in pcs if where[pc][0] != "???")

    expected_calls: Counter = Counter()
    for i, row in enumerate(executed):
        if _is_call(row):
            target = next((r["pc"] for r in executed[i + 1 :] if r["pc"] in entries), None)
            if target is not None:
                file, line = where[row["pc"]]
                expected_calls[file, line, f"{where[target][0]}:{entries[target]}"] += 1
    if method is Method.ISA:
        assert calls == expected_calls
    else:
        assert calls and not calls - expected_calls  # the calls register writes show: some of them
    to_main = {key: n for key, n in calls.items() if key[2] == "src/calls.c:main"}
    assert to_main == {key: n for key, n in expected_calls.items() if key[2] == "src/calls.c:main"}
    boot = "crt0_a64.S" if program == "calls-a64" else "crt0_arm.S"
    assert [key[0] for key in to_main] == [boot]  # `bl main` in the start-up code (issue 18.7)

    if program == "calls-a64" and method is Method.ISA:
        functions = _function_totals(_annotate(path, "--auto=no"), trace)
        assert functions == Counter(f"{where[pc][0]}:{_function_at(symbols, pc)}" for pc in pcs)
        assert sum(functions.values()) == trace.manifest["counts"]["instructions"]


def test_two_cores_in_callgrind_annotate(tmp_path):
    """Two cores' functions are apart (`name [cpuN]`): their totals are each core's instructions."""
    both = tmp_path / "two.tarmac"
    test_calls.two_core_tarmac(both)
    trace = cputrace.open(ingest([both], tmp_path / "two.ctrace").store)
    path = tmp_path / "two.callgrind"
    image = load_elf(test_calls.IMAGES / "calculator-aarch64.elf")
    EXPORTERS["callgrind"].load()(ExportRequest(trace, path, image=image))
    per_core: Counter = Counter()
    for name, cost in _function_totals(_annotate(path, "--auto=no"), trace).items():
        per_core[int(re.search(r"\[cpu(\d+)\]$", name)[1])] += cost
    counted = trace.sql("SELECT cpu, count(*) AS n FROM instructions GROUP BY cpu").to_pylist()
    assert per_core == {row["cpu"]: row["n"] for row in counted} and len(per_core) == 2
