"""The compiled AArch32 flow classifiers against capstone's path, on TC2's kernel image.

Decodes the whole 320 KiB kernel dump linearly, as T32 (the kernel is Thumb-2) and as A32:
once with `flow_aarch32.t32_flow` / `a32_flow` in a compiled loop, once with capstone in
detail mode as `isa.arm` reads it (`arm_runs`, restarting after each instruction it cannot
decode). The two alternate for ROUNDS rounds (after a warm-up that compiles); prints the
best and median instructions per second, wall and CPU.

    python benchmarks/bench_flow_aarch32.py [ROUNDS]
"""

from __future__ import annotations

import lzma
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np

from cputrace.isa.arm import arm_runs
from cputrace.isa.flow_aarch32 import a32_flow, t32_flow
from cputrace.isa.insn import C_COUNT, C_SIZE
from cputrace.model import Isa

KERNEL = Path(__file__).resolve().parents[1] / "tests" / "data" / "etmv3" / "tc2" / "kernel_dump.bin.xz"
ADDRESS = 0xC0008000


@numba.njit(cache=True, nogil=True)
def classify_t32(code: np.ndarray, address: int) -> int:
    """Every T32 instruction of `code`, one after the other; how many."""
    row = np.zeros(C_COUNT, np.int64)
    offset, count, it_state = 0, 0, 0
    while offset + 2 <= len(code):
        it_state = t32_flow(code, offset, address + offset, it_state, row)
        if row[C_SIZE] == 0:
            break
        offset += row[C_SIZE]
        count += 1
    return count


@numba.njit(cache=True, nogil=True)
def classify_a32(code: np.ndarray, address: int) -> int:
    row = np.zeros(C_COUNT, np.int64)
    count = 0
    for offset in range(0, len(code) - 3, 4):
        word = np.int64(code[offset]) | (np.int64(code[offset + 1]) << 8)
        word |= (np.int64(code[offset + 2]) << 16) | (np.int64(code[offset + 3]) << 24)
        a32_flow(word, address + offset, row)
        count += 1
    return count


WINDOW = 4096
"""Bytes given to each `arm_runs` call (as a walk gives it a block's): a restart after an
undefined instruction copies no more than this."""


def capstone(code: bytes, isa: Isa) -> int:
    """Capstone's path over all of `code`: the flow columns of every instruction; how many."""
    offset, count = 0, 0
    while offset < len(code):
        before = offset
        for run in arm_runs(code[offset : offset + WINDOW], ADDRESS + offset, isa):
            offset += int(run.columns[:, C_SIZE].sum())
            count += len(run.columns)
        if offset == before:
            break
    return count


def timed(work: Callable[[], int]) -> tuple[int, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    count = work()
    return count, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    code = lzma.decompress(KERNEL.read_bytes())
    array = np.frombuffer(code, np.uint8)
    for isa, compiled in ((Isa.T32, classify_t32), (Isa.A32, classify_a32)):
        ways = {
            "classifier": lambda c=compiled: c(array, ADDRESS),
            "capstone": lambda i=isa: capstone(code, i),
        }
        for work in ways.values():
            work()  # compile, warm the caches
        results: dict[str, list[tuple[int, float, float]]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, work in ways.items():
                results[name].append(timed(work))
        for name, runs in results.items():
            count = runs[0][0]
            walls, cpus = [run[1] for run in runs], [run[2] for run in runs]
            best, median = count / min(walls) / 1e6, count / statistics.median(walls) / 1e6
            print(
                f"{isa.name} {name:<10} {count:>8,} instructions: wall best {best:7.2f} M/s, "
                f"median {median:7.2f} M/s; CPU best {count / min(cpus) / 1e6:7.2f} M/s"
            )


if __name__ == "__main__":
    main()
