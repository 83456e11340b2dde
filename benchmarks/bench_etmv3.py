"""ETMv3 packet layer speed: CoreSight deformatting plus packet decoding of a real buffer.

    python benchmarks/bench_etmv3.py [--repeat 64] [--runs 5]

The TC2 snapshot's 32 KiB ETB buffer (../shared/data/tc2-etmv3) repeated `--repeat` times
(64: 2 MiB, the size the issue's reference figure uses) is written to benchmarks/out, then
read back through `PacketReader` (file reading, frames split by trace ID, the three ETMv3
sources decoded; packets are streamed in batches, as the instruction layer consumes them).
Compiled code is warmed up first; the best of `--runs` timings is reported, with the stages
on their own: deformatting alone, and packet decoding of in-memory source streams.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cputrace.coresight.frames import deformat
from cputrace.formats.etmv3 import PacketDecoder, PacketReader, open_captures

HERE = Path(__file__).parent
SNAPSHOT = HERE.parents[1] / "shared" / "data" / "tc2-etmv3"


def best(runs: int, work) -> tuple[float, int]:
    """Best wall time of `runs` calls of work(), and what the last call returned."""
    times = []
    result = 0
    for _ in range(runs):
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=64)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if not (SNAPSHOT / "cstrace.bin").exists():
        sys.exit(f"needs the TC2 snapshot in {SNAPSHOT}")
    buffer = (SNAPSHOT / "cstrace.bin").read_bytes() * args.repeat
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    path = out / f"tc2-etb-x{args.repeat}.bin"
    path.write_bytes(buffer)
    (capture,) = open_captures(SNAPSHOT)
    capture.path = path  # the same sources and registers, over the repeated buffer
    configs = {s.trace_id: s.config for s in capture.sources}

    def read_all() -> int:
        return sum(len(batch) for _, batch in PacketReader(capture))

    def deformat_only() -> int:
        return sum(len(s) for s in deformat(buffer)[0].values())

    streams = {i: s for i, s in deformat(buffer)[0].items() if i in configs}

    def decode_only() -> int:
        count = 0
        for trace_id, source in streams.items():
            decoder = PacketDecoder(configs[trace_id])
            count += sum(len(b) for b in decoder.feed(source.data, source.offsets, final=True))
        return count

    read_all()  # compile (or load the cached compiled code)
    seconds, packets = best(args.runs, read_all)
    frame_seconds, _ = best(args.runs, deformat_only)
    decode_seconds, _ = best(args.runs, decode_only)
    size = len(buffer)
    etm = sum(len(s) for s in streams.values())
    rows = [
        ("end to end (file, frames, packets)", seconds, size, packets),
        ("deformat alone", frame_seconds, size, None),
        (f"packet decode alone ({etm / 2**20:.2f} MiB of ETMv3)", decode_seconds, etm, packets),
    ]
    print(f"buffer: {size / 2**20:.2f} MiB ({args.repeat} x TC2 ETB), sources {sorted(configs)}")
    for label, took, volume, count in rows:
        rate = f", {count / took / 1e6:.1f} M packets/s" if count else ""
        print(f"{label:<45} {took * 1e3:7.1f} ms  {volume / took / 1e6:6.0f} MB/s{rate}")


if __name__ == "__main__":
    main()
