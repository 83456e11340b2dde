"""The first run of each README command in a fresh environment: how long compiling takes.

    python benchmarks/first_run.py
    python benchmarks/first_run.py --only calls "export perfetto" --runs 2

numba compiles the hot paths on first use and caches the machine code (`cache=True`). Each
command here runs in a fresh process with an empty cache (NUMBA_CACHE_DIR pointing at a new
folder), after the steps it depends on (the ingest of its input, a recording) were run with a
warm cache of their own, so a figure is what that command compiles, as a user trying it
first sees it. Then it runs once more with its cache filled ("cached"). The commands run in
a scratch copy of examples/, tests/corpus/ and tests/data/ (the diff example also needs the
shared Tarmac samples in ../shared/data, the PTM and ETMv4 ingests two of the reference
decoder's snapshots there), with the given src/ folder as PYTHONPATH. Several
--src take turns case by case, so that they compare under the same load:

    python benchmarks/first_run.py --src before=../old/src --src after=src
"""

from __future__ import annotations

import argparse
import lzma
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

from measure import Measured, run_measured

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT.parent / "shared" / "data" / "tarmac-trace-utilities" / "samples"
FLOW = "calls-t32.flow.tarmac"
CALLS = "calls.tarmac"
QUICKSORT = "examples/quicksort.tarmac"
ELF = "examples/quicksort.elf"
COVERAGE = "tests/data/coverage/cov-a64"
FASTMODEL, GEM5 = "calculator-aarch64-fastmodel.tarmac", "calculator-aarch64-gem5.tarmac"
SNAPSHOTS = ROOT.parent / "shared" / "data" / "opencsd-snapshots"
SHARED = {
    FASTMODEL: SAMPLES / FASTMODEL, GEM5: SAMPLES / GEM5,
    "Snowball": SNAPSHOTS / "Snowball", "juno_r1_1": SNAPSHOTS / "juno_r1_1",
}  # fmt: skip
"""Inputs from ../shared/data, copied beside the others when they are there."""


class Case(NamedTuple):
    name: str
    command: tuple[str, ...]
    setup: tuple[tuple[str, ...], ...] = ()
    shared: tuple[str, ...] = ()  # the SHARED inputs it needs: without them it is not run


INGESTED = (("ingest", QUICKSORT),)
T32_ELF = "tests/corpus/calls-t32.elf"
RECORD_FLOW = ("record", T32_ELF, "--flow-only", "-o", FLOW)
CASES = (
    Case("ingest", ("ingest", QUICKSORT)),
    Case("info", ("info", f"{QUICKSORT}.ctrace"), INGESTED),
    Case("record --flow-only", RECORD_FLOW),
    Case("ingest flow-only --image", ("ingest", FLOW, "--image", T32_ELF), (RECORD_FLOW,)),
    Case(
        "ingest xscale --image",
        ("ingest", "tests/data/xscale/calls-armv5te-wrap.txt", "--image", "tests/corpus/calls-armv5te.elf"),
    ),
    Case("ingest etmv3", ("ingest", "tests/data/etmv3/tc2/snapshot.ini", "-o", "tc2.ctrace")),
    Case("etm packets", ("etm", "packets", "tests/data/etmv3/tc2", "--limit", "14")),
    Case("ingest ptm", ("ingest", "Snowball/snapshot.ini", "-o", "snowball.ctrace"), shared=("Snowball",)),
    Case("ingest etmv4", ("ingest", "juno_r1_1/snapshot.ini", "-o", "juno.ctrace"), shared=("juno_r1_1",)),
    Case("list", ("list", QUICKSORT, "--limit", "3"), INGESTED),
    Case("list --format tarmac", ("list", QUICKSORT, "--limit", "3", "--format", "tarmac"), INGESTED),
    Case("sql", ("sql", QUICKSORT, "SELECT reg, count(*) FROM registers GROUP BY reg"), INGESTED),
    Case(
        "state",
        ("state", "tests/data/state/indextest.tarmac", "--at", "2", "--mem", "0x10400", "0x18"),
        (("ingest", "tests/data/state/indextest.tarmac"),),
    ),
    Case(
        "diff",
        ("diff", FASTMODEL, GEM5, "--ignore-time", "--ignore-reg", "sp_*", "--ignore-reg", "cpsr"),
        (("ingest", FASTMODEL), ("ingest", GEM5)),
        shared=(FASTMODEL, GEM5),
    ),
    Case(
        "coverage",
        ("coverage", f"{COVERAGE}.tarmac", "--image", f"{COVERAGE}.elf", "--lcov", "cov.info"),
        (("ingest", f"{COVERAGE}.tarmac"),),
    ),
    Case("calls", ("calls", QUICKSORT, "--image", ELF), INGESTED),
    Case("calls --tree", ("calls", QUICKSORT, "--image", ELF, "--tree"), INGESTED),
    Case(
        "profile",
        ("profile", CALLS, "--image", "tests/corpus/calls-a64.elf", "--by", "functions", "--by", "mix"),
        (("record", "tests/corpus/calls-a64.elf", "-o", CALLS), ("ingest", CALLS)),
    ),
    Case("export perfetto", ("export", QUICKSORT, "--to", "perfetto", "-o", "q", "--image", ELF), INGESTED),
    Case("export folded", ("export", QUICKSORT, "--to", "folded", "-o", "q.txt", "--image", ELF), INGESTED),
    Case("export csv", ("export", QUICKSORT, "--to", "csv", "--table", "instructions", "-o", "q"), INGESTED),
    Case("record", ("record", "tests/corpus/calls-a64.elf", "-o", CALLS)),
)


