"""What is fuzzed: each decoder's real seed inputs, the files beside them and its options.

A target is one seed input as a user would ingest it: the input file, the files it brings
along (a snapshot's ini files and buffer, a raw dump's `DUMP.json`, the program image), the
decoder named (or left to sniffing) and its options. A family is what the summary counts
by: one per decoder, with flow-only Tarmac (walked through its image) apart.
"""

from __future__ import annotations

import lzma
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).resolve().parent / "corpus"
SHARED = ROOT.parent / "shared" / "data"
"""The shared real-trace corpus beside the checkout (as for tests/paths.py): extra seeds where present."""

TEXT_SEED_BYTES = 64 << 10
"""Text seeds are cut at the last line end before this: mutations of the head of a trace meet
the same records as of the whole, at a fraction of the ingest time."""

ARM_OPTIONS = ("vector_base", "high_vectors")
TARMAC_OPTIONS = ("default_isa", "byte_order")
XSCALE_OPTIONS = ("xscale_chkpt0", "xscale_chkpt1", "xscale_pc", "xscale_input", *ARM_OPTIONS)
LEON_OPTIONS = ("itbc0", "cpu")
ETM_OPTIONS = ("source", "etmcr", "etmidr", "etmccer", "buffer_format", "etm_config")


@dataclass(frozen=True)
class Seed:
    """A file of a target: where it comes from, its name in the case folder, how to mutate it."""

    name: str
    path: Path
    kind: str  # text, binary, ini, json or image (a program image: mutated seldom)
    cut: int | None = None  # keep only the first `cut` bytes (text: up to a line end)

    def load(self) -> bytes:
        data = self.path.read_bytes()
        if self.path.suffix == ".xz":
            data = lzma.decompress(data)
        if self.cut is not None and len(data) > self.cut:
            data = data[: self.cut]
            if self.kind == "text":
                data = data[: data.rfind(b"\n") + 1] or data
        return data

    def describe(self) -> dict[str, object]:
        """How to rebuild the file (for a crasher's description): a path and the cut."""
        try:
            shown = str(self.path.relative_to(ROOT))
        except ValueError:
            shown = str(self.path)
        return {"path": shown, "cut": self.cut}


@dataclass(frozen=True)
class Target:
    name: str
    family: str
    main: str  # the input file's name among the seeds
    seeds: tuple[Seed, ...]
    format: str | None  # the decoder named; None: sniffed
    options: dict[str, str] = field(default_factory=dict)
    images: tuple[str, ...] = ()  # program images given: seed names, or NAME@ADDRESS for a raw one
    option_keys: tuple[str, ...] = ()  # the options the decoder reads: mutated too
    sniffable: bool = True  # whether the format is recognised without being named

    def load(self) -> dict[str, bytes]:
        return {seed.name: seed.load() for seed in self.seeds}


def _tarmac(path: Path, name: str | None = None) -> Target:
    seed = Seed(path.name, path, "text", TEXT_SEED_BYTES)
    return Target(name or f"tarmac-{path.stem}", "tarmac", path.name, (seed,), "tarmac",
                  option_keys=TARMAC_OPTIONS)  # fmt: skip


def _tarmac_targets() -> Iterator[Target]:
    data = ROOT / "tests" / "data"
    for path in (
        data / "tarmac" / "parsertest.txt",
        data / "tarmac" / "parsertest-implicit-thumb.txt",
        data / "tarmac" / "seed_fastmodels_example.tarmac",
        data / "state" / "indextest.tarmac",
        data / "coverage" / "cov-t32.tarmac",
        data / "coverage" / "cov-a64.tarmac",
        ROOT / "examples" / "quicksort.tarmac",
    ):
        yield _tarmac(path)
    utilities = SHARED / "tarmac-trace-utilities"
    for relative in (
        "samples/calculator-aarch32-es-ld-st-style.tarmac",
        "samples/calculator-aarch64-gem5.tarmac",
        "samples/calculator-aarch32-fastmodel.tarmac",
        "tests/calltests/calltest64.tarmac",
        "tests/truncate/crash32m.tarmac",
    ):
        if (utilities / relative).is_file():
            yield _tarmac(utilities / relative, f"tarmac-shared-{Path(relative).stem}")


def _flow_targets() -> Iterator[Target]:
    trace = CORPUS / "tarmac-flow" / "calls-a32-flow.tarmac"
    elf = ROOT / "tests" / "corpus" / "calls-a32.elf"
    yield Target(
        "tarmac-flow-calls-a32", "tarmac-flow", trace.name,
        (Seed(trace.name, trace, "text"), Seed(elf.name, elf, "image")), "tarmac",
        images=(elf.name,), option_keys=("vbar", *ARM_OPTIONS),
    )  # fmt: skip


def _armulator_targets() -> Iterator[Target]:
    path = ROOT / "tests" / "data" / "armulator" / "seed_example.trc"
    yield Target("armulator-example", "armulator", path.name, (Seed(path.name, path, "text"),), "armulator")


