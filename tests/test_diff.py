"""Trace diff: alignment and resynchronisation, edited traces, and real producers compared."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import shared

import cputrace
from cputrace.analysis.diff import KINDS, DiffOptions, DiffResult, _Chunk, _compare, _Side, align, diff_traces
from cputrace.cli import cli
from cputrace.ingest import ingest


def _pairs(a: list[int], b: list[int], window: int = 16, sync: int = 3) -> list[tuple[int, int]]:
    ia, ib = align(np.array(a, np.uint64), np.array(b, np.uint64), window, sync)
    return list(zip(ia.tolist(), ib.tolist(), strict=True))


def test_align_resynchronises_after_insertions_deletions_and_changes() -> None:
    base = list(range(100, 140))
    assert _pairs(base, base) == [(i, i) for i in range(40)]
    inserted = [*base[:10], 1, 2, 3, *base[10:]]
    assert _pairs(base, inserted) == [(i, i if i < 10 else i + 3) for i in range(40)]
    deleted = base[:10] + base[15:]
    assert _pairs(base, deleted) == [(i, i if i < 10 else i - 5) for i in range(40) if not 10 <= i < 15]
    changed = [*base[:10], 7, *base[11:]]
    assert _pairs(base, changed) == [(i, i) for i in range(40) if i != 10]
    # one equal pc is not enough to resynchronise: `sync` pcs must agree
    a, b = [1, 2, 9, 5, 6, 7, 8], [1, 2, 5, 0, 5, 6, 7, 8]
    assert _pairs(a, b, sync=3) == [(0, 0), (1, 1), (3, 4), (4, 5), (5, 6), (6, 7)]
    assert _pairs(a, b, sync=1) == [(0, 0), (1, 1), (3, 2), (4, 5), (5, 6), (6, 7)]
    # nothing agrees within the window: the rest stays unaligned
    assert _pairs(base, base[:5] + list(range(500, 560)), window=8) == [(i, i) for i in range(5)]


QUICKSORT = ("tarmac-trace-utilities", "tests", "quicksort.tarmac")


def _store(tmp_path: Path, name: str, text: str) -> cputrace.Trace:
    path = tmp_path / f"{name}.tarmac"
    path.write_text(text)
    ingest([path], tmp_path / f"{name}.ctrace")
    return cputrace.open(tmp_path / f"{name}.ctrace")


def _seq_of(trace: cputrace.Trace, line: int) -> int:
    return trace.sql(f"SELECT seq FROM instructions WHERE src = {line}").column("seq")[0].as_py()


def test_identical_traces(tmp_path: Path) -> None:
    text = shared(*QUICKSORT).read_text()
    a, b = _store(tmp_path, "a", text), _store(tmp_path, "b", text)
    result = diff_traces(a, b)
    assert result.same and result.paired == a.manifest["counts"]["instructions"]
    assert result.divergences == [] and result.only_a == result.only_b == 0


def test_edited_trace_divergences_are_found_and_the_streams_resynchronise(tmp_path: Path) -> None:
    lines = shared(*QUICKSORT).read_text().splitlines()
    edited = list(lines)
    # line numbers are 1-based: 212 "R X21 ...0002", 209 the STRB, 352..357 a loop iteration
    assert edited[211].endswith("R X21 0000000000000002")
    edited[211] = edited[211][:-1] + "9"
    assert "STRB" in edited[208]
    edited[208] = edited[208].replace("38356a8a", "38356a8b")
    assert edited[215].startswith("29 clk IT (29)")
    edited[215] = "30" + edited[215][2:]
    extra = [line for line in lines[351:357] if " IT " in line or " IS " in line][:3]
    edited[600:600] = extra  # three instructions only B has
    a, b = _store(tmp_path, "a", "\n".join(lines) + "\n"), _store(tmp_path, "b", "\n".join(edited) + "\n")
    result = diff_traces(a, b, DiffOptions(ignore_time=True))
    by_kind = {d.kinds: d for d in result.divergences}
    assert by_kind[("registers",)].a_seq == _seq_of(a, 211)  # the ADD that wrote x21
    assert by_kind[("opcode",)].a_seq == _seq_of(a, 209)
    run = by_kind[("unaligned",)]
    assert (run.a_count, run.b_count, run.a_seq) == (0, 3, None)
    assert run.b_seq == _seq_of(b, 601)
    assert result.total == 3 and result.only_b == 3 and result.only_a == 0
    assert [d.kinds for d in result.divergences] == [("opcode",), ("registers",), ("unaligned",)]
    assert result.paired == a.manifest["counts"]["instructions"]  # everything else pairs up again
    assert (
        diff_traces(a, b, DiffOptions(ignore_time=True, ignore_registers=("x2?",))).counts["registers"] == 0
    )
    timed = diff_traces(a, b)
    assert timed.counts["time"] == 1 and timed.total == 4
    assert [d.a_seq for d in timed.divergences if "time" in d.kinds] == [_seq_of(a, 216)]


SAMPLES = ("tarmac-trace-utilities", "samples")


def test_fast_models_against_the_es_ld_st_style_trace(open_input) -> None:
    fast = shared(*SAMPLES, "calculator-aarch64-fastmodel.tarmac")
    es = shared(*SAMPLES, "calculator-aarch64-es-ld-st-style.tarmac")
    result = diff_traces(open_input(fast), open_input(es), DiffOptions(ignore_time=True))
    # Same instructions, register values and stored bytes (LD/ST lines against MW records).
    # Fast Models marks failed conditional branches IS; this producer prints every one as
    # executed.
    condition_failed = sum(1 for line in fast.read_text().splitlines() if " IS " in line)
    assert result.paired == result.a_instructions == result.b_instructions
    assert {kind: result.counts[kind] for kind in KINDS} == {
        "unaligned": 0, "opcode": 0, "executed": condition_failed, "time": 0, "registers": 0, "memory": 0,
    }  # fmt: skip


def test_fast_models_against_gem5(open_input) -> None:
    fast = open_input(shared(*SAMPLES, "calculator-aarch64-fastmodel.tarmac"))
    gem5_path = shared(*SAMPLES, "calculator-aarch64-gem5.tarmac")
    gem5 = open_input(gem5_path)
    result = diff_traces(
        fast, gem5, DiffOptions(ignore_time=True, ignore_registers=("sp_*", "cpsr")), limit=1000
    )
    assert result.paired == result.a_instructions == result.b_instructions
    # gem5 prints load pairs as 16-byte memory writes (MW16), so each is a memory divergence
    pair_loads = len(re.findall(r" MW16 ", gem5_path.read_text()))
    assert result.counts["memory"] == pair_loads > 0
    # and it leaves out the semihosting results that Fast Models shows in x0 after HLT
    registers = [d.a_seq for d in result.divergences if "registers" in d.kinds]
    halts = fast.sql(
        "SELECT DISTINCT seq FROM instructions JOIN registers USING (seq) "
        "WHERE disasm LIKE 'HLT%' AND reg = 'x0'"
    )
    assert sorted(registers) == sorted(halts.column("seq").to_pylist())


def test_cli_diff(tmp_path: Path) -> None:
    text = shared(*QUICKSORT).read_text()
    a = _store(tmp_path, "a", text)
    b = _store(tmp_path, "b", text.replace("R X21 0000000000000002", "R X21 0000000000000009", 1))
    runner = CliRunner()
    same = runner.invoke(cli, ["diff", str(a.path), str(a.path), "--exit-code"])
    assert same.exit_code == 0 and "no divergence in" in same.output
    differ = runner.invoke(cli, ["diff", str(a.path), str(b.path), "--context", "1"])
    assert differ.exit_code == 0, differ.output
    lines = differ.output.splitlines()
    assert lines[2] == f"first divergence: cpu 0  A seq {_seq_of(a, 211)}  B seq {_seq_of(b, 211)}  registers"
    assert "  register x21: A 0x2  B 0x9" in lines
    assert sum(1 for line in lines if line.startswith("  >")) == 2
    assert runner.invoke(cli, ["diff", str(a.path), str(b.path), "--exit-code"]).exit_code == 3
    body = json.loads(runner.invoke(cli, ["diff", str(a.path), str(b.path), "--format", "json"]).output)
    assert body["same"] is False and body["counts"]["registers"] == 1 and body["divergences"] == 1


@pytest.mark.parametrize("window", [1, 3])
def test_small_windows_still_terminate(window: int) -> None:
    a = np.arange(1000, dtype=np.uint64)
    b = np.concatenate([a[:500], np.arange(5000, 5010, dtype=np.uint64), a[500:]])
    ia, _ = align(a, b, window, 4)
    assert len(ia) == 500  # 10 inserted instructions are beyond a window of 1 or 3


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 20), max_size=200),
    st.lists(st.tuples(st.integers(0, 199), st.integers(0, 2), st.lists(st.integers(0, 20), max_size=4))),
    st.integers(1, 8),
    st.integers(1, 5),
)
def test_align_pairs_equal_keys_in_order(keys, edits, window, sync) -> None:
    edited = list(keys)
    for at, delete, insert in edits:  # replace `delete` keys at `at` by `insert`
        edited[at : at + delete] = insert
    a, b = np.array(keys, np.uint64), np.array(edited, np.uint64)
    ia, ib = align(a, b, window, sync)
    assert (np.diff(ia) > 0).all() and (np.diff(ib) > 0).all()
    assert (a[ia] == b[ib]).all()
    if not edits:
        assert len(ia) == len(keys)


# -- streaming: both traces are read in chunks; results must not depend on where chunks end --


def _instruction_groups(text: str) -> tuple[list[str], list[list[str]]]:
    """The lines before the first instruction, and each instruction's lines (its line, then records)."""
    head: list[str] = []
    groups: list[list[str]] = []
    for line in text.splitlines():
        if " IT " in line or " IS " in line:
            groups.append([line])
        elif groups:
            groups[-1].append(line)
        else:
            head.append(line)
    return head, groups


