"""The fuzz harness (fuzz/) classifies what it sees correctly, and makes the same cases again.

A worker is forked from this process, so an `ingest` replaced here (monkeypatch) is what the
worker runs: each outcome is provoked on purpose and must be named for what it is.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import signal
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cputrace.errors import CputraceError
from cputrace.store.manifest import table_path
from fuzz import mutate
from fuzz.__main__ import load_case
from fuzz.campaign import save_crasher
from fuzz.case import BLOWUP, CRASH, ERROR, HANG, INVALID, OK, VAGUE, Result, make_case, run_case, seed_case
from fuzz.targets import FAMILIES, all_targets
from fuzz.worker import Limits, Worker

MIB = 1 << 20
INGEST = importlib.import_module("cputrace.ingest")  # the module (cputrace.ingest is the function)


def target(name: str):
    return next(t for t in all_targets() if t.name == name)


def in_worker(tmp_path: Path, case, *, strict: bool = False, seconds: float = 60.0, memory: int = 512 * MIB):
    worker = Worker(tmp_path / "worker", memory)
    result, alive = worker.run(case, strict, Limits(seconds, memory))
    if alive:
        worker.close()
    return result, alive


def test_every_family_has_targets_whose_seeds_load() -> None:
    targets = all_targets()
    assert {t.family for t in targets} == set(FAMILIES)
    for t in targets:
        files = t.load()
        assert files[t.main], t.name
        assert set(t.images) <= {s.name for s in t.seeds} | {i for i in t.images if "@" in i}


def test_a_seed_ingests_and_its_store_keeps_the_model(tmp_path: Path) -> None:
    t = target("armulator-example")
    result = run_case(seed_case(t, t.load()), True, tmp_path / "case")
    assert result.outcome == OK, result


def test_an_error_naming_the_input_is_documented_and_one_naming_nothing_vague(tmp_path, monkeypatch) -> None:
    t = target("armulator-example")
    case = seed_case(t, t.load())
    case.files[t.main], case.format = b"", None  # sniffing: an empty input is no trace
    result = run_case(case, False, tmp_path / "case")
    assert (result.outcome, result.signature.split(" at ")[0]) == (ERROR, "TraceFormatError")

    def vague(*args, **kwargs):
        raise CputraceError("something went wrong")

    monkeypatch.setattr(INGEST, "ingest", vague)
    assert run_case(seed_case(t, t.load()), False, tmp_path / "case").outcome == VAGUE


def test_an_exception_is_a_crash_located_in_cputrace(tmp_path, monkeypatch) -> None:
    def broken(inputs, *args, **kwargs):
        return INGEST.default_store_path(None)  # TypeError inside cputrace

    monkeypatch.setattr(INGEST, "ingest", broken)
    t = target("armulator-example")
    result, alive = in_worker(tmp_path, seed_case(t, t.load()))
    assert alive and result.outcome == CRASH
    assert result.signature.startswith("TypeError at cputrace/ingest.py:")
    assert "in default_store_path" in result.signature


def test_a_stopiteration_leaving_a_generator_is_named_for_itself(tmp_path, monkeypatch) -> None:
    def records():
        yield next(iter(()))  # StopIteration here becomes a RuntimeError where it is consumed

    monkeypatch.setattr(INGEST, "ingest", lambda *a, **k: list(records()))
    t = target("armulator-example")
    result = run_case(seed_case(t, t.load()), False, tmp_path / "case")
    assert result.outcome == CRASH and result.signature.startswith("StopIteration at ")
    assert "generator raised StopIteration" in result.message


def test_a_fatal_signal_is_a_crash_and_the_worker_is_replaced(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(INGEST, "ingest", lambda *a, **k: os.kill(os.getpid(), signal.SIGSEGV))
    t = target("armulator-example")
    result, alive = in_worker(tmp_path, seed_case(t, t.load()))
    assert not alive
    assert result.outcome == CRASH and result.signature.startswith("SIGSEGV")


def test_a_case_past_its_cpu_time_is_a_hang(tmp_path, monkeypatch) -> None:
    def spin(*args, **kwargs):
        while True:
            pass

    monkeypatch.setattr(INGEST, "ingest", spin)
    t = target("armulator-example")
    result, alive = in_worker(tmp_path, seed_case(t, t.load()), seconds=0.5)
    assert not alive and result.outcome == HANG
    assert "in spin" in result.traceback  # the stack the worker wrote before it was killed


def test_a_case_past_its_memory_is_a_blowup(tmp_path, monkeypatch) -> None:
    def hoard(*args, **kwargs):
        held = []
        while True:
            held.append(bytearray(8 * MIB))  # zero-filled: resident at once
            time.sleep(0.01)

    monkeypatch.setattr(INGEST, "ingest", hoard)
    t = target("armulator-example")
    result, alive = in_worker(tmp_path, seed_case(t, t.load()), memory=64 * MIB)
    assert not alive and result.outcome == BLOWUP
    assert "in hoard" in result.traceback


def test_a_store_out_of_seq_order_is_invalid(tmp_path, monkeypatch) -> None:
    real = INGEST.ingest

    def shuffled(*args, **kwargs):
        result = real(*args, **kwargs)
        path = table_path(result.store, "memory")
        table = pq.read_table(path)
        assert table.num_rows > 1
        seq = table.column("seq").to_pylist()
        table = table.set_column(0, table.schema.field("seq"), pa.array(seq[::-1], pa.int64()))
        pq.write_table(table, path)
        return result

    monkeypatch.setattr(INGEST, "ingest", shuffled)
    t = target("armulator-example")
    result = run_case(seed_case(t, t.load()), False, tmp_path / "case")
    assert result.outcome == INVALID and result.signature == "invalid store: memory seq order"


def test_cases_are_made_again_from_the_seed_and_number() -> None:
    t = target("etmv3-tc2-snapshot")
    files = t.load()
    donors = {"ini": mutate.Donors([files["trace.ini"]])}
    made = [make_case(t, files, donors, 17, n) for n in range(40)]
    again = [make_case(t, files, donors, 17, n) for n in range(40)]
    assert [(c.files, c.options, c.mutations) for c in made] == [
        (c.files, c.options, c.mutations) for c in again
    ]
    assert len({repr(c.mutations) for c in made}) > 30
    assert {c.mutated for c in made} > {"snapshot.ini", "cstrace.bin"}


def test_a_saved_crasher_replays_as_the_same_case(tmp_path: Path) -> None:
    t = target("leon-itb-itb-filtered")
    files = t.load()
    cases = (make_case(t, files, {}, 3, n) for n in range(100))
    case = next(c for c in cases if c.mutated == "itb-filtered.bin.json")
    path = save_crasher(tmp_path, case, "strict", Result(CRASH, signature="X at y"), t)
    loaded, mode = load_case(path)
    assert mode == "strict"
    assert (loaded.files, loaded.options, loaded.images, loaded.format) == (
        case.files, case.options, case.images, case.format,
    )  # fmt: skip
    assert json.loads(path.read_text())["mutations"] == case.mutations


@pytest.mark.parametrize("kind", sorted(mutate.MUTATORS))
def test_every_mutator_of_a_kind_changes_its_input(kind: str) -> None:
    data = b"[a]\nkey=0x10\nother = 12\n" if kind == "ini" else b'{"cpu": 1, "itbc0": "0x20"}'
    if kind in ("text", "binary", "image"):
        data = b"IT (1) 00008000 e3a00001 A svc_s : MOV r0,#1\nR r0 00000001\n"
    for function, _ in mutate.MUTATORS[kind]:
        changed = {function(data, random.Random(n), mutate.Donors([data]))[0] != data for n in range(20)}
        assert True in changed, function.__name__