def _etmv3_targets() -> Iterator[Target]:
    tc2 = ROOT / "tests" / "data" / "etmv3" / "tc2"
    inis = tuple(Seed(p.name, p, "ini") for p in sorted(tc2.glob("*.ini")))
    dump = Seed("kernel_dump.bin", tc2 / "kernel_dump.bin.xz", "image")
    yield Target(
        "etmv3-tc2-snapshot", "etmv3", "snapshot.ini",
        (*inis, Seed("cstrace.bin", tc2 / "cstrace.bin", "binary", 4 << 10), dump), None,
        option_keys=("source",),
    )  # fmt: skip
    yield Target(  # its PTM source (PFT 1.1, cycle-accurate), whose bytes start 26 KiB in
        "etmv3-tc2-snapshot-ptm", "etmv3", "snapshot.ini",
        (*inis, Seed("cstrace.bin", tc2 / "cstrace.bin", "binary"), dump), None,
        options={"source": "0x13"}, option_keys=("source",),
    )  # fmt: skip
    rstk = SHARED / "opencsd-snapshots" / "tc2-ptm-rstk-t32"
    if rstk.is_dir():  # a raw PTM stream with the return stack, Thumb code in several dumps
        files = sorted(rstk.glob("*.ini")) + sorted(rstk.glob("mem_*.bin"))
        seeds = tuple(Seed(p.name, p, "ini" if p.suffix == ".ini" else "image") for p in files)
        yield Target(
            "etmv3-ptm-rstk-snapshot", "etmv3", "snapshot.ini",
            (*seeds, Seed("PTM_0_2.bin", rstk / "PTM_0_2.bin", "binary", 4 << 10)), None,
            option_keys=("source",),
        )  # fmt: skip
    juno = SHARED / "opencsd-snapshots" / "juno_r1_1"
    if juno.is_dir():  # ETMv4 (A57/A53, an A64 kernel at 0xFFFFFFC0...): source 0x10 starts 1.6 KiB in
        inis = tuple(Seed(p.name, p, "ini") for p in sorted(juno.glob("*.ini")))
        yield Target(
            "etmv3-etmv4-juno-snapshot", "etmv3", "snapshot.ini",
            (*inis, Seed("cstrace.bin", juno / "cstrace.bin", "binary", 8 << 10),
             Seed("cstraceitm.bin", juno / "cstraceitm.bin", "binary"),
             Seed("kernel_dump.bin", juno / "kernel_dump.bin", "image")), None,
            options={"source": "0x10"}, option_keys=("source",),
        )  # fmt: skip
    speculative = CORPUS / "etmv4-speculative"  # fuzz/make_corpus.py: commits, cancels, Q, cycle counts
    elf = ROOT / "tests" / "corpus" / "calls-a64.elf"
    yield Target(
        "etmv3-etmv4-speculative", "etmv3", "snapshot.ini",
        (*(Seed(p.name, p, "ini") for p in sorted(speculative.glob("*.ini"))),
         Seed("trace.bin", speculative / "trace.bin", "binary", 4 << 10), Seed(elf.name, elf, "image")), None,
        images=(elf.name,), option_keys=("source",),
    )  # fmt: skip
    registers = {"etmcr": "0x10001860", "etmidr": "0x410CF250", "etmccer": "0x344008F2", "source": "0x10"}
    yield Target(
        "etmv3-tc2-bare-buffer", "etmv3", "cstrace.bin",
        (Seed("cstrace.bin", tc2 / "cstrace.bin", "binary", 8 << 10), dump), "coresight",
        options=registers, images=("kernel_dump.bin@0xC0008000",), option_keys=ETM_OPTIONS, sniffable=False,
    )  # fmt: skip


def _xscale_targets() -> Iterator[Target]:
    data = ROOT / "tests" / "data" / "xscale"
    elf = ROOT / "tests" / "corpus" / "calls-armv5te.elf"
    image = Seed(elf.name, elf, "image")
    for path, kind in (
        (data / "calls-armv5te-wrap.txt", "text"),
        (data / "calls-armv5te-fill.dump", "binary"),
    ):
        yield Target(f"xscale-{path.suffix[1:]}", "xscale", path.name, (Seed(path.name, path, kind), image),
                     "xscale", images=(elf.name,), option_keys=XSCALE_OPTIONS)  # fmt: skip
    raw = CORPUS / "xscale" / "calls-armv5te-wrap.bin"
    registers = {"xscale_chkpt0": "0x850", "xscale_chkpt1": "0x8c8", "xscale_pc": "0x654"}  # the text form's
    yield Target(
        "xscale-raw", "xscale", raw.name, (Seed(raw.name, raw, "binary"), image), "xscale",
        options=registers, images=(elf.name,), option_keys=XSCALE_OPTIONS, sniffable=False,
    )  # fmt: skip


def _leon_targets() -> Iterator[Target]:
    leon = CORPUS / "leon"
    elf = ROOT / "tests" / "data" / "leon" / "itb_demo.elf"

    def raw(name: str, family: str, *, image: bool = False) -> Target:
        seeds = [Seed(name, leon / name, "binary"), Seed(f"{name}.json", leon / f"{name}.json", "json")]
        if image:
            seeds.append(Seed(elf.name, elf, "image"))
        return Target(
            f"{family}-{Path(name).stem}", family, name, tuple(seeds), family,
            images=(elf.name,) if image else (), option_keys=LEON_OPTIONS, sniffable=False,
        )  # fmt: skip

    yield raw("itb0.bin", "leon-itb")
    yield raw("itb-filtered.bin", "leon-itb", image=True)
    yield raw("ahb2.bin", "leon-ahb")
    text = leon / "itb.txt"
    yield Target("leon-text-itb", "leon-text", text.name, (Seed(text.name, text, "text"),), "leon-text",
                 option_keys=LEON_OPTIONS)  # fmt: skip


def all_targets() -> list[Target]:
    return [
        *_tarmac_targets(), *_flow_targets(), *_armulator_targets(), *_etmv3_targets(),
        *_xscale_targets(), *_leon_targets(),
    ]  # fmt: skip


FAMILIES = ("tarmac", "tarmac-flow", "armulator", "etmv3", "xscale", "leon-itb", "leon-ahb", "leon-text")