def _text(head: list[str], groups: list[list[str]]) -> str:
    return "\n".join(head + [line for group in groups for line in group]) + "\n"


def _foreign(group: list[str], pc: int) -> list[str]:
    """The instruction moved to `pc`, an address the program never runs."""
    fields = group[0].split(" ")
    fields[4] = f"{pc:08x}"
    return [" ".join(fields)]


def _pcs(trace: cputrace.Trace, cpu: int = 0) -> np.ndarray:
    query = f"SELECT pc FROM instructions WHERE cpu = {cpu} ORDER BY seq"
    return trace.sql(query).column("pc").to_numpy().astype(np.uint64)


@pytest.mark.parametrize("rows", [5, 16])
def test_chunked_diff_equals_the_whole_stream_answer(tmp_path: Path, rows: int) -> None:
    head, groups = _instruction_groups(shared(*QUICKSORT).read_text())
    edited = [list(g) for g in groups]
    # a written value changed in the last writing instruction before and the first from a
    # boundary between chunks of A (every `rows` instructions), at two boundaries
    writers = [k for k, g in enumerate(groups) if any(" R X" in line or " MW" in line for line in g)]
    changed = [
        pick(k for k in writers if (k < boundary) == before)
        for boundary in (4 * rows, 9 * rows)
        for pick, before in ((max, True), (min, False))
    ]
    for at in changed:
        i = next(i for i, line in enumerate(edited[at]) if " R X" in line or " MW" in line)
        edited[at][i] = edited[at][i][:-1] + ("5" if edited[at][i][-1] != "5" else "6")
    del edited[20 * rows - 2 : 20 * rows + 1]  # three instructions only A has, across a boundary
    edited[30 * rows : 30 * rows] = [_foreign(g, 0x40000 + 4 * k) for k, g in enumerate(groups[:5])]
    edited[40 * rows] = _foreign(edited[40 * rows], 0x50000)  # one changed pc
    a = _store(tmp_path, "a", _text(head, groups))
    b = _store(tmp_path, "b", _text(head, edited))
    options = DiffOptions(window=16)
    whole = diff_traces(a, b, options, limit=1000)
    assert diff_traces(a, b, options, limit=1000, rows=rows) == whole
    assert diff_traces(a, b, options, limit=3, rows=rows).divergences == whole.divergences[:3]
    assert whole.paired == len(align(_pcs(a), _pcs(b), 16, options.sync)[0])
    written = [d.a_seq for d in whole.divergences if {"registers", "memory"} & set(d.kinds)]
    assert written[:4] == changed  # A's seqs count its instructions from 0


