"""One generated Tarmac (or ARMulator) trace ingested by today's single process and split
across local clusters of 1 and 2 workers (`cputrace ingest --workers N`); wall and CPU time,
peak memory.

    python benchmarks/bench_partition.py [--format tarmac|armulator] [--lines 20000000]
        [--workers 1 2] [--runs 2] [--part-mib 256]

The single-process ingest is `cputrace ingest FILE -o STORE` in a fresh process (imports
included). A split ingest runs on a cluster started, and warmed by a small split ingest (each
worker loads its compiled code once), before the clock starts; its CPU time is that of the
workers' processes (every thread) and of the client over the ingest. The jobs run in turns,
`--runs` rounds, and the best round of each is reported, so that the load others put on the
machine falls on all of them alike. Also timed: the scan step alone (the format's
`count_range`, formats/tarmac/split.py, over the whole input in this process), the cost a
split adds. Figures go to
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib
import resource
import shutil
import sys
import time
from pathlib import Path

from measure import OUT, generated_trace, run_measured

from cputrace.batch.cluster import connect
from cputrace.batch.partition import SPLITS, ingest_split
from cputrace.formats import DecodeContext
from cputrace.inputs import InputFile


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _split(client, trace: Path, store: Path, part_bytes: int) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of workers and client, parts) of one split ingest."""
    workers_before = sum(client.run(_cpu_seconds).values())
    client_before = _cpu_seconds()
    started = time.perf_counter()
    result = ingest_split(client, trace, store, part_bytes=part_bytes)
    wall = time.perf_counter() - started
    cpu = sum(client.run(_cpu_seconds).values()) - workers_before + _cpu_seconds() - client_before
    return wall, cpu, result.manifest.get("parts", 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", choices=sorted(SPLITS), default="tarmac")
    parser.add_argument("--lines", type=int, default=20_000_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--part-mib", type=int, default=256)
    args = parser.parse_args()
    trace = generated_trace(args.lines, args.format)
    small = generated_trace(100_000, args.format)
    store = OUT / "bench-partition.ctrace"
    size = trace.stat().st_size
    print(
        f"{trace.name}: {args.lines:,} lines, {size / 1e6:,.0f} MB, parts of {args.part_mib} MiB", flush=True
    )

    started, before = time.perf_counter(), _cpu_seconds()
    count_range = importlib.import_module(SPLITS[args.format]).count_range
    counted = count_range(InputFile(trace), DecodeContext(), (0, size))
    print(f"scan step alone: {time.perf_counter() - started:.2f} s ({_cpu_seconds() - before:.2f} s CPU), "
          f"{counted.instructions:,} instructions", flush=True)  # fmt: skip

    best: dict[str, tuple[float, float, int]] = {}

    def keep(name: str, wall: float, cpu: float, rss: int) -> None:
        print(f"  {name}: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss >> 20} MiB", flush=True)
        if name not in best or wall < best[name][0]:
            best[name] = (wall, cpu, rss)

    clusters = {n: connect(workers=n) for n in args.workers}
    clients = {n: cluster.__enter__() for n, cluster in clusters.items()}
    try:
        for n, client in clients.items():
            client.wait_for_workers(n)
            ingest_split(client, small, OUT / "bench-partition-warm.ctrace", part_bytes=1 << 20)
        for run in range(args.runs):
            print(f"round {run + 1}", flush=True)
            single = run_measured([sys.executable, "-m", "cputrace", "ingest", str(trace), "-o", str(store)])
            keep("single process", single.seconds, single.cpu_seconds, single.rss)
            for n, client in clients.items():
                wall, cpu, parts = _split(client, trace, store, args.part_mib << 20)
                keep(
                    f"{n} worker{'s' if n > 1 else ''}, {parts} parts",
                    wall,
                    cpu,
                    max(client.run(_peak_rss).values()),
                )
    finally:
        for cluster in clusters.values():
            cluster.__exit__(None, None, None)
        shutil.rmtree(store, ignore_errors=True)
        shutil.rmtree(OUT / "bench-partition-warm.ctrace", ignore_errors=True)
    base = best["single process"][0]
    print("\n| ingest | wall | CPU | vs single process | peak RSS (largest worker) |\n|---|---|---|---|---|")
    for name, (wall, cpu, rss) in best.items():
        print(f"| {name} | {wall:.2f} s | {cpu:.2f} s | {base / wall:.2f} | {rss >> 20} MiB |")


if __name__ == "__main__":
    main()
