"""One input split across a Dask cluster into a partitioned store (`ingest --workers`).

Every partitioned store is checked against the single-process ingest of the same input, row
for row and column for column, with the split points chosen to hurt: before every
instruction line of small inputs (every part one instruction), and on larger ones right
after every kind of record (the parts then start with the instruction that follows it) and
right before every kind (moved on to the next instruction line). Commands on a partitioned
store are checked against the same commands on the single store. One local cluster of two
worker processes serves the module.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import random
import re
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from cputrace.cli import cli
from cputrace.errors import CputraceError
from cputrace.ingest import ingest
from cputrace.model import TABLES
from cputrace.store.checksums import file_xxh3_128
from cputrace.store.manifest import load_manifest
from cputrace.store.trace import Trace

pytest.importorskip("distributed")

import paths
from cluster_faults import killing_a_busy_worker

from cputrace.batch.cluster import connect
from cputrace.batch.partition import ingest_split

TARMAC = paths.DATA / "tarmac"
SAMPLES = (
    "calculator-aarch32-es-ld-st-style", "calculator-aarch32-fastmodel", "calculator-aarch64-es-ld-st-style",
    "calculator-aarch64-fastmodel", "calculator-aarch64-gem5",
)  # fmt: skip
RECORD = re.compile(rb"^\s*(?:[\d.]+\s*(?:[a-z]+\s+)?)?(?:cpu\d+\s+)?(\S+)")
INSTRUCTION_RECORDS = (b"IT", b"IS", b"IF")
MANIFEST_FIELDS = ("counts", "time", "cpus", "isas", "modes", "event_kinds", "warnings", "format")


@pytest.fixture(scope="module")
def client():
    """A local cluster of two worker processes for the module, stopped at its end."""
    with connect(workers=2) as client:
        yield client


def _lines(path: Path) -> list[tuple[int, bytes, bytes]]:
    """Each line's byte offset, its record keyword (b"" for none) and its text."""
    offset, lines = 0, []
    for line in path.read_bytes().splitlines(keepends=True):
        match = RECORD.match(line)
        keyword = match.group(1) if match else b""
        if keyword == b"ES" and b"(" in line:
            keyword = b"IT"  # ES (address:opcode): an instruction
        lines.append((offset, keyword, line))
        offset += len(line)
    return lines


def every_instruction(path: Path) -> list[int]:
    return [offset for offset, keyword, _ in _lines(path) if keyword in INSTRUCTION_RECORDS and offset]


def around_every_kind(path: Path, per_kind: int = 3, seed: int = 21) -> list[int]:
    """Offsets right after and right before lines of each kind of record (up to `per_kind`
    of each), and a few at random."""
    lines = _lines(path)
    after: dict[bytes, list[int]] = {}
    before: dict[bytes, list[int]] = {}
    for (_, kind, _), (offset, keyword, _) in itertools.pairwise(lines):
        if keyword in INSTRUCTION_RECORDS:
            after.setdefault(kind, []).append(offset)
        before.setdefault(keyword, []).append(offset)
    chosen = {offset for offsets in (*after.values(), *before.values()) for offset in offsets[:per_kind]}
    chosen |= set(random.Random(seed).sample([offset for offset, _, _ in lines[1:]], min(20, len(lines) - 1)))
    return sorted(chosen)


def plain(table: pa.Table) -> pa.Table:
    """The table with dictionary columns as their values (parts have dictionaries of their own)."""
    columns = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns]
    return pa.table(columns, names=table.column_names)


def assert_same_store(single: Path, split: Path, *, identity: bool = True) -> None:
    """The two stores' tables, row for row and column for column, their figures, and (with
    `identity`) the input's identity they record."""
    with Trace(single) as a, Trace(split) as b:
        for name in TABLES:
            expected, got = plain(a.table(name)), plain(b.table(name))
            assert got.schema == expected.schema, name
            for column in expected.column_names:
                assert got.column(column).equals(expected.column(column)), (name, column)
        for field in MANIFEST_FIELDS:
            assert b.manifest[field] == a.manifest[field], field
        if not identity:
            return
        [whole], [parts] = a.manifest["inputs"], b.manifest["inputs"]
        identity = {key: value for key, value in parts.items() if key != "parts"}
        if whole["xxh3_128"] is None:  # a decoder that reads its input itself (ETMv3) leaves it out
            assert identity.pop("xxh3_128") == file_xxh3_128(whole["path"])
            whole = {key: value for key, value in whole.items() if key != "xxh3_128"}
        assert identity == whole  # the input's identity


def split_and_single(client, source: Path, tmp_path: Path, **kwargs) -> tuple[Path, Path, dict]:
    options = {key: kwargs.pop(key) for key in ("strict", "options") if key in kwargs}
    single = ingest([source], tmp_path / "single.ctrace", **options).store
    result = ingest_split(client, source, tmp_path / "split.ctrace", **options, **kwargs)
    return single, result.store, result.manifest


@pytest.mark.parametrize("name", ["parsertest.txt", "seed_fastmodels_example.tarmac"])
def test_split_before_every_instruction_equals_the_single_ingest(client, tmp_path: Path, name: str) -> None:
    source = TARMAC / name
    splits = every_instruction(source)
    single, split, manifest = split_and_single(client, source, tmp_path, splits=splits)
    # split at all but the few instruction lines of rare dialects (left to the line parser)
    assert len(splits) * 0.8 < manifest["parts"] <= len(splits) + 1
    assert_same_store(single, split)


@pytest.mark.parametrize("sample", SAMPLES)
def test_split_around_every_kind_of_record_equals_the_single_ingest(
    client, tmp_path: Path, sample: str
) -> None:
    source = paths.shared("tarmac-trace-utilities", "samples", f"{sample}.tarmac")
    single, split, manifest = split_and_single(client, source, tmp_path, splits=around_every_kind(source))
    assert manifest["parts"] > 20
    assert_same_store(single, split)


