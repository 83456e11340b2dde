"""Flow reconstruction speed: waypoint ops of a looping program walked through its image.

The ops come from the real quicksort trace shipped in examples/ (AArch64), in three styles
(ETMv3-like atoms per instruction, Tarmac FD/FI branches, XScale-like counted runs), repeated
until the walk reconstructs about N instructions. Prints reconstructed instructions per second,
timing only the walk (ops are built before the clock starts), first the warm-up pass that
decodes the blocks, then the steady state.

    python benchmarks/bench_flow.py [N]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from flow_ops import Stream, atom_ops, branch_ops, run_ops

import cputrace
from cputrace.flow.ops import Ops
from cputrace.flow.program import Program
from cputrace.flow.walker import Walker
from cputrace.image import load_elf

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def repeat(ops: Ops, times: int) -> Ops:
    return ops.select(np.tile(np.arange(len(ops)), times))


def main() -> None:
    target = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000_000
    trace = cputrace.open(EXAMPLES / "quicksort.tarmac")
    stream = Stream.of(trace.sql("SELECT pc, isa, executed FROM instructions ORDER BY seq"))
    image = load_elf(EXAMPLES / "quicksort.elf")
    times = max(1, target // len(stream.pc))
    print(f"{len(stream.pc):,} instructions per pass, {times:,} passes")
    for style in (atom_ops, branch_ops, run_ops):
        program = Program(image)
        ops = repeat(style(stream, program.blocks), times)
        walker = Walker(program, batch=1 << 18)
        started = time.perf_counter()
        rows = sum(batch["instructions"].num_rows for batch in walker.run(ops))
        rows += sum(batch["instructions"].num_rows for batch in walker.finish())
        elapsed = time.perf_counter() - started
        print(
            f"{style.__name__:<11} {len(ops):>11,} ops -> {rows:>12,} instructions in {elapsed:6.2f} s: "
            f"{rows / elapsed / 1e6:6.1f} M instructions/s ({program.count} decoded)"
        )


if __name__ == "__main__":
    main()
