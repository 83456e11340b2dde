"""ETMv4 packet speed: a formatted buffer split by trace ID and made into packets, cputrace and
OpenCSD in turns.

    python benchmarks/bench_etmv4_packets.py benchmarks/out/opencsd_etmv4_packets [--rounds 21]

The buffer is bugfix-exact-match's (../shared/data/opencsd-snapshots, 1 MiB of CoreSight
frames, 687,741 ETMv4 packets of one source). cputrace: the whole buffer in memory,
deformatted (`coresight.frames.Deformatter`) and each ETMv4 source's bytes decoded by
`formats.etmv4.packets.PacketDecoder`, batches streamed as `cputrace etm packets` and the
instruction layer consume them. OpenCSD: the program of benchmarks/reference (built as its
comment says), the same buffer and registers, a packet processor per source and a counting
callback; it runs three times a round and its last (warm) run counts, as cputrace's code is
warm. Compiled code is warmed up first; the first quartile and the median of the rounds are
reported (the machine's speed drifts, so only turns compare).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import time
from pathlib import Path

from cputrace.coresight.frames import Deformatter
from cputrace.formats.coresight.capture import Capture, open_captures
from cputrace.formats.etmv4.config import Etmv4Config
from cputrace.formats.etmv4.packets import PacketDecoder

SNAPSHOT = Path(__file__).parents[2] / "shared" / "data" / "opencsd-snapshots" / "bugfix-exact-match"


def ours(capture: Capture, data: bytes) -> tuple[float, int]:
    """Seconds to deformat `data` and decode its ETMv4 sources' packets, and how many."""
    start = time.perf_counter()
    streams = Deformatter(capture.layout).feed(data, 0, final=True)
    count = 0
    for source in capture.sources:
        if source.trace_id in streams:
            stream = streams[source.trace_id]
            count += sum(len(b) for b in PacketDecoder(source.config).feed(stream.data, stream.offsets, True))
    return time.perf_counter() - start, count


def theirs(program: Path, capture: Capture) -> tuple[float, int]:
    """OpenCSD's time for the same buffer and sources (the last of three runs), and its packet
    count."""
    args = [
        f"{c.trace_id:x}:{c.trcconfigr:x}:{c.trcidr0:x}:{c.trcidr1:x}:{c.trcidr2:x}:{c.trcidr8:x}"
        for c in (s.config for s in capture.sources)
        if isinstance(c, Etmv4Config)
    ]
    run = subprocess.run([program, capture.path, "3", *args], capture_output=True, text=True, check=True)
    found = re.search(r"^run 3: ([\d.]+) ms, (\d+) packets", run.stdout, re.M)
    if found is None:
        raise SystemExit(f"{program}: unexpected output:\n{run.stdout}{run.stderr}")
    return float(found[1]) / 1e3, int(found[2])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("program", type=Path, help="benchmarks/out/opencsd_etmv4_packets")
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    (capture,) = open_captures(SNAPSHOT, {})
    data = capture.path.read_bytes()
    ours(capture, data)  # compile, or load the cached compiled code
    times: dict[str, list[float]] = {"cputrace": [], "OpenCSD": []}
    counts = {}
    for _ in range(args.rounds):
        for name, work in (
            ("cputrace", lambda: ours(capture, data)),
            ("OpenCSD", lambda: theirs(args.program, capture)),
        ):
            taken, counts[name] = work()
            times[name].append(taken)
    print(f"buffer: {capture.path} ({len(data):,} bytes); {args.rounds} turns each")
    print(f"{'':<10} {'packets':>9} {'first quartile':>28}  {'median':>28}")
    for name, taken in times.items():
        taken = sorted(taken)
        quartile, median = taken[len(taken) // 4], taken[len(taken) // 2]
        count = counts[name]
        print(
            f"{name:<10} {count:>9,} {quartile * 1e3:8.1f} ms {count / quartile / 1e6:6.2f} M packets/s"
            f"  {median * 1e3:8.1f} ms {count / median / 1e6:6.2f} M packets/s"
        )


if __name__ == "__main__":
    main()
