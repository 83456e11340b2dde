"""ETMv3 and PTM speed: packets, and instructions from buffer to store, of a real buffer.

    python benchmarks/bench_etmv3.py [--repeat 64] [--runs 5] [--steady 8]
    python benchmarks/bench_etmv3.py --reference benchmarks/out/opencsd_coresight [--rounds 15]
        [--snapshot DIR] [--source TRACE_ID]...

The TC2 snapshot's 32 KiB ETB buffer (../shared/data/tc2-etmv3) repeated `--repeat` times
(64: 2 MiB, the size the issue's reference figure uses) is written to benchmarks/out, then
read back through `PacketReader` (file reading, frames split by trace ID, the three ETMv3
sources and the PTM source decoded; packets are streamed in batches, as the instruction layer
consumes them).
Compiled code is warmed up first; the best of `--runs` timings is reported, with the stages
on their own: deformatting alone, and packet decoding of in-memory source streams.

Instructions: the same buffer decoded into instruction and event batches (packets, ops, the
walk through the kernel image, Arrow tables), once with the kernel code already decoded
(the steady state of a long trace) and once from scratch (the first decode of each
instruction goes through capstone); those rows written to a store on one thread (what the
writing thread of an `ingest` has to do); a whole `ingest` of a snapshot whose buffer is
the repeated one, to a Parquet store; then, with the buffer repeated `--steady` times more
(the fixed cost of decoding the program spread over more trace), from scratch to rows and
to a store. These lines give the median of the runs too: on a shared machine the best run
and the typical one can be a third apart.

With `--reference`, the OpenCSD program of benchmarks/reference (built as its README says)
and cputrace take turns, `--rounds` times, on the repeated buffer (or on the snapshot folder
given by `--snapshot`, as it is: an ETMv4 or PTM one of ../shared/data/opencsd-snapshots):
muted OpenCSD decodes of the snapshot to instructions, of every source and of each `--source`
alone (TC2's PTM source 0x13 by default); cputrace's buffer to instruction rows in this
process of the same, with a fresh program image each time, so that its code is decoded again
as OpenCSD decodes it again in each run; and `ingest`s of the same to a store. Dump reading
is outside the timed region on both sides (a snapshot maps its cores' dumps at its first
decode, made before timing); reading the trace buffer is outside OpenCSD's and inside
cputrace's (it opens and reads the file, from the page cache, as it decodes, in 4 MiB chunks:
a fraction of a millisecond on a small buffer); the benchmark stops if the two count
different instructions. The machine's speed drifts by a third over minutes, so only figures
taken in turn compare the two.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from cputrace.coresight.frames import deformat
from cputrace.flow.program import Program
from cputrace.formats.base import DecodeContext
from cputrace.formats.coresight.capture import Capture, PacketReader, open_captures, packet_decoder
from cputrace.formats.coresight.decoder import decode_captures
from cputrace.ingest import ROW_GROUP_ROWS, ingest
from cputrace.model import TABLES
from cputrace.store.write import StoreWriter

HERE = Path(__file__).parent
SNAPSHOT = HERE.parents[1] / "shared" / "data" / "tc2-etmv3"
PTM_SOURCE = 0x13
OPENCSD_RUN = re.compile(r"^run 1:\s+([\d.]+) ms\s+\d+ instr-range elements\s+(\d+) instr", re.M)


def best(runs: int, work) -> tuple[float, int]:
    """Best wall time of `runs` calls of work(), and what the last call returned."""
    times, result = timed(runs, work)
    return times[0], result


def timed(runs: int, work) -> tuple[list[float], int]:
    """Wall times of `runs` calls of work(), fastest first, and what the last call returned."""
    times = []
    result = 0
    for _ in range(runs):
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    return sorted(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=64)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steady", type=int, default=8, help="the longer buffer, in copies of the first")
    parser.add_argument("--reference", type=Path, help="the OpenCSD reference program, to take turns with")
    parser.add_argument("--rounds", type=int, default=15, help="turns each, with --reference")
    parser.add_argument("--snapshot", type=Path, help="with --reference: this snapshot folder, not TC2's")
    parser.add_argument("--source", type=lambda text: int(text, 0), action="append", default=[],
                        help="with --reference: also this source alone (TC2: 0x13, its PTM)")  # fmt: skip
    args = parser.parse_args()
    if not (SNAPSHOT / "cstrace.bin").exists():
        sys.exit(f"needs the TC2 snapshot in {SNAPSHOT}")
    buffer = (SNAPSHOT / "cstrace.bin").read_bytes() * args.repeat
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    path = out / f"tc2-etb-x{args.repeat}.bin"
    path.write_bytes(buffer)
    if args.reference:
        if not args.reference.is_file():
            sys.exit(f"no {args.reference}: build it as benchmarks/reference/README.md says")
        if args.snapshot:
            against_reference(args.reference, args.snapshot, args.source, args.rounds, str(args.snapshot))
            return
        with tempfile.TemporaryDirectory() as folder:
            snapshot = _snapshot_of(path, Path(folder)).parent
            title = f"TC2, its buffer {args.repeat} times"
            against_reference(args.reference, snapshot, args.source or [PTM_SOURCE], args.rounds, title)
        return
    capture = _capture(path)
    configs = {s.trace_id: s.config for s in capture.sources}

    def read_all() -> int:
        return sum(len(batch) for _, batch in PacketReader(capture))

    def deformat_only() -> int:
        return sum(len(s) for s in deformat(buffer)[0].values())

    streams = {i: s for i, s in deformat(buffer)[0].items() if i in configs}

    def decode_only() -> int:
        count = 0
        for trace_id, source in streams.items():
            decoder = packet_decoder(configs[trace_id])
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
        (f"packet decode alone ({etm / 2**20:.2f} MiB of ETMv3 and PTM)", decode_seconds, etm, packets),
    ]
    print(f"buffer: {size / 2**20:.2f} MiB ({args.repeat} x TC2 ETB), sources {sorted(configs)}")
    for label, took, volume, count in rows:
        rate = f", {count / took / 1e6:.1f} M packets/s" if count else ""
        print(f"{label:<45} {took * 1e3:7.1f} ms  {volume / took / 1e6:6.0f} MB/s{rate}")
    longer = out / f"tc2-etb-x{args.repeat * args.steady}.bin"
    longer.write_bytes(buffer * args.steady)
    instructions(capture, path, _capture(longer), args.runs, args.repeat)


def _capture(buffer: Path) -> Capture:
    """The TC2 snapshot's capture (sources, registers, memory) over another buffer."""
    (capture,) = open_captures(SNAPSHOT)
    capture.path = buffer
    return capture