def scratch_copy(where: Path) -> None:
    """The repository's example inputs (and the SHARED ones that are there) under `where`."""
    for folder in ("examples", "tests/corpus", "tests/data"):
        shutil.copytree(ROOT / folder, where / folder)
    dump = where / "tests/data/etmv3/tc2/kernel_dump.bin"
    dump.write_bytes(lzma.decompress(dump.with_name("kernel_dump.bin.xz").read_bytes()))
    for name, path in SHARED.items():
        if path.is_dir():
            shutil.copytree(path, where / name)
        elif path.exists():
            shutil.copy(path, where / name)


def run(args: tuple[str, ...], cache: Path, src: Path) -> Measured:
    os.environ["NUMBA_CACHE_DIR"] = str(cache)
    os.environ["PYTHONPATH"] = str(src)
    return run_measured([sys.executable, "-m", "cputrace", *args])


def source(text: str) -> tuple[str, Path]:
    """`LABEL=PATH` (or a PATH, labelled by itself): a cputrace `src` folder to measure."""
    label, equals, path = text.partition("=")
    return (label, Path(path).resolve()) if equals else (text, Path(text).resolve())


def shown(measured: Measured) -> str:
    return f"{measured.seconds:.1f} s ({measured.cpu_seconds:.1f} s CPU)"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="*", default=[], help="Cases to run, by name ('export perfetto').")
    parser.add_argument("--runs", type=int, default=1, help="First runs per case (least CPU time shown).")
    parser.add_argument(
        "--src", type=source, action="append", metavar="[LABEL=]PATH",
        help="cputrace sources to measure (repeatable: each case runs with each in turn; default this "
        "checkout's src/).",
    )  # fmt: skip
    args = parser.parse_args()
    sources = args.src or [("this checkout", ROOT / "src")]
    cases = [c for c in CASES if not args.only or c.name in args.only]
    labels = [label for label, _ in sources]
    print(f"| command | {' | '.join(f'{label}: first run' for label in labels)} | {labels[-1]}: cached |")
    print("|---|" + "---|" * (len(sources) + 1))
    with tempfile.TemporaryDirectory(prefix="cputrace-first-run-") as scratch:
        work = Path(scratch)
        scratch_copy(work / "inputs")
        os.chdir(work / "inputs")
        for case in cases:
            missing = [str(SHARED[name]) for name in case.shared if not (work / "inputs" / name).exists()]
            if missing:
                print(f"| {case.name} | (needs {', '.join(missing)}) |")
                continue
            firsts: dict[str, list[Measured]] = {label: [] for label in labels}
            for number in range(args.runs):
                for label, src in sources:
                    for step in case.setup:
                        run(step, work / f"warm-{label}", src)
                    cache = work / f"cache-{case.name.replace(' ', '_')}-{label}-{number}"
                    firsts[label].append(run(case.command, cache, src))
            cached = run(case.command, cache, sources[-1][1])
            best = [shown(min(firsts[label], key=lambda m: m.cpu_seconds)) for label in labels]
            print(f"| {case.name} | {' | '.join(best)} | {shown(cached)} |", flush=True)


if __name__ == "__main__":
    main()