MULTICORE = b"""\
0 clk cpu0 IT (0) 00008000 e3a00001 A svc_s : MOV      r0,#1
0 clk cpu0 R r0 00000001
0 clk cpu1 R r1 00000005
1 clk cpu0 IT (1) 00008004 e3a01002 A svc_s : MOV      r1,#2
1 clk cpu1 R r2 00000007
1 clk cpu1 IT (1) 00009000 e3a02003 A svc_s : MOV      r2,#3
2 clk cpu1 R r2 00000003
IT (2) 00009004 e3a03004 A svc_s : MOV      r3,#4
R r3 00000004
3 clk cpu0 ES IRQ
      EXC [0x12] IRQ
4 clk cpu0 IT (3) 00000018 e3a04005 A irq : MOV      r4,#5
4 clk cpu2 MR4 00001000 12345678
5 clk cpu2 IT (4) 0000a000 e3a05006 A svc_s : MOV      r5,#6
"""


def test_state_that_crosses_a_split_is_carried(client, tmp_path: Path) -> None:
    """A core's records before its first instruction (they belong to the next instruction, in
    the next part), lines that take the time and core of the lines before (an instruction line
    without them starts a part), and an exception whose number is on the next line."""
    source = tmp_path / "multicore.tarmac"
    source.write_bytes(MULTICORE)
    single, split, _ = split_and_single(client, source, tmp_path, splits=every_instruction(source))
    assert_same_store(single, split)
    with Trace(single) as trace:  # what the carried state decides, as the single ingest has it
        rows = trace.sql("SELECT seq, cpu, reg FROM registers ORDER BY seq, src").to_pylist()
        assert {"seq": 1, "cpu": 1, "reg": "r1"} in rows
        assert trace.sql("SELECT time, cpu FROM instructions WHERE seq = 3").to_pylist() == [
            {"time": 2, "cpu": 1}
        ]