def _decode(captures: Capture | list[Capture], programs: dict[object, Program]) -> int:
    captures = captures if isinstance(captures, list) else [captures]
    batches = decode_captures(captures, DecodeContext(), programs)
    return sum(b["instructions"].num_rows for b in batches if "instructions" in b)


def _write(batches: list[dict[str, pa.Table]]) -> int:
    """Decoded batches written to a store on this thread alone, in row groups as `ingest` makes
    them: what the writing thread of an ingest has to do."""
    with tempfile.TemporaryDirectory() as folder:
        writer = StoreWriter(Path(folder) / "s.ctrace")
        for table in TABLES:
            parts = [b[table] for b in batches if table in b]
            data = writer.checked(table, pa.concat_tables(parts)) if parts else None
            for start in range(0, data.num_rows if data else 0, ROW_GROUP_ROWS):
                writer.write(table, data.slice(start, ROW_GROUP_ROWS))
        writer.commit({})
    return sum(b["instructions"].num_rows for b in batches if "instructions" in b)


def _ingest(buffer: Path) -> None:
    """`ingest` of the TC2 snapshot with `buffer` as its trace, to a Parquet store."""
    with tempfile.TemporaryDirectory() as folder:
        ingest([_snapshot_of(buffer, Path(folder))], Path(folder) / "s.ctrace")


def _snapshot_of(buffer: Path, folder: Path) -> Path:
    """The TC2 snapshot in `folder` (links to its files), with `buffer` as its trace; its snapshot.ini."""
    for file in SNAPSHOT.iterdir():
        if file.is_file() and file.name != "cstrace.bin":
            (folder / file.name).symlink_to(file)
    (folder / "cstrace.bin").symlink_to(buffer.resolve())
    return folder / "snapshot.ini"


