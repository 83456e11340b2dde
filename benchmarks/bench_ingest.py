"""Tarmac ingest speed, memory and store size, end to end, against a bare Python line loop.

    python benchmarks/bench_ingest.py --lines 5000000

Generates a Fast-Models-style AArch64 trace (gen_tarmac.py) unless it exists, warms the
compiled-code cache, then times `cputrace ingest` as a user runs it (a fresh process, imports
included) and reports lines/s, the ratio to `for line in open(f): pass`, peak resident memory
of the ingest process and the store's size relative to the text.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from measure import OUT, generated_trace, run_measured


def bare_loop_seconds(path: Path) -> float:
    start = time.perf_counter()
    with open(path) as f:
        for _ in f:
            pass
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=5_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    trace = generated_trace(args.lines)
    size = trace.stat().st_size
    store = OUT / "bench.ctrace"
    ingest = [sys.executable, "-m", "cputrace", "ingest", str(trace), "-o", str(store)]

    warm = generated_trace(1000)
    run_measured([sys.executable, "-m", "cputrace", "ingest", str(warm), "-o", str(OUT / "warm.ctrace")])

    bare = min(bare_loop_seconds(trace) for _ in range(args.runs))
    runs = [run_measured(ingest) for _ in range(args.runs)]
    seconds = min(r.seconds for r in runs)
    peak = max(r.rss for r in runs)
    stored = sum(p.stat().st_size for p in store.iterdir())
    print(f"trace            {args.lines:,} lines, {size / 1e6:,.1f} MB ({trace.name})")
    print(f"bare line loop   {bare:.2f} s ({args.lines / bare / 1e6:.2f} M lines/s)")
    print(f"cputrace ingest  {seconds:.2f} s end to end, best of {args.runs} "
          f"({args.lines / seconds / 1e6:.2f} M lines/s, {seconds / bare:.2f}x the bare loop)")
    print(f"peak RSS         {peak / 2**20:,.0f} MiB")
    print(f"store            {stored / 1e6:,.1f} MB ({stored / size:.3f} of the text)")
    shutil.rmtree(store)


if __name__ == "__main__":
    main()
