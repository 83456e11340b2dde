"""Write the LEON example buffers of examples/ from a run of tests/data/leon/itb_demo.elf.

    PYTHONPATH=src:tests python examples/make_leon_examples.py [FOLDER]

The program runs under unicorn (tests/leon_encoder.py records it), and the encoder writes the
trace buffer lines a LEON3 would have written for that run:

- `leon-itb.bin` (+ `leon-itb.bin.json`): the raw instruction trace buffer (256 lines, not
  wrapped, no filter), as read from the DSU, with its ITBC0 pointer and CPU beside it;
- `leon-cf.txt`: the text form of a 32-line buffer under the control-flow filter (TFILT 2),
  wrapped: the newest transfers and their targets only, rebuilt with `--image`;
- `leon-ahb.bin` (+ `leon-ahb.bin.json`): a GR740 AHB trace buffer (128 lines) holding the
  run's loads and stores as bus transfers of master 0 (instruction fetches left out, as if
  the instruction cache held the program); an AHB breakpoint on the last SWAP's word.

tests/test_examples.py checks that this script still writes the committed bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import leon_encoder as enc  # noqa: E402 - tests/, put on the path above

PROGRAM = ROOT / "tests" / "data" / "leon" / "itb_demo.elf"
FIRST_TIME = 1000  # the time tag of the first line, in cycles
CYCLES = 3  # cycles per ITB line
SIZES = {1: 0, 2: 1, 4: 2}  # access size in bytes -> HSIZE


def filtered_lines(steps: list[enc.Step]) -> list[int]:
    """The ITB lines of the steps the control-flow filter keeps, with the time tags they have
    in the unfiltered trace of the run (the filter leaves lines out, not cycles)."""
    kept = {id(step) for step in enc.control_flow(steps)}
    lines = iter(enc.entries(steps, FIRST_TIME, CYCLES))
    chosen = []
    for step in steps:
        own = [next(lines) for _ in enc.results(step)]
        if id(step) in kept:
            chosen += own
    return chosen


def itb_examples(steps: list[enc.Step]) -> dict[str, bytes]:
    dump, pointer = enc.buffer(enc.entries(steps, FIRST_TIME, CYCLES), 256)
    filtered, filtered_pointer = enc.buffer(filtered_lines(steps), 32)
    return {
        "leon-itb.bin": dump,
        "leon-itb.bin.json": json.dumps({"itbc0": hex(pointer), "cpu": 0}).encode() + b"\n",
        "leon-cf.txt": enc.text(filtered, kind="itb", cpu=0, itbc0=2 << 28 | filtered_pointer).encode(),
    }


def bus_lines(steps: list[enc.Step]) -> list[int]:
    """The run's loads and stores as AHB lines, timed from the ITB line of their instruction.

    Each 32-bit piece of an access is one beat: the first NONSEQ, the next (LDD/STD) SEQ in
    an INCR burst; an atomic's read and write are locked; sub-word data sits on its
    big-endian byte lane."""
    lines = []
    line_of_step = 0
    last_swap = max(i for i, s in enumerate(steps) if s.op == 3 and s.op3 == 0x0F)
    for index, step in enumerate(steps):
        time = FIRST_TIME + CYCLES * line_of_step
        atomic = bool(step.reads and step.writes)
        for write, accesses in ((False, step.reads), (True, step.writes)):
            pieces = enc._words(accesses)
            for beat, (address, size, value) in enumerate(pieces):
                lane = 8 * (4 - address % 4 - size)
                lines.append(
                    enc.ahb_line(
                        time + beat + (2 if write and atomic else 0), address, value << lane, write=write,
                        hsize=SIZES[size], htrans=3 if beat else 2, hburst=1 if len(pieces) > 1 else 0,
                        locked=atomic, breakpoint=index == last_swap and write,
                    )
                )  # fmt: skip
        line_of_step += len(enc.results(step))
    return lines


def ahb_examples(steps: list[enc.Step]) -> dict[str, bytes]:
    dump, pointer = enc.buffer(bus_lines(steps), 128)
    return {
        "leon-ahb.bin": dump,
        "leon-ahb.bin.json": json.dumps({"kind": "ahb", "control": hex(pointer), "cpu": 0}).encode() + b"\n",
    }


def examples() -> dict[str, bytes]:
    """File name -> content of every LEON example."""
    steps = enc.record(str(PROGRAM))
    return {**itb_examples(steps), **ahb_examples(steps)}


def main(folder: Path) -> None:
    for name, content in examples().items():
        (folder / name).write_bytes(content)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