def against_reference(program: Path, snapshot: Path, sources: list[int], rounds: int, title: str) -> None:
    """OpenCSD's muted decodes and cputrace's decodes and `ingest`s of `snapshot` (its folder),
    of every source and of each of `sources` alone, taking turns."""
    runs = {"every source": None, **{f"source 0x{s:02x}": s for s in sources}}
    captures = {key: open_captures(snapshot, _only(source)) for key, source in runs.items()}
    counts = {key: _decode(captures[key], {}) for key in runs}  # and compile
    times: dict[tuple[str, str], list[float]] = {}

    def took(label: str, key: str, seconds: float) -> None:
        times.setdefault((label, key), []).append(seconds)

    with tempfile.TemporaryDirectory() as folder:
        for _ in range(rounds):
            for key, source in runs.items():
                only = [] if source is None else ["--only", hex(source)]
                run = subprocess.run([program, snapshot, "1", *only], capture_output=True, text=True)
                line = OPENCSD_RUN.search(run.stdout)
                if line is None:
                    sys.exit(f"{program} failed on {snapshot} ({key}): {run.stderr.strip()}")
                if int(line[2]) != counts[key]:
                    sys.exit(f"OpenCSD decodes {line[2]} instructions ({key}), cputrace {counts[key]}")
                took("OpenCSD, muted", key, float(line[1]) / 1e3)
                start, cpu = time.perf_counter(), time.process_time()
                _decode(captures[key], {})
                took("cputrace buffer to rows", key, time.perf_counter() - start)
                took("cputrace buffer to rows, CPU (every thread)", key, time.process_time() - cpu)
                start = time.perf_counter()
                ingest([snapshot / "snapshot.ini"], Path(folder) / "s.ctrace", options=_only(source))
                took("cputrace `ingest` to a store", key, time.perf_counter() - start)
    size = sum(c.path.stat().st_size for c in captures["every source"])
    print(f"{title}: {size / 2**20:.2f} MiB of trace, {rounds} turns each; instructions: "
          + ", ".join(f"{key} {count:,}" for key, count in counts.items()))
    print(f"{'':<56} {'best':>26}  {'median':>26}")
    for (label, key), taken in sorted(times.items(), key=lambda item: list(runs).index(item[0][1])):
        taken = sorted(taken)
        count = counts[key]
        best, median = taken[0], taken[len(taken) // 2]
        print(
            f"{label + ', ' + key:<56} {best * 1e3:7.1f} ms {count / best / 1e6:6.2f} M instr/s"
            f"  {median * 1e3:7.1f} ms {count / median / 1e6:6.2f} M instr/s"
        )


def _only(source: int | None) -> dict[str, int] | None:
    return None if source is None else {"source": source}


def instructions(capture: Capture, buffer: Path, longer: Capture, runs: int, repeat: int) -> None:
    """Buffer to instruction rows, warm and cold, of the buffer and a longer one; buffer to store."""
    programs: dict[object, Program] = {}
    _decode(capture, programs)  # compile, and decode the kernel code once
    warm, count = timed(runs, lambda: _decode(capture, programs))
    cold, _ = timed(runs, lambda: _decode(capture, {}))
    steady, steady_count = timed(max(1, runs // 2), lambda: _decode(longer, {}))
    batches = list(decode_captures([capture], DecodeContext(), programs))
    written, _ = timed(runs, lambda: _write(batches))
    stored, _ = timed(runs, lambda: _ingest(buffer))
    stored_longer, _ = timed(max(1, runs // 2), lambda: _ingest(longer.path))
    print(f"instructions: {count:,} ({count // repeat:,} per copy of the buffer); best run, and median")
    for label, times, rows in (
        ("buffer to rows, kernel code already decoded", warm, count),
        ("buffer to rows, from scratch", cold, count),
        ("the rows written alone (Parquet, one thread)", written, count),
        ("ingest to a store (snapshot.ini, Parquet)", stored, count),
        (f"buffer to rows from scratch, {steady_count:,}", steady, steady_count),
        (f"ingest to a store, {steady_count:,}", stored_longer, steady_count),
    ):
        took, median = times[0], times[len(times) // 2]
        print(
            f"{label:<45} {took * 1e3:7.1f} ms  {rows / took / 1e6:6.2f} M instructions/s"
            f"  (median {median * 1e3:7.1f} ms, {rows / median / 1e6:5.2f} M/s)"
        )


if __name__ == "__main__":
    main()
