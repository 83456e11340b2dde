"""State at a point on a large trace: index build once, then query latency; diff and VCD export.

    python benchmarks/bench_state.py --lines 20000000

Generates a Fast-Models-style AArch64 trace (gen_tarmac.py) and ingests it unless both
exist, removes the store's state index, then measures:
- `cputrace state STORE --at SEQ --mem ...` as a user runs it, first call (builds the
  index) and next calls (answer from it; the best of `--repeat`), wall and CPU time and
  peak RSS of the process;
- the library call behind it (`StateIndex.registers` + `memory` of a hot stack slot, an array
  element and untouched memory) at random points: median and worst latency;
- `cputrace diff STORE STORE` and `cputrace export STORE --to vcd` (both streamed), wall and
  CPU time, peak RSS and output size, unless --no-exports.

CPU time (user + system) is printed beside wall time: it is steadier on a shared machine.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

from measure import OUT, generated_trace, run_measured

import cputrace
from cputrace.analysis.state import StateIndex

HOT = 0xFFFE0  # the leaf function's stack slot: written every iteration
ARRAY = 0x100000  # the loop's array: each element written every 4096 iterations
UNTOUCHED = 0x200000


def prepared_store(lines: int) -> Path:
    trace = generated_trace(lines)
    store = OUT / f"bench-{lines}.ctrace"
    if not (store / "manifest.json").exists():
        run_measured([sys.executable, "-m", "cputrace", "ingest", str(trace), "-o", str(store)])
    return store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=20_000_000)
    parser.add_argument("--points", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5, help="Runs of the state command after the first.")
    parser.add_argument("--no-exports", action="store_true")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    store = prepared_store(args.lines)
    trace = cputrace.open(store)
    shutil.rmtree(trace.data / "index", ignore_errors=True)
    instructions = trace.manifest["counts"]["instructions"]
    middle = instructions // 2
    state = [
        sys.executable,
        "-m",
        "cputrace",
        "state",
        str(store),
        "--at",
        str(middle),
        "--mem",
        hex(HOT),
        "64",
    ]
    first = run_measured(state)
    second = min((run_measured(state) for _ in range(args.repeat)), key=lambda m: m.seconds)

    index = StateIndex.open(cputrace.open(store))
    rng = random.Random(1)
    latencies = []
    for seq in (rng.randrange(instructions) for _ in range(args.points)):
        start = time.perf_counter()
        index.registers(seq)
        for address in (HOT, ARRAY + 8 * rng.randrange(4096), UNTOUCHED):
            index.memory(seq, address, 64)
        latencies.append(time.perf_counter() - start)
    size = sum(p.stat().st_size for p in index.directory.iterdir())

    print(f"trace               {args.lines:,} lines, {instructions:,} instructions ({store.name})")
    mib = 2**20
    print(
        f"state, first call   {first.seconds:.2f} s end to end incl. index build "
        f"({first.cpu_seconds:.2f} s CPU), peak RSS {first.rss / mib:,.0f} MiB"
    )
    print(
        f"state, next calls   {second.seconds:.2f} s end to end, process start and imports included "
        f"({second.cpu_seconds:.2f} s CPU), peak RSS {second.rss / mib:,.0f} MiB"
    )
    print(
        f"state, library      median {statistics.median(latencies) * 1e3:.0f} ms, worst "
        f"{max(latencies) * 1e3:.0f} ms over {args.points} random points (registers + 3 x 64 bytes)"
    )
    print(f"state index         {size / 1e6:,.1f} MB")
    if args.no_exports:
        return
    vcd = OUT / "bench.vcd"
    command = [sys.executable, "-m", "cputrace"]
    for name, cmd, output in (
        ("diff (itself)", [*command, "diff", str(store), str(store)], None),
        ("export --to vcd", [*command, "export", str(store), "--to", "vcd", "-o", str(vcd)], vcd),
    ):
        run = run_measured(cmd)
        written = f", {output.stat().st_size / 1e6:,.0f} MB written" if output else ""
        print(
            f"{name:<19} {run.seconds:.2f} s end to end ({run.cpu_seconds:.2f} s CPU), "
            f"peak RSS {run.rss / mib:,.0f} MiB{written}"
        )
    vcd.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
