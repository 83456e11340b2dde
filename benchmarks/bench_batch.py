"""`cputrace batch` on local clusters of 1 and 2 workers: ingest of N traces, diff of N/2 pairs,
merged coverage of N recorded runs; wall time, speed-up, peak memory per worker.

    python benchmarks/bench_batch.py [--traces 8] [--lines 200000] [--workers 1 2]

Each job runs twice on its cluster and the second run is timed: the first pays each worker's
loading of compiled code, once per worker process (reported with the cluster's start).
Ingest and diff use N copies of a generated trace (gen_tarmac.py); coverage, N recordings of
tests/corpus/calls-a64.elf (it needs the program's image). Each job runs on a fresh cluster,
started before the clock starts (its start is reported apart), so every worker's peak resident
memory is the job's. The figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from measure import OUT, generated_trace

from cputrace.batch.cluster import connect
from cputrace.batch.coverage import merged_coverage
from cputrace.batch.diff import diff_pairs
from cputrace.batch.ingest import ingest_many
from cputrace.batch.tasks import Failed

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus"


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _timed(workers: int, job: Callable) -> tuple[float, float, int]:
    """(seconds to start the cluster and run the job once, seconds of the job run again, largest
    worker peak RSS) of `job(client)`: the second run is the steady state of a long-lived cluster."""
    started = time.perf_counter()
    with connect(workers=workers) as client:
        client.wait_for_workers(workers)
        cold = job(client)  # each worker loads its compiled code (numba's cache) in its first tasks
        warm = time.perf_counter()
        results = job(client)
        done = time.perf_counter()
        peaks = client.run(_peak_rss)
    failed = [r for r in [*cold, *results] if isinstance(r, Failed)]
    if failed:
        sys.exit(f"failed: {failed[0].message}")
    return warm - started, done - warm, max(peaks.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=8)
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    folder = OUT / f"batch-{args.traces}x{args.lines}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    source = generated_trace(args.lines)
    traces = []
    for n in range(args.traces):
        traces.append(folder / f"t{n}.tarmac")
        shutil.copy(source, traces[-1])
    pairs = list(zip(traces[: args.traces // 2], traces[args.traces // 2 :], strict=True))
    from cputrace.record import record

    runs = []
    for n in range(args.traces):
        runs.append(folder / f"calls-{n}.tarmac")
        record(CORPUS / "calls-a64.elf", runs[-1], max_insns=2_000 + n * 20_000 // args.traces)
    image = [str(CORPUS / "calls-a64.elf")]

    stores = folder / "stores"
    store_pairs = [(stores / f"{a.name}.ctrace", stores / f"{b.name}.ctrace") for a, b in pairs]
    jobs = {
        f"ingest {args.traces} x {args.lines:,} lines": lambda client: ingest_many(client, traces, stores),
        f"diff {len(pairs)} pairs (stores)": lambda client: diff_pairs(client, store_pairs),
        f"coverage of {args.traces} runs": lambda client: merged_coverage(client, runs, image).failed,
    }
    header = ("job", "workers", "start+1st s", "job s", "speed-up", "peak RSS/worker")
    print(f"{header[0]:<36} {header[1]:>7} {header[2]:>11} {header[3]:>8} {header[4]:>8} {header[5]:>16}")
    for name, job in jobs.items():
        first = None
        for workers in args.workers:
            start, seconds, rss = _timed(workers, job)
            first = first or seconds
            print(f"{name:<36} {workers:>7} {start:>11.1f} {seconds:>8.2f} {first / seconds:>8.2f} "
                  f"{rss / 2**20:>12.0f} MiB", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