@pytest.mark.parametrize("window", [64, 16])
def test_a_run_only_b_has_spans_chunk_boundaries(tmp_path: Path, window: int) -> None:
    head, groups = _instruction_groups(shared(*QUICKSORT).read_text())
    run = [_foreign(g, 0x40000 + 4 * k) for k, g in enumerate(groups[200:240])]
    a = _store(tmp_path, "a", _text(head, groups))
    b = _store(tmp_path, "b", _text(head, groups[:101] + run + groups[101:]))
    options = DiffOptions(window=window)
    result = diff_traces(a, b, options, rows=16)  # the 40 instructions span three chunk boundaries
    assert result == diff_traces(a, b, options)
    first = result.divergences[0]
    if window > len(run):  # the streams resynchronise after the run
        assert (first.kinds, first.a_seq, first.a_count, first.b_count) == (("unaligned",), None, 0, len(run))
        assert first.b_seq == b.sql("SELECT seq FROM instructions WHERE pc = 262144").column("seq")[0].as_py()
        assert result.total == 1 and result.paired == result.a_instructions
    else:  # nothing agrees within the window: from the run on, nothing pairs
        assert result.paired == 101 == len(align(_pcs(a), _pcs(b), window, options.sync)[0])
        assert result.only_a == result.a_instructions - 101 and result.only_b == result.b_instructions - 101


