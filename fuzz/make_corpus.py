"""Writes the seeds under fuzz/corpus/ that the repository does not already hold as files.

LEON buffers come from a run of tests/data/leon/itb_demo.elf under unicorn, encoded by
tests/leon_encoder.py (as tests/test_leon.py makes its samples); the flow-only Tarmac trace
from `cputrace record --flow-only` of tests/corpus/calls-a32.elf; the raw XScale buffer is
the message bytes of tests/data/xscale/calls-armv5te-wrap.txt (its registers are options of
the `xscale-raw` target); the ETMv4 snapshot is tests/corpus/calls-a64.elf's run encoded by
tests/etmv4_encoder.py as a speculating trace unit with cycle counts, Q elements and the return
stack. Run from the repository root after a change of those sources:

    PYTHONPATH=src:tests python -m fuzz.make_corpus
"""

from __future__ import annotations

import json
import random
import re
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).resolve().parent / "corpus"
FLOW_LINES = 400
"""Lines of the flow-only trace kept: enough for branches, exceptions and returns, fast to walk."""


def leon_seeds() -> None:
    import leon_encoder as enc  # tests/: the encoder the LEON tests check the decoders with

    steps = enc.record(str(ROOT / "tests" / "data" / "leon" / "itb_demo.elf"))
    folder = CORPUS / "leon"
    folder.mkdir(parents=True, exist_ok=True)

    dump, pointer = enc.buffer(enc.entries(steps), 256, 5)
    (folder / "itb0.bin").write_bytes(dump)
    (folder / "itb0.bin.json").write_text(json.dumps({"itbc0": hex(pointer), "cpu": 0}) + "\n")

    kept = enc.control_flow(steps)
    dump, pointer = enc.buffer(enc.entries(kept), 64, 9)
    (folder / "itb-filtered.bin").write_bytes(dump)
    (folder / "itb-filtered.bin.json").write_text(
        json.dumps({"itbc0": hex(2 << 28 | pointer), "cpu": 1}) + "\n"
    )

    dump0, pointer0 = enc.buffer(enc.entries(steps), 256, 3)
    dump1, pointer1 = enc.buffer(enc.entries(steps[:20]), 64, 7)
    listing = enc.text(dump0, kind="itb", cpu=0, itbc0=pointer0) + enc.text(dump1, cpu=1, itbc0=pointer1)
    (folder / "itb.txt").write_text(listing)

    bus = [
        enc.ahb_line(100 + 4 * i, 0x40010000 + 4 * i, value, write=bool(i % 2), hsize=i % 3, master=i % 4,
                     htrans=2 + i % 2, hburst=i % 2, locked=i == 3, breakpoint=i == 5)
        for i, value in enumerate((5, 0x180000, 0, 0x18, 0xDEADBEEF, 7, 0x40001000, 1))
    ]  # fmt: skip
    dump, pointer = enc.buffer(bus, 16, 2)
    (folder / "ahb2.bin").write_bytes(dump)
    (folder / "ahb2.bin.json").write_text(json.dumps({"kind": "ahb", "control": pointer, "cpu": 2}) + "\n")


def flow_seed() -> None:
    from cputrace.record import record

    with tempfile.TemporaryDirectory() as scratch:
        trace = Path(scratch) / "flow.tarmac"
        record(ROOT / "tests" / "corpus" / "calls-a32.elf", trace, flow_only=True)
        lines = trace.read_text().splitlines(keepends=True)[:FLOW_LINES]
    folder = CORPUS / "tarmac-flow"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "calls-a32-flow.tarmac").write_text("".join(lines))


def xscale_raw_seed() -> None:
    text = (ROOT / "tests" / "data" / "xscale" / "calls-armv5te-wrap.txt").read_text()
    data = bytes.fromhex(" ".join(line for line in text.splitlines() if re.fullmatch(r"[0-9a-f ]+", line)))
    folder = CORPUS / "xscale"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "calls-armv5te-wrap.bin").write_bytes(data)


def etmv4_seed() -> None:
    import etmv4_encoder as enc  # tests/: the encoder the ETMv4 tests check the decoder with

    from cputrace.image import load_elf
    from cputrace.isa import BlockCache

    program = ROOT / "tests" / "corpus" / "calls-a64.elf"
    mode = {"speculation": 12, "cycle_counting": True, "threshold": 4, "return_stack": True, "q_every": 20}
    with tempfile.TemporaryDirectory() as scratch:
        steps = enc.recorded_a64(program, Path(scratch))
    stream = enc.Etmv4Encoder().a_sync().trace_info(cycle_counting=True, threshold=4)
    enc.encode_run(stream, steps, BlockCache(load_elf(program)), rng=random.Random(5), **mode)
    folder = CORPUS / "etmv4-speculative"
    shutil.rmtree(folder, ignore_errors=True)  # this script's own output, written again
    enc.encoded_snapshot(folder, stream.data, mode)


def main() -> None:
    leon_seeds()
    flow_seed()
    xscale_raw_seed()
    etmv4_seed()


if __name__ == "__main__":
    main()
