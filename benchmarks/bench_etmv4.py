"""ETMv4 speed, packets to instructions: a snapshot decoded by cputrace and OpenCSD in turns.

    python benchmarks/bench_etmv4.py benchmarks/out/opencsd_etmv3 [--rounds 15] [--snapshot DIR]

The snapshot is bugfix-exact-match (../shared/data/opencsd-snapshots: 1 MiB of CoreSight
frames, one A72 source walking cc1 through 1.9 MB of dumps, 7,581,461 instructions).
cputrace: `decode_captures`, the whole path from buffer file to the batches of `instructions`
and `events` Arrow tables an `ingest` writes (frames, packets, ops, the walk, the rows), with
a fresh program image each run, so its code is decoded again, as OpenCSD's is. OpenCSD: the
program of benchmarks/reference (built as its README says) with `--with-etmv4`, a muted
decode to instruction-range elements, three runs a round (the last, warm, counts). Compiled
code is warmed up first; the first quartile and the median of the rounds are reported (the
machine's speed drifts, so only turns compare).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import time
from pathlib import Path

from cputrace.formats.base import DecodeContext
from cputrace.formats.etmv3.capture import open_captures
from cputrace.formats.etmv3.decoder import decode_captures

SNAPSHOT = Path(__file__).parents[2] / "shared" / "data" / "opencsd-snapshots" / "bugfix-exact-match"


def ours(snapshot: Path) -> tuple[float, int]:
    """Seconds to decode the snapshot's trace into instruction and event batches, and how many
    instructions."""
    start = time.perf_counter()
    count = 0
    for batch in decode_captures(open_captures(snapshot / "snapshot.ini"), DecodeContext(strict=False)):
        if "instructions" in batch:
            count += batch["instructions"].num_rows
    return time.perf_counter() - start, count


def theirs(program: Path, snapshot: Path) -> tuple[float, int]:
    """OpenCSD's time for the same snapshot (the last of three runs), and its instruction count."""
    run = subprocess.run([program, snapshot, "3", "--with-etmv4"], capture_output=True, text=True, check=True)
    runs = r"^run \d+:\s+([\d.]+) ms\s+\d+ instr-range elements\s+(\d+) instructions"
    found = re.findall(runs, run.stdout, re.M)
    if not found:
        raise SystemExit(f"{program}: unexpected output:\n{run.stdout}{run.stderr}")
    return float(found[-1][0]) / 1e3, int(found[-1][1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("reference", type=Path, help="the OpenCSD reference program")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--snapshot", type=Path, default=SNAPSHOT)
    args = parser.parse_args()
    ours(args.snapshot)  # compile and warm up
    times: dict[str, list[float]] = {"cputrace": [], "OpenCSD": []}
    counts = {}
    for _ in range(args.rounds):
        for name, work in (("cputrace", lambda: ours(args.snapshot)),
                           ("OpenCSD", lambda: theirs(args.reference, args.snapshot))):  # fmt: skip
            seconds, counts[name] = work()
            times[name].append(seconds)
    for name, runs in times.items():
        quartile, median = statistics.quantiles(runs, n=4)[0], statistics.median(runs)
        rate = counts[name] / median / 1e6
        print(f"{name:9} {quartile * 1e3:8.1f} ms first quartile, {median * 1e3:8.1f} ms median, "
              f"{counts[name]:,} instructions ({rate:.2f} M/s at the median)")  # fmt: skip


if __name__ == "__main__":
    main()