def test_a_recorded_program_splits_into_an_equal_store(client, tmp_path: Path, recorded_calls_a64) -> None:
    _, trace = recorded_calls_a64
    source = Path(trace.manifest["inputs"][0]["path"])
    single, split, manifest = split_and_single(
        client, source, tmp_path, part_bytes=-(-source.stat().st_size // 7)
    )
    assert manifest["parts"] == 7
    assert_same_store(single, split)


def test_a_strict_error_in_a_later_part_fails_the_whole_and_leaves_nothing(client, tmp_path: Path) -> None:
    text = (TARMAC / "seed_fastmodels_example.tarmac").read_bytes()
    lines = text.splitlines(keepends=True)
    bad = len(lines) * 3 // 4
    lines[bad] = b"12 clk IT (12) zzzz0000 e3a00000 A svc : MOV r0,#0\n"
    source = tmp_path / "bad.tarmac"
    source.write_bytes(b"".join(lines))
    with pytest.raises(CputraceError) as single:
        ingest([source], tmp_path / "single.ctrace", strict=True)
    with pytest.raises(CputraceError) as split:
        ingest_split(client, source, tmp_path / "split.ctrace", strict=True, part_bytes=len(text) // 4)
    assert str(split.value) == str(single.value)
    assert f"{source}:{bad + 1}" in str(split.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tarmac"]  # no store, no staging folder


def test_lenient_warnings_are_those_of_the_single_ingest(client, tmp_path: Path) -> None:
    lines = (TARMAC / "seed_fastmodels_example.tarmac").read_bytes().splitlines(keepends=True)
    for at in range(5, len(lines), len(lines) // 6):
        lines[at] = b"this is no Tarmac line\n"
    source = tmp_path / "noisy.tarmac"
    source.write_bytes(b"".join(lines))
    single, split, manifest = split_and_single(
        client, source, tmp_path, part_bytes=source.stat().st_size // 5
    )
    assert manifest["warnings"]["count"] == 6
    assert_same_store(single, split)


def test_an_input_that_cannot_be_split_is_ingested_whole_by_a_worker(client, tmp_path: Path) -> None:
    source = tmp_path / "seed_example.trc.gz"
    source.write_bytes(gzip.compress((paths.DATA / "armulator" / "seed_example.trc").read_bytes()))
    notes: list[str] = []
    single = ingest([source], tmp_path / "single.ctrace").store
    result = ingest_split(client, source, tmp_path / "split.ctrace", part_bytes=64, on_note=notes.append)
    assert notes == [f"{source}: not split: a gzip input is read from its start"]
    assert "parts" not in result.manifest
    assert_same_store(single, result.store)


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(arg) for arg in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def recorded_pair(
    client, tmp_path_factory: pytest.TempPathFactory, recorded_calls_a64
) -> tuple[Path, Path, Path]:
    """The recorded calls-a64 trace ingested by one process and split in 5 parts by the CLI."""
    elf, trace = recorded_calls_a64
    where = tmp_path_factory.mktemp("pair")
    source = where / "calls.tarmac"
    shutil.copy(trace.manifest["inputs"][0]["path"], source)
    single = ingest([source], where / "single.ctrace").store
    size = -(-source.stat().st_size // 5)  # 5 parts
    status, out, err = _cli("ingest", source, "-o", where / "split.ctrace", "--part-size", size,
                            "--scheduler", client.scheduler.address)  # fmt: skip
    assert status == 0, err
    assert out.startswith(
        f"{where / 'split.ctrace'}: {trace.manifest['counts']['instructions']:,} instructions"
    )
    assert load_manifest(where / "split.ctrace")["parts"] == 5
    return elf, single, where / "split.ctrace"


@pytest.mark.parametrize(
    "command",
    [
        ["calls", "{trace}", "--image", "{elf}"],
        ["calls", "{trace}", "--image", "{elf}", "--tree", "--format", "json"],
        ["profile", "{trace}", "--image", "{elf}", "--format", "json"],
        ["coverage", "{trace}", "--image", "{elf}"],
        ["state", "{trace}", "--at", "1500", "--format", "json"],
        ["list", "{trace}", "--format", "tarmac"],
        ["list", "{trace}", "--where", "pc >= 0x400 AND size = 4", "--limit", "50", "--format", "csv"],
        [
            "sql",
            "{trace}",
            "SELECT reg, count(*) AS n, sum(value) AS s FROM registers GROUP BY reg ORDER BY reg",
        ],
        ["sql", "{trace}", "SELECT * FROM memory ORDER BY seq LIMIT 40 OFFSET 900", "--format", "csv"],
        ["diff", "{trace}", "{other}", "--format", "json"],
    ],
)
def test_commands_on_a_partitioned_store_say_what_they_say_on_the_single_store(
    recorded_pair, command
) -> None:
    elf, single, split = recorded_pair
    outputs = []
    for trace, other in ((single, split), (split, single)):
        args = [arg.format(trace=trace, other=other, elf=elf) for arg in command]
        status, out, err = _cli(*args)
        assert status == 0, err
        outputs.append(out.replace(str(trace), "TRACE").replace(str(other), "OTHER"))
    assert outputs[0] == outputs[1]
    assert outputs[0].strip()


def test_info_and_verify_read_every_part(recorded_pair) -> None:
    _, single, split = recorded_pair
    status, out, _ = _cli("verify", split)
    assert status == 0 and ", 4 tables," in out
    damaged = sorted((split / load_manifest(split)["data"] / "memory").iterdir())[3]
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0x01
    damaged.chmod(0o644)
    damaged.write_bytes(bytes(data))
    status, _, err = _cli("verify", split)
    assert status == 1 and str(damaged) in err and "checksum mismatch" in err
    data[len(data) // 2] ^= 0x01
    damaged.write_bytes(bytes(data))
    _, a, _ = _cli("info", single)
    _, b, _ = _cli("info", split)
    assert a.replace(str(single), "S") == b.replace(str(split), "S")


def test_the_cli_refuses_two_inputs_to_split(client, tmp_path: Path) -> None:
    status, _, err = _cli("ingest", TARMAC / "parsertest.txt", TARMAC / "seed_fastmodels_example.tarmac",
                          "--scheduler", client.scheduler.address)  # fmt: skip
    assert status == 2 and "give one INPUT to split" in err


def test_a_worker_killed_mid_part_changes_nothing(client, tmp_path: Path, recorded_calls_a64) -> None:
    _, trace = recorded_calls_a64
    source = Path(trace.manifest["inputs"][0]["path"])
    single = ingest([source], tmp_path / "single.ctrace").store
    with killing_a_busy_worker(client) as killed:
        split = ingest_split(client, source, tmp_path / "split.ctrace", part_bytes=source.stat().st_size // 8)
    assert killed and killed[0] not in client.scheduler_info()["workers"]
    assert_same_store(single, split.store)
    assert not list(tmp_path.glob("*.tmp-*"))


def test_a_part_whose_workers_keep_dying_fails_the_whole_and_leaves_nothing(
    client, tmp_path: Path, recorded_calls_a64
) -> None:
    _, trace = recorded_calls_a64
    source = tmp_path / "calls.tarmac"
    shutil.copy(trace.manifest["inputs"][0]["path"], source)
    allowed = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.allowed_failures)
    client.run_on_scheduler(lambda dask_scheduler: setattr(dask_scheduler, "allowed_failures", 0))
    try:
        with killing_a_busy_worker(client), pytest.raises(CputraceError) as failed:
            ingest_split(client, source, tmp_path / "split.ctrace", part_bytes=source.stat().st_size // 8)
    finally:
        client.run_on_scheduler(lambda dask_scheduler: setattr(dask_scheduler, "allowed_failures", allowed))
    assert str(failed.value).startswith(f"{source}: the job could not complete: 1 worker process died")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calls.tarmac"]  # no store, no staging folder


def test_batch_commands_read_partitioned_stores(client, recorded_pair, tmp_path: Path) -> None:
    elf, single, split = recorded_pair
    pairs = tmp_path / "pairs.csv"
    pairs.write_text(f"a,b\n{single},{split}\n{split},{single}\n")
    status, out, err = _cli(
        "batch", "diff", "--pairs", pairs, "--format", "json", "--scheduler", client.scheduler.address
    )
    assert status == 0, err
    assert [(pair["status"], pair["divergences"]) for pair in json.loads(out)] == [("identical", 0)] * 2
    profiles = []
    for trace in (single, split):
        status, out, err = _cli("batch", "profile", trace, "--image", elf, "--format", "json",
                                "--scheduler", client.scheduler.address)  # fmt: skip
        assert status == 0, err
        profiles.append(out)
    assert profiles[0] == profiles[1]


def test_a_split_inside_a_long_run_of_records_moves_on_to_the_next_instruction(
    client, tmp_path: Path
) -> None:
    """More records between two instructions than the first window looked at for a split."""
    lines = [b"0 clk IT (0) 00008000 e3a00001 A svc_s : MOV      r0,#1\n"]
    lines += [b"0 clk R r%d %08x\n" % (i % 13, i) for i in range(8000)]  # about 160 KB
    lines += [b"1 clk IT (1) 00008004 e3a01002 A svc_s : MOV      r1,#2\n", b"1 clk R r1 00000002\n"]
    source = tmp_path / "long.tarmac"
    source.write_bytes(b"".join(lines))
    second = source.stat().st_size - len(lines[-1]) - len(lines[-2])
    single, split, manifest = split_and_single(client, source, tmp_path, splits=[len(lines[0]) + 10])
    assert manifest["parts"] == 2
    assert manifest["inputs"][0]["parts"][1]["start"] == second
    assert_same_store(single, split)


def test_an_interrupted_split_ingest_cancels_its_tasks_and_leaves_nothing(client, tmp_path: Path) -> None:
    """Ctrl-C while the client waits for the parts (KeyboardInterrupt out of the progress hook
    after the first task done): the job's tasks left are cancelled on the cluster, no store."""
    source = tmp_path / "t.tarmac"
    shutil.copy(TARMAC / "parsertest.txt", source)

    def interrupt(_done: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ingest_split(
            client, source, tmp_path / "t.ctrace", splits=every_instruction(source), progress=interrupt
        )
    for _ in range(200):
        if not client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)):
            break
        time.sleep(0.05)
    assert client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.tarmac"]


def test_a_part_whose_ingest_has_ended_makes_no_folder_again(tmp_path: Path) -> None:
    """A task still running when its ingest failed or was cancelled (its staging folder gone)."""
    from cputrace.store.write import PartWriter

    gone = tmp_path / "t.ctrace.tmp-0123abcd" / "v-0123456789ab"
    with pytest.raises(FileNotFoundError):
        PartWriter(gone, 3, tmp_path / "t.ctrace")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("to", "extra"),
    [("csv", ["--table", "registers", "--start", "700", "--stop", "9000"]), ("tarmac", []),
     ("vcd", []), ("folded", ["--image", "{elf}"])],
)  # fmt: skip
def test_exports_of_a_partitioned_store_are_those_of_the_single_store(
    recorded_pair, tmp_path: Path, to, extra
) -> None:
    elf, single, split = recorded_pair
    written = []
    for trace in (single, split):
        out = tmp_path / f"{trace.name}.{to}"
        status, _, err = _cli("export", trace, "--to", to, "-o", out, *[arg.format(elf=elf) for arg in extra])
        assert status == 0, err
        undated = re.sub(rb"\$date [^$]*\$end", b"$date $end", out.read_bytes())  # vcd: when it was written
        written.append(undated.replace(str(trace).encode(), b"TRACE"))
    assert written[0] == written[1]
    assert written[0]


def test_the_browser_index_of_a_partitioned_store_shows_the_single_stores_lines(recorded_pair) -> None:
    from cputrace.browse.session import Session
    from cputrace.image import load_image_specs

    elf, single, split = recorded_pair
    shown = []
    for store in (single, split):
        with Trace(store) as trace:
            session = Session.open(trace, load_image_specs([str(elf)]))
            try:
                shown.append([session.lines(0, first, 40) for first in (0, 4321, 22_600)])
            finally:
                session.close()
    assert shown[0] == shown[1]
    assert len(shown[0][1]) == 40


def test_a_part_whose_count_was_wrong_renumbers_the_parts_after_it(client, tmp_path: Path) -> None:
    """The scan step counts an instruction line whose time overflows the stored unit (ns: the
    first line's) once converted; decoding keeps it as text. The parts after it are decoded
    again, renumbered."""
    lines = [
        b"%d ns IT (%d) %08x e3a00001 A svc_s : MOV      r0,#1\n" % (i, i, 0x8000 + 4 * i) for i in range(400)
    ]
    lines[150] = b"999999999999999999 us IT (150) 00008258 e3a00001 A svc_s : MOV      r0,#1\n"
    source = tmp_path / "late.tarmac"
    source.write_bytes(b"".join(lines))
    single, split, manifest = split_and_single(
        client, source, tmp_path, part_bytes=-(-source.stat().st_size // 4)
    )
    assert manifest["parts"] == 4 and manifest["warnings"]["count"] == 1
    assert manifest["counts"]["instructions"] == 399
    assert_same_store(single, split)


def armulator_trace(instructions: int, seed: int = 21) -> bytes:
    """An ARMulator Tracer file of a core that fetches two instructions ahead (so a fetch is
    always pending), with every kind of record: headers, `T` times, ARM and Thumb instructions,
    core and bus data accesses, multi-word bus fetches, wait cycles, idle cycles, register and
    event lines, branches (whose fetched fall-through never runs), runs of data accesses while
    a fetch is pending, and a few lines that are no record (lenient warnings)."""
    rng = random.Random(seed)
    lines = ["Date: Thu Aug  9 16:41:36 2001", "Source: Armul", "Options: Trace Instructions  Trace Memory"]
    pc, thumb = 0x8000, False
    fetched = {pc: 1, pc + 4: 1}
    lines += [f"MNR4O___ {pc:08X} E1A00000", f"MNR4O___ {pc + 4:08X} E1A00000"]
    for i in range(instructions):
        step = 2 if thumb else 4
        ahead = pc + 2 * step
        time = f"T {1000 + 3 * i:08X} " if rng.random() < 0.3 else ""
        if ahead not in fetched:
            fetched[ahead] = 1
            data = "(wait)" if rng.random() < 0.05 else f"{rng.getrandbits(32):08X}"
            lines.append(f"{time}MNR{step}O___ {ahead:08X} {data}")
        if rng.random() < 0.1:
            base = ahead & ~7
            lines.append(f"BNR8O___ {base:08X} {rng.getrandbits(32):08X} {rng.getrandbits(32):08X}")
        for _ in range(rng.choice((0, 0, 0, 1, 5))):  # data accesses while the fetch is pending
            word = f"{rng.choice('MB')}N{rng.choice('RW')}4____"
            lines.append(f"{word} {0x20000 + 4 * rng.randrange(256):08X} {rng.getrandbits(32):08X}")
        if rng.random() < 0.05:
            lines.append(rng.choice(("MI", "MIO", "MC", "BI")))
        executed = "IT" if rng.random() < 0.9 else "IS"
        opcode = f"{rng.getrandbits(16):04x}" if thumb else f"{rng.getrandbits(32):08x}"
        lines.append(f"{time}{executed} {pc:08X} {opcode} {'MOV' if thumb else 'ADD'} r{i % 13},r{i % 7}")
        if rng.random() < 0.4:
            lines.append(f"R r{i % 13}={rng.getrandbits(32):08X}, cpsr={rng.getrandbits(32):08X}")
        if rng.random() < 0.03:
            lines.append(f"E {pc:08X} 00000000 {rng.choice((0x7, 0x19, 0x10001, 0x50002)):X}")
        if rng.random() < 0.005:
            lines.append("this is no Tracer line")
        if rng.random() < 0.08:  # a branch: the fetches ahead never run
            pc, thumb = 0x8000 + 4 * rng.randrange(4096), rng.random() < 0.2
            fetched = {}
        else:
            pc += step
    return ("\n".join(lines) + "\n").encode()


ARMULATOR_RECORD = re.compile(rb"^(?:T [0-9A-F]+ )?(\S+)")


def around_every_armulator_kind(data: bytes, per_kind: int = 4) -> list[int]:
    """Offsets right before and right after lines of each kind of record (the cycle word,
    `IT`, `R`...: up to `per_kind` of each), and every line of the first runs of data accesses
    that follow an opcode fetch not yet claimed."""
    offsets, offset = [], 0
    for line in data.splitlines(keepends=True):
        offsets.append((offset, ARMULATOR_RECORD.match(line).group(1)))
        offset += len(line)
    before: dict[bytes, list[int]] = {}
    after: dict[bytes, list[int]] = {}
    runs: list[int] = []
    for (at, kind), (next_at, next_kind) in itertools.pairwise(offsets):
        before.setdefault(kind, []).append(at)
        after.setdefault(kind, []).append(next_at)
        if kind.endswith(b"O___") and next_kind[:1] in (b"M", b"B") and len(runs) < 40:
            runs += [next_at, next_at + 3]  # at a line, and inside it (moved on to the next)
    chosen = {at for found in (*before.values(), *after.values()) for at in found[:per_kind]}
    return sorted(chosen | set(runs))


@pytest.fixture(scope="module")
def armulator_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("armulator") / "prefetching.trc"
    path.write_bytes(armulator_trace(3000))
    return path


def test_an_armulator_trace_split_around_every_kind_of_record_equals_the_single_ingest(
    client, tmp_path: Path, armulator_input: Path
) -> None:
    splits = around_every_armulator_kind(armulator_input.read_bytes())
    single, split, manifest = split_and_single(client, armulator_input, tmp_path, splits=splits)
    assert manifest["parts"] > 40
    assert manifest["warnings"]["count"] > 5
    assert_same_store(single, split)
    assert load_manifest(split)["notes"] == load_manifest(single)["notes"]


@pytest.mark.parametrize("name", ["seed_example.trc"])
def test_an_armulator_sample_split_before_every_line_equals_the_single_ingest(
    client, tmp_path: Path, name: str
) -> None:
    source = paths.DATA / "armulator" / name
    data = source.read_bytes()
    splits = [at for at in range(1, len(data)) if data[at - 1] == ord("\n")]
    single, split, manifest = split_and_single(client, source, tmp_path, splits=splits)
    assert manifest["parts"] == len(splits) + 1
    assert_same_store(single, split)


def test_an_armulator_line_the_scan_takes_for_an_instruction_renumbers_the_parts_after_it(
    client, tmp_path: Path
) -> None:
    """`IT 0000800G ...` starts like an instruction line, and the parser keeps it as text: the
    parts after the one holding it are decoded again, renumbered."""
    lines = armulator_trace(400, seed=5).splitlines(keepends=True)
    damaged = next(i for i in range(len(lines) // 3, len(lines)) if lines[i].startswith(b"IT "))
    lines[damaged] = b"IT 0000800G e1a00000 MOV r0,r0\n"
    source = tmp_path / "damaged.trc"
    source.write_bytes(b"".join(lines))
    single, split, manifest = split_and_single(
        client, source, tmp_path, part_bytes=-(-source.stat().st_size // 5)
    )
    assert manifest["parts"] == 5
    expected = f"{source}:{damaged + 1}: kept as text: expected a hex number"
    assert any(sample.startswith(expected) for sample in manifest["warnings"]["samples"])
    assert_same_store(single, split)


def test_a_split_store_is_reused_while_its_input_is_unchanged(
    client, tmp_path: Path, armulator_input: Path
) -> None:
    """The manifest records the whole input's hash, as the single-process ingest does: an input
    touched but unchanged keeps its store, one changed does not."""
    from cputrace.ingest import store_is_current

    source = tmp_path / "t.trc"
    shutil.copy(armulator_input, source)
    store = ingest_split(client, source, tmp_path / "t.ctrace", part_bytes=source.stat().st_size // 3).store
    os.utime(source, ns=(1, 1))
    assert store_is_current(store, [source])
    data = bytearray(source.read_bytes())
    data[-10] ^= 1
    source.write_bytes(bytes(data))
    os.utime(source, ns=(1, 1))
    assert not store_is_current(store, [source])


def test_an_ended_ingest_waits_for_the_parts_being_written_then_leaves_nothing(tmp_path: Path) -> None:
    """A part task still writing when its ingest was cancelled (a cluster cannot stop a running
    task): the staging folder is removed only once the part has stopped, at its next write."""
    from cputrace.errors import StoreError
    from cputrace.store.write import PARTS_OPEN, PartitionedStoreWriter, PartWriter

    source = tmp_path / "t.trc"
    shutil.copy(paths.DATA / "armulator" / "seed_example.trc", source)
    with Trace(ingest([source], tmp_path / "single.ctrace").store) as trace:
        rows = trace.table("memory")
    shutil.rmtree(tmp_path / "single.ctrace")
    writer = PartitionedStoreWriter(tmp_path / "t.ctrace", [str(source)])
    part = PartWriter(writer.version, 0, tmp_path / "t.ctrace")
    part.write("memory", part.checked("memory", rows))
    aborting = threading.Thread(target=writer.abort)
    aborting.start()
    while (writer.version / PARTS_OPEN).exists():  # the abort has begun
        time.sleep(0.01)
    assert writer.version.is_dir()  # kept while the part writes
    with pytest.raises(StoreError, match="the ingest ended while part"):
        part.write("memory", part.checked("memory", rows))
    part.abort()
    aborting.join()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.trc"]


def test_an_ingest_interrupted_while_its_parts_are_written_leaves_nothing(
    client, tmp_path: Path, armulator_input: Path
) -> None:
    """Ctrl-C when the first part is written and others are being written: no store and no
    staging folder, then or once the workers are idle."""
    source = tmp_path / "t.trc"
    shutil.copy(armulator_input, source)
    size = source.stat().st_size
    splits = [size * i // 8 for i in range(1, 8)]
    done = []

    def interrupt(_bytes: int) -> None:
        done.append(_bytes)
        if len(done) == len(splits) + 2:  # every range counted, then one part written
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ingest_split(client, source, tmp_path / "t.ctrace", splits=splits, progress=interrupt)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.trc"]
    for _ in range(400):
        if not any(client.processing().values()):
            break
        time.sleep(0.05)
    assert not any(client.processing().values())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.trc"]


def test_an_armulator_split_whose_lookback_is_out_of_reach_is_decoded_from_the_part_before(
    tmp_path: Path, monkeypatch
) -> None:
    """More bytes before a split than the lookback reads without its 8 instructions: the part
    does not join up on its own, and decoded from the end of the part before it, gives the rows
    the single-process ingest gives."""
    from cputrace.formats import DecodeContext
    from cputrace.formats.armulator import split as armulator_split
    from cputrace.inputs import InputFile

    monkeypatch.setattr(armulator_split, "LOOK_BYTES", 256)
    monkeypatch.setattr(armulator_split, "MAX_LOOK_BYTES", 512)
    lines = [f"MNR4O___ {0x8000 + 4 * i:08X} E1A00000\nIT {0x8000 + 4 * i:08X} e1a00000\n" for i in range(6)]
    lines.append("MNR4O___ 00008018 E1A00000\n" + "R r1=00000001\n" * 60)  # a fetch pending over 840 bytes
    lines += [f"IT {0x8018 + 4 * i:08X} e1a00000\n" for i in range(3)]
    source = tmp_path / "t.trc"
    source.write_text("".join(lines))
    at = source.stat().st_size - sum(len(line) for line in lines[-3:])
    file = InputFile(source)
    ranges = [(0, at), (at, file.size)]
    counts = [armulator_split.count_range(file, DecodeContext(), byte_range) for byte_range in ranges]
    carries = armulator_split.first_carries(counts)
    first = armulator_split.RangeDecode(file, DecodeContext(), carries[0], ranges[0], False)
    rows = list(first.batches())
    second = armulator_split.RangeDecode(file, DecodeContext(), carries[1], ranges[1], True)
    list(second.batches())
    assert first.end.pending and not first.end.joins(carries[1], second.facts)
    again = armulator_split.RangeDecode(file, DecodeContext(), first.end, ranges[1], True)
    rows += list(again.batches())
    with Trace(ingest([source], tmp_path / "single.ctrace").store) as single:
        for table in ("instructions", "memory", "registers"):
            split = pa.concat_tables([batch[table] for batch in rows if table in batch])
            assert plain(split).to_pylist() == plain(single.table(table)).to_pylist(), table


def test_the_folder_a_dead_worker_left_in_a_part_is_not_in_the_store(tmp_path: Path) -> None:
    """A worker killed while it wrote a part leaves that part's folder (its task ran again
    elsewhere): the store made is without it."""
    from cputrace.store.write import PartitionedStoreWriter, PartWriter

    source = tmp_path / "t.trc"
    shutil.copy(paths.DATA / "armulator" / "seed_example.trc", source)
    writer = PartitionedStoreWriter(tmp_path / "t.ctrace", [str(source)])
    dead = writer.version / ".part-00000-0123abcd" / "memory"
    dead.mkdir(parents=True)
    (dead / "part-00000.parquet").write_bytes(b"PAR1 cut short")
    files = PartWriter(writer.version, 0, tmp_path / "t.ctrace").close()
    manifest = {"format": "armulator", "inputs": [], "counts": dict.fromkeys(TABLES, 0), "parts": 1}
    store = writer.commit(manifest, files)
    version = store / json.loads((store / "manifest.json").read_text())["data"]
    assert sorted(p.name for p in version.iterdir()) == sorted(TABLES)


# ETMv3: raw streams, split at A-syncs.

TC2 = paths.DATA / "etmv3" / "tc2"
TC2_SOURCES = {0x10: "device_5.ini", 0x13: "device_8.ini"}
"""Two sources of the TC2 snapshot's buffer, an ETMv3.5 and a PTM 1.1, and their device files
(their registers, given to a raw stream as `etm_config`)."""
A_SYNC = re.compile(rb"\x00{5}\x80")


@pytest.fixture(scope="module")
def tc2_streams(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[int, Path], str]:
    """The sources of `TC2_SOURCES` in the TC2 snapshot's ETB buffer as raw streams (their
    bytes taken out of the formatter frames), each three times over, and the kernel image they
    run, as `--image` takes it."""
    import lzma

    from cputrace.coresight.frames import Deformatter

    where = tmp_path_factory.mktemp("tc2-raw")
    streams = Deformatter("coresight").feed((TC2 / "cstrace.bin").read_bytes(), 0, final=True)
    sources = {}
    for trace_id in TC2_SOURCES:
        sources[trace_id] = where / f"source-0x{trace_id:02x}.bin"
        sources[trace_id].write_bytes(bytes(streams[trace_id].data) * 3)
    kernel = where / "kernel_dump.bin"
    kernel.write_bytes(lzma.decompress((TC2 / "kernel_dump.bin.xz").read_bytes()))
    return sources, f"{kernel}@0xC0008000"


def around_every_a_sync(data: bytes, a_syncs: list[int] | None = None, seed: int = 21) -> list[int]:
    """Offsets that hurt, around each A-sync (of `a_syncs`, default every one in `data`): its
    first zero, one before it, inside its zero run, at its 0x80 and just after it; and some at
    random (inside packets)."""
    chosen = set()
    for at in [match.start() for match in A_SYNC.finditer(data)] if a_syncs is None else a_syncs:
        chosen |= {at + delta for delta in (-1, 0, 2, 5, 6)}
    chosen |= set(random.Random(seed).sample(range(1, len(data)), 40))
    return sorted(offset for offset in chosen if 0 < offset < len(data))


@pytest.mark.parametrize("trace_id", TC2_SOURCES, ids=["etmv3", "ptm"])
def test_a_raw_etmv3_stream_split_around_every_a_sync_equals_the_single_ingest(
    client, tmp_path: Path, tc2_streams, trace_id: int
) -> None:
    """Real trace (the ETMv3's cycle-accurate with timestamps, the PTM's with timestamps), split
    before, at, inside and after every A-sync and inside packets: each part numbered from 0
    and shifted after."""
    sources, image = tc2_streams
    source = sources[trace_id]
    splits = around_every_a_sync(source.read_bytes())
    options = {"buffer_format": "source_data", "etm_config": str(TC2 / TC2_SOURCES[trace_id])}
    single = ingest([source], tmp_path / "one.ctrace", format="coresight", options=options, images=[image])
    result = ingest_split(client, source, tmp_path / "split.ctrace", format="coresight", options=options,
                          images=[image], splits=splits)  # fmt: skip
    assert result.manifest["parts"] == len(A_SYNC.findall(source.read_bytes())) + 1  # one from each A-sync
    assert_same_store(single.store, result.store)


def test_a_raw_etmv3_stream_without_an_a_sync_warns_as_the_single_ingest_does(
    client, tmp_path: Path, tc2_streams
) -> None:
    """Source 0x10's bytes before its first A-sync: nothing to decode, nowhere to split. The
    split ingest decoded them as one range in silence, where the single ingest warns."""
    sources, image = tc2_streams
    data = sources[0x10].read_bytes()
    source = tmp_path / "unsynced.bin"
    source.write_bytes(data[: A_SYNC.search(data).start()])
    options = {"buffer_format": "source_data", "etm_config": str(TC2 / TC2_SOURCES[0x10])}
    single = ingest([source], tmp_path / "one.ctrace", format="coresight", options=options, images=[image])
    result = ingest_split(client, source, tmp_path / "split.ctrace", format="coresight", options=options,
                          images=[image], splits=[len(data) // 7])  # fmt: skip
    warnings = result.manifest["warnings"]
    assert warnings["count"] == 1 and "no sync in its" in warnings["samples"][0]
    assert_same_store(single.store, result.store)


def test_a_raw_stream_given_the_coresight_formats_former_name_splits_as_coresight(
    client, tmp_path: Path, tc2_streams
) -> None:
    """`format="etmv3"`, as scripts written before the format was called `coresight` give it,
    finds the format's split module: the stream splits at its A-syncs and the store records
    the format's name now."""
    sources, image = tc2_streams
    source = sources[0x10]
    size = source.stat().st_size
    options = {"buffer_format": "source_data", "etm_config": str(TC2 / TC2_SOURCES[0x10])}
    single = ingest([source], tmp_path / "one.ctrace", format="coresight", options=options, images=[image])
    result = ingest_split(client, source, tmp_path / "split.ctrace", format="etmv3", options=options,
                          images=[image], splits=[size // 3, 2 * size // 3])  # fmt: skip
    assert result.manifest["parts"] == 3
    assert result.manifest["format"] == "coresight"
    assert_same_store(single.store, result.store)


@pytest.fixture(scope="module")
def calls_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list, dict]:
    """The run of the corpus program calls-a32.elf (its steps, and the transfers of its loads
    and stores), recorded under unicorn."""
    pytest.importorskip("unicorn")
    from test_etmv3_data import recorded

    return recorded("calls-a32.elf", tmp_path_factory.mktemp("calls-a32"))


@dataclass
class EncodedRun:
    """A run encoded as an ETMv3 stream: the file, its ingest options and image, and where its
    A-syncs are (those the encoder sent)."""

    path: Path
    options: dict
    image: str
    a_syncs: list[int]

    def ingested(self, store: Path) -> Path:
        """The store of its single-process ingest."""
        return ingest([self.path], store, format="coresight", options=self.options, images=[self.image]).store


def encoded_calls(
    calls_run: tuple[list, dict], tmp_path: Path, *, context: bool = False, a_sync_every: int = 1000,
    full_timestamps: bool = True, program: str = "calls-a32.elf", a_sync_after: frozenset[int] = frozenset(),
) -> EncodedRun:  # fmt: skip
    """`calls_run` encoded as cycle-accurate ETMv3 with data trace (addresses and values) and
    timestamps (only their bits that changed, as an ETM sends them; all of them in the first
    after each A-sync with `full_timestamps`, as TC2's ETMs do), an A-sync and a periodic
    I-sync every `a_sync_every` instructions and after each instruction at a pc of
    `a_sync_after`. With `context`: 4-byte context IDs (all 0), and a periodic I-sync before
    every instruction whose address ends in 0x80 too, whose bytes (0x00 x 5 then 0x80) read like
    an A-sync."""
    from etm_encoder import EtmEncoder, encode_run
    from test_etmv3_data import blocks_of

    steps, memory = calls_run
    enc = EtmEncoder(cycle_accurate=True, data_address=True, data_value=True, context_id_bytes=4 * context)
    a_syncs = [len(enc.data)]
    enc.a_sync()

    def off(i: int) -> tuple[int, int] | None:
        if i + 1 >= len(steps) or steps[i].exception is not None:
            return None
        if i % a_sync_every == a_sync_every - 1 or steps[i].pc in a_sync_after:
            a_syncs.append(len(enc.data))
            enc.a_sync()
            if full_timestamps:
                enc.timestamp_sent = 0
            return i + 1, 0
        if context and steps[i + 1].pc & 0xFF == 0x80 and steps[i + 1].isa == "A32":
            return i + 1, 0
        return None

    blocks = blocks_of(program)
    encode_run(enc, steps, blocks, rng=random.Random(5), memory=memory, off=off, timestamp_every=25)
    stream = tmp_path / "calls.etm"
    stream.write_bytes(enc.data)
    etmcr = (1 << 12) | (1 << 2) | (1 << 3) | (1 << 28) | ((3 << 14) if context else 0)
    options = {"buffer_format": "source_data", "etmcr": etmcr, "etmidr": 0x4100F250, "etmccer": 0x10000000}
    return EncodedRun(stream, options, str(paths.CORPUS / program), a_syncs)


@pytest.mark.parametrize("context", [False, True], ids=["data-trace", "false-a-syncs"])
def test_an_etmv3_stream_with_data_trace_split_everywhere_equals_the_single_ingest(
    client, tmp_path: Path, calls_run, context: bool
) -> None:
    """Data trace (memory rows held back for their instructions), cycle counts and partial
    timestamps across splits; with `context`, split points taken at zero runs that are not
    A-syncs too (an I-sync's context ID and information byte, then an address byte 0x80)."""
    run = encoded_calls(calls_run, tmp_path, context=context)
    data = run.path.read_bytes()
    taken = run.a_syncs
    if context:
        false = sorted({match.start() for match in A_SYNC.finditer(data)} - set(run.a_syncs))
        assert false, "the stream has false A-syncs"
        taken = sorted([*taken, *random.Random(7).sample(false, min(20, len(false)))])
    single = run.ingested(tmp_path / "one.ctrace")
    with Trace(single) as whole:
        assert whole.manifest["counts"]["memory"] > 1000
    result = ingest_split(client, run.path, tmp_path / "split.ctrace", format="coresight",
                          options=run.options, images=[run.image],
                          splits=around_every_a_sync(data, taken))  # fmt: skip
    assert result.manifest["parts"] > 20
    assert_same_store(single, result.store)


def test_a_thumb_stream_split_inside_its_it_blocks_equals_the_single_ingest(client, tmp_path: Path) -> None:
    """calls-t32's run with an A-sync and an I-sync after every IT instruction it runs: each
    range but the first starts its walk inside an IT block, whose conditional instructions
    (executed or not, as the atoms say) must come out as the single ingest's."""
    pytest.importorskip("unicorn")
    from test_etmv3_data import recorded

    from cputrace.image import load_image_spec

    program = "calls-t32.elf"
    (tmp_path / "run").mkdir()
    steps, memory = recorded(program, tmp_path / "run")
    image = load_image_spec(str(paths.CORPUS / program))
    it_pcs = set()  # IT: 0xBFxx with a nonzero mask (0xBFx0 are the hints)
    for step in steps:
        if step.isa == "T32":
            halfword = int.from_bytes(image.read(step.pc, 2), "little")
            if halfword >> 8 == 0xBF and halfword & 0xF:
                it_pcs.add(step.pc)
    inside = [i + 1 for i, step in enumerate(steps[:-1]) if step.pc in it_pcs]
    assert len(inside) > 20 and any(not steps[i].executed for i in inside), "IT blocks that run, some failing"
    run = encoded_calls((steps, memory), tmp_path, program=program, a_sync_after=frozenset(it_pcs),
                        a_sync_every=len(steps))  # fmt: skip
    single = run.ingested(tmp_path / "one.ctrace")
    cuts = sorted(random.Random(3).sample(run.a_syncs[1:], 12))
    result = ingest_split(client, run.path, tmp_path / "split.ctrace", format="coresight",
                          options=run.options, images=[run.image], splits=cuts)  # fmt: skip
    assert result.manifest["parts"] == len(cuts) + 1
    assert_same_store(single, result.store)
    with Trace(single) as whole:
        executed = whole.table("instructions").column("executed").to_pylist()
    assert executed == [step.executed for step in steps[: len(executed)]]


def test_an_etmv3_range_whose_warm_up_missed_the_timestamp_is_decoded_from_the_range_before(
    tmp_path: Path, monkeypatch, calls_run
) -> None:
    """A warm-up of one A-sync, which sees only the low bits of the timestamp: the range does
    not join up with the one before; decoded again from that one's end, its rows are those
    of the single-process ingest."""
    from cputrace.formats import DecodeContext, check_options
    from cputrace.formats.coresight import split
    from cputrace.image import load_image_specs
    from cputrace.inputs import InputFile

    monkeypatch.setattr(split, "WARM_SYNCS", 1)
    run = encoded_calls(calls_run, tmp_path, a_sync_every=300, full_timestamps=False)
    file = InputFile(run.path)

    def context() -> DecodeContext:
        ctx = DecodeContext(options=check_options(dict(run.options), {"coresight"}))
        ctx.image = load_image_specs([run.image])
        return ctx

    at = split.split_points(file, [file.size // 2])[1]
    ranges = [(0, at), (at, file.size)]
    carries = split.first_carries([None, None])
    first = split.RangeDecode(file, context(), carries[0], ranges[0], False)
    rows = list(first.batches())
    second = split.RangeDecode(file, context(), carries[1], ranges[1], True)
    list(second.batches())
    assert second.facts.warmed.at == first.end.at == at
    assert not first.end.joins(carries[1], second.facts)
    warmed, ended = second.facts.warmed.state["packets"]["scan"], first.end.state["packets"]["scan"]
    assert warmed["timestamp"] != ended["timestamp"]  # what the warm-up missed
    again = split.RangeDecode(file, context(), first.end, ranges[1], True)
    rows += list(again.batches())
    assert first.end.joins(first.end, again.facts)
    with Trace(run.ingested(tmp_path / "one.ctrace")) as single:
        for table in ("instructions", "memory", "events"):
            got = pa.concat_tables([batch[table] for batch in rows if table in batch])
            assert plain(got).to_pylist() == plain(single.table(table)).to_pylist(), table


def test_an_etmv3_snapshot_is_ingested_whole(client, tmp_path: Path) -> None:
    notes: list[str] = []
    single = ingest([TC2 / "snapshot.ini"], tmp_path / "single.ctrace").store
    result = ingest_split(client, TC2 / "snapshot.ini", tmp_path / "split.ctrace", part_bytes=4096,
                          on_note=notes.append)  # fmt: skip
    assert notes == [f"{TC2 / 'snapshot.ini'}: not split: a snapshot's buffers are decoded whole"]
    assert "parts" not in result.manifest
    assert_same_store(single, result.store, identity=False)
