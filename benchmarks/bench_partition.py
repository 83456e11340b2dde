"""One generated Tarmac (or ARMulator) trace, or a raw ETMv3 stream, ingested by today's single
process and split across local clusters of 1 and 2 workers (`cputrace ingest --workers N`);
wall and CPU time, peak memory.

    python benchmarks/bench_partition.py [--format tarmac|armulator|coresight] [--lines 20000000]
        [--etm-mib 64] [--workers 1 2] [--runs 2] [--part-mib 256]

The ETMv3 stream is source 0x10 of the TC2 snapshot's ETB buffer (../shared/data/tc2-etmv3),
its bytes taken out of the formatter frames, repeated to `--etm-mib` MiB, decoded with the
source's registers (its device file) and the snapshot's kernel image.

The single-process ingest is `cputrace ingest FILE -o STORE` in a fresh process (imports
included). A split ingest runs on a cluster started, and warmed by a small split ingest (each
worker loads its compiled code once), before the clock starts; its CPU time is that of the
workers' processes (every thread) and of the client over the ingest. The jobs run in turns,
`--runs` rounds, and the best round of each is reported, so that the load others put on the
machine falls on all of them alike. Also timed: the scan step alone (the format's
`count_range`, formats/tarmac/split.py, over the whole input in this process), the cost a
split adds (Tarmac and ARMulator; an ETMv3 split counts nothing before decoding, it
renumbers the parts after). Figures go to docs/benchmarks.md.
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
from cputrace.coresight.frames import Deformatter
from cputrace.formats import DecodeContext
from cputrace.inputs import InputFile

TC2 = Path(__file__).parents[2] / "shared" / "data" / "tc2-etmv3"
ETM_OPTIONS = {"buffer_format": "source_data", "etm_config": str(TC2 / "device_5.ini")}
"""Source 0x10 of the TC2 buffer as a raw stream: its registers from its device file."""
ETM_IMAGES = [f"{TC2 / 'kernel_dump.bin'}@0xC0008000"]


def etm_stream(mib: int) -> Path:
    """benchmarks/out/bench-etm-MIB.bin: TC2's source 0x10 as a raw stream, repeated to `mib`
    MiB, made once."""
    OUT.mkdir(exist_ok=True)
    stream = OUT / f"bench-etm-{mib}.bin"
    if not stream.exists():
        frames = (TC2 / "cstrace.bin").read_bytes()
        raw = bytes(Deformatter("coresight").feed(frames, 0, final=True)[0x10].data)
        stream.write_bytes(raw * ((mib << 20) // len(raw)))
    return stream


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _split(client, trace: Path, store: Path, part_bytes: int, given: dict) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of workers and client, parts) of one split ingest."""
    workers_before = sum(client.run(_cpu_seconds).values())
    client_before = _cpu_seconds()
    started = time.perf_counter()
    result = ingest_split(client, trace, store, part_bytes=part_bytes, **given)
    wall = time.perf_counter() - started
    cpu = sum(client.run(_cpu_seconds).values()) - workers_before + _cpu_seconds() - client_before
    return wall, cpu, result.manifest.get("parts", 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", choices=sorted(SPLITS), default="tarmac")
    parser.add_argument("--lines", type=int, default=20_000_000)
    parser.add_argument("--etm-mib", type=int, default=64)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--part-mib", type=int, default=256)
    args = parser.parse_args()
    etm = args.format == "coresight"
    trace = etm_stream(args.etm_mib) if etm else generated_trace(args.lines, args.format)
    small = etm_stream(1) if etm else generated_trace(100_000, args.format)
    given: dict = {"format": "coresight", "options": ETM_OPTIONS, "images": ETM_IMAGES} if etm else {}
    flags = ["--format", "coresight", "--buffer-format", "source_data",
             "--etm-config", ETM_OPTIONS["etm_config"], "--image", ETM_IMAGES[0]] if etm else []  # fmt: skip
    store = OUT / "bench-partition.ctrace"
    size = trace.stat().st_size
    length = f"{args.etm_mib} MiB raw ETMv3 stream" if etm else f"{args.lines:,} lines"
    print(f"{trace.name}: {length}, {size / 1e6:,.0f} MB, parts of {args.part_mib} MiB", flush=True)

    if not etm:
        started, before = time.perf_counter(), _cpu_seconds()
        count_range = importlib.import_module(SPLITS[args.format]).count_range
        counted = count_range(InputFile(trace), DecodeContext(), (0, size))
        took = f"{time.perf_counter() - started:.2f} s ({_cpu_seconds() - before:.2f} s CPU)"
        print(f"scan step alone: {took}, {counted.instructions:,} instructions", flush=True)

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
            ingest_split(client, small, OUT / "bench-partition-warm.ctrace", part_bytes=1 << 19, **given)
        for run in range(args.runs):
            print(f"round {run + 1}", flush=True)
            command = [sys.executable, "-m", "cputrace", "ingest", str(trace), "-o", str(store), *flags]
            single = run_measured(command)
            keep("single process", single.seconds, single.cpu_seconds, single.rss)
            for n, client in clients.items():
                wall, cpu, parts = _split(client, trace, store, args.part_mib << 20, given)
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