def test_cores_are_compared_apart_whatever_their_interleaving(tmp_path: Path) -> None:
    head, groups = _instruction_groups(shared(*QUICKSORT).read_text())

    def core(cpu: int, group: list[str]) -> list[str]:
        return [line.replace(" clk ", f" clk cpu{cpu} ", 1) for line in group]

    def interleaved(steps: tuple[int, int], changed: int | None = None) -> str:
        lines = [line.replace(" clk ", " clk cpu0 ", 1) for line in head]
        cores = [[core(0, g) for g in groups], [core(1, g) for g in groups[:1500]]]
        if changed is not None:  # one instruction of core 1 marked condition-failed
            cores[1][changed][0] = cores[1][changed][0].replace(" IT ", " IS ")
        at = [0, 0]
        while at[0] < len(cores[0]) or at[1] < len(cores[1]):
            for c in (0, 1):
                lines += [line for g in cores[c][at[c] : at[c] + steps[c]] for line in g]
                at[c] += steps[c]
        return "\n".join(lines) + "\n"

    a = _store(tmp_path, "a", interleaved((1, 1)))
    b = _store(tmp_path, "b", interleaved((50, 3), changed=700))
    result = diff_traces(a, b, rows=32)
    assert result == diff_traces(a, b)
    assert result.cpus == [0, 1] and result.paired == result.a_instructions == result.b_instructions
    assert [(d.cpu, d.kinds) for d in result.divergences] == [(1, ("executed",))]


def _side(keys: np.ndarray, rows: int) -> _Side:
    """Keys as one core's instruction pcs (seq = index), handed out `rows` at a time."""
    zeros = (np.int64, bool, np.int64, np.uint64, np.uint64)  # opcode, executed, time, hashes
    starts = range(0, len(keys), rows)
    seqs = (np.arange(lo, min(lo + rows, len(keys))) for lo in starts)
    return _Side(_Chunk(seq, keys[seq], *(np.zeros(len(seq), t) for t in zeros)) for seq in seqs)


_LOOPS = st.builds(lambda n, period: [k % period for k in range(n)], st.integers(0, 150), st.integers(1, 40))


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.lists(st.integers(0, 20), max_size=150), _LOOPS),
    st.lists(st.tuples(st.integers(0, 149), st.integers(0, 4), st.lists(st.integers(0, 40), max_size=6))),
    st.integers(1, 8),
    st.integers(1, 5),
    st.integers(1, 20),
    st.integers(1, 20),
)
def test_alignment_in_chunks_is_the_alignment_of_the_whole(keys, edits, window, sync, rows_a, rows_b) -> None:
    edited = list(keys)
    for at, delete, insert in edits:
        edited[at : at + delete] = insert
    a, b = np.array(keys, np.uint64), np.array(edited, np.uint64)
    ia, ib = align(a, b, window, sync)
    result = DiffResult(cpus=[0])
    options = DiffOptions(window=window, sync=sync)
    found = _compare(0, _side(a, rows_a), _side(b, rows_b), options, result, limit=len(a) + len(b) + 1)
    assert result.paired == len(ia) and (result.a_instructions, result.b_instructions) == (len(a), len(b))
    prev_a, next_a = np.r_[-1, ia], np.r_[ia, len(a)]
    prev_b, next_b = np.r_[-1, ib], np.r_[ib, len(b)]
    gaps = np.flatnonzero((next_a - prev_a > 1) | (next_b - prev_b > 1)).tolist()
    expected = [
        (
            int(prev_a[g] + 1) if next_a[g] - prev_a[g] > 1 else None,
            int(prev_b[g] + 1) if next_b[g] - prev_b[g] > 1 else None,
            int(next_a[g] - prev_a[g] - 1),
            int(next_b[g] - prev_b[g] - 1),
        )
        for g in gaps
    ]
    runs = [(d.a_seq, d.b_seq, d.a_count, d.b_count) for d in found if d.kinds == ("unaligned",)]
    assert runs == expected and result.counts["unaligned"] == len(gaps)
