"""Speed and memory of calls, profile and exports on a large synthetic trace, as a user runs them.

    python benchmarks/bench_analysis.py --lines 5000000
    python benchmarks/bench_analysis.py --lines 20000000 --runs 1

Generates a Fast-Models-style AArch64 trace (gen_tarmac.py: a loop calling a leaf function,
so about one call per 13 instructions) unless it exists, ingests it once, warms the
compiled-code cache, then times each command in a fresh process (imports included) and
reports wall and CPU seconds, instructions per second (wall) and peak resident memory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from gen_tarmac import generate
from measure import OUT, generated_trace, run_measured


def cputrace(*args: str) -> list[str]:
    return [sys.executable, "-m", "cputrace", *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=5_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip", nargs="*", default=[], help="Commands to leave out (e.g. tarmac).")
    parser.add_argument("--only", nargs="*", default=[], help="Commands to run, by name ('export chrome').")
    args = parser.parse_args()
    trace = generated_trace(args.lines)
    store = OUT / f"bench-{args.lines}.ctrace"
    if not (store / "manifest.json").exists():
        run_measured(cputrace("ingest", str(trace), "-o", str(store)))
    instructions = json.loads((store / "manifest.json").read_text())["counts"]["instructions"]

    warm = OUT / "warm.tarmac"
    with open(warm, "w") as f:
        generate(1000, f)
    warm_store = OUT / "warm.ctrace"
    run_measured(cputrace("ingest", str(warm), "-o", str(warm_store)))
    for command in (["calls"], ["profile"], ["export", "--to", "callgrind", "-o", os.devnull]):
        run_measured(cputrace(*command[:1], str(warm_store), *command[1:]))

    commands = {
        "calls": ["calls", str(store)],
        "calls --tree": ["calls", str(store), "--tree"],
        "profile": ["profile", str(store)],
        "export folded": ["export", str(store), "--to", "folded", "-o", str(OUT / "bench.folded")],
        **{
            f"export {name}": ["export", str(store), "--to", name, "-o", str(OUT / f"bench{suffix}")]
            for name, suffix in (("perfetto", ".perfetto"), ("chrome", ".json"), ("speedscope", ".ss.json"))
        },
        "export callgrind": ["export", str(store), "--to", "callgrind", "-o", str(OUT / "bench.callgrind")],
        "export csv": [
            "export",
            str(store),
            "--to",
            "csv",
            "--table",
            "instructions",
            "-o",
            str(OUT / "bench.csv"),
        ],
        "export tarmac": ["export", str(store), "--to", "tarmac", "-o", str(OUT / "bench-out.tarmac")],
    }
    print(f"trace    {args.lines:,} lines, {instructions:,} instructions ({trace.name})")
    for name, command in commands.items():
        if name.split()[-1] in args.skip or (args.only and name not in args.only):
            continue
        runs = [run_measured(cputrace(*command)) for _ in range(args.runs)]
        seconds = min(r.seconds for r in runs)
        cpu = min(r.cpu_seconds for r in runs)
        peak = max(r.rss for r in runs)
        written = ""
        if "-o" in command:
            output = Path(command[command.index("-o") + 1])
            written = f", output {output.stat().st_size / 1e6:,.1f} MB"
            output.unlink()
        rate = instructions / seconds / 1e6
        timing = f"{seconds:6.2f} s wall, {cpu:6.2f} s CPU (best of {args.runs}; {rate:.2f} M insns/s)"
        print(f"{name:<18} {timing}, peak RSS {peak / 2**20:,.0f} MiB{written}")


if __name__ == "__main__":
    main()
