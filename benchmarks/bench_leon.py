"""LEON decoding time against input size: hostile inputs must cost linear time.

Each case is decoded at N and 4N; linear time gives a ratio near 4, quadratic near 16.
The cases are the ones that were quadratic: a text header line without `=` (N bytes), a
control-flow filtered raw dump of N random lines decoded through the demo image, and a text
listing of N lines that are not trace lines (kept as text). Decoding only, no store.

    python benchmarks/bench_leon.py [N]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from cputrace.formats import get_decoder
from cputrace.formats.base import DecodeContext
from cputrace.image import load_elf
from cputrace.inputs import InputFile

ELF = Path(__file__).resolve().parents[1] / "tests" / "data" / "leon" / "itb_demo.elf"
LINE = "0c000010 40001018 40001014 01000000\n"


def header_without_settings(folder: Path, n: int) -> tuple[Path, str, DecodeContext]:
    path = folder / f"header{n}.txt"
    path.write_text("# " + "a" * n + "\n" + LINE)
    return path, "leon-text", DecodeContext()


def random_filtered_lines(folder: Path, n: int) -> tuple[Path, str, DecodeContext]:
    rng = np.random.default_rng(n)
    words = rng.integers(0, 1 << 32, (n, 4), dtype=np.uint64).astype(">u4")
    words[:, 2] = 0x40000000 + 4 * rng.integers(0, 64, n)  # pcs in the image
    path = folder / f"random{n}.bin"
    path.write_bytes(words.tobytes())
    Path(f"{path}.json").write_text(json.dumps({"itbc0": hex(2 << 28)}))
    return path, "leon-itb", DecodeContext(image=load_elf(ELF))


def bad_text_lines(folder: Path, n: int) -> tuple[Path, str, DecodeContext]:
    path = folder / f"bad{n}.txt"
    path.write_text("# leon-trace kind=itb cpu=0\n" + "not a trace line\n" * n + LINE)
    return path, "leon-text", DecodeContext()


def seconds(make: Callable[[Path, int], tuple[Path, str, DecodeContext]], folder: Path, n: int) -> float:
    path, fmt, ctx = make(folder, n)
    started = time.perf_counter()
    for _ in get_decoder(fmt).decode(InputFile(path), ctx):
        pass
    return time.perf_counter() - started


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    cases = {
        "header line without '=' (bytes)": (header_without_settings, 20 * n),
        "TFILT 2 random lines, --image": (random_filtered_lines, n),
        "text lines kept as text": (bad_text_lines, 5 * n),
    }
    with tempfile.TemporaryDirectory() as folder:
        seconds(random_filtered_lines, Path(folder), 100)  # warm-up: imports, image, disassembler
        for name, (make, size) in cases.items():
            small, large = seconds(make, Path(folder), size), seconds(make, Path(folder), 4 * size)
            print(f"{name:<34} N={size:>9,}: {small:6.2f} s  4N: {large:6.2f} s  ratio {large / small:4.1f}")


if __name__ == "__main__":
    main()
