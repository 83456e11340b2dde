"""Frames streamed from a sorted spill (analysis/calls/frames.py) are the in-memory call tree's, whatever
the spill and block sizes: rows, self costs, timeline events, and the `calls --tree` outputs."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
import test_calls
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from test_calls import IMAGES, TTU, stores  # noqa: F401  (a fixture)

from cputrace.analysis.calls import frames as framestream
from cputrace.analysis.calls.log import Method
from cputrace.analysis.calls.tables import FRAME_SCHEMA
from cputrace.cli import cli
from cputrace.cli.analysis import _tree_text


def _reference_events(frames: list[dict], cpu: int, clock: str) -> list[tuple]:
    """(opens, at, function address, index, end index, end) of a core's frames, by a plain stack."""
    events: list[tuple] = []
    stack: list[tuple] = []
    mine = [f for f in frames if f["cpu"] == cpu]
    for f in mine:
        start = f["entry_time"] if clock == "time" else f["index"]
        end = start + (f["time"] if clock == "time" else f["insns"])
        while stack and stack[-1][-1] <= start:
            closing = stack.pop()
            events.append((False, closing[-1], *closing[2:]))
        frame = (True, start, f["function"], f["index"], f["index"] + f["insns"], end)
        events.append(frame)
        stack.append(frame)
    while stack:
        closing = stack.pop()
        events.append((False, closing[-1], *closing[2:]))
    return events


def _streamed(pcs, writes, cuts) -> tuple[pa.Table, dict[tuple[int, str], list[tuple]]]:
    """The frames table and each core's timeline events (function as its address) of a random
    execution, through the spill."""
    with tempfile.TemporaryDirectory() as folder:
        spill = framestream.FrameSpill(Path(folder))
        test_calls.fed(pcs, writes, cuts, Method.REGISTERS, spill)
        stream = spill.stream(None)
        try:
            rows = pa.Table.from_batches(list(stream.rows()), schema=FRAME_SCHEMA)
            timelines = {}
            for core in stream.cores:
                for clock in ("insns", "time"):
                    events = []
                    for opens, at, function, index, end_index, end in stream.timeline(core, clock).events:
                        addresses = [int(stream.addresses[f]) for f in function]
                        events += zip(opens, at, addresses, index, end_index, end, strict=True)
                    timelines[core.cpu, clock] = events
        finally:
            stream.close()
    return rows, timelines


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_streamed_frames_are_the_call_trees_whatever_the_blocks(data):
    pcs, writes = test_calls.random_calls(data.draw)
    cuts = data.draw(st.lists(st.integers(0, 400), max_size=6))
    block = data.draw(st.integers(1, 40))
    spill_rows = data.draw(st.integers(1, 40))
    tree = test_calls.fed(pcs, writes, [], Method.REGISTERS).tree()
    expected = tree.frames
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(framestream, "_BLOCK", block)
        patch.setattr(framestream, "_SPILL_ROWS", spill_rows)
        rows, timelines = _streamed(pcs, writes, cuts)
    assert rows.to_pylist() == expected.to_pylist()
    frames = expected.to_pylist()
    for (cpu, clock), events in timelines.items():
        assert events == _reference_events(frames, cpu, clock)


def test_spill_folder_is_removed(stores, monkeypatch):  # noqa: F811
    trace = stores(*TTU, "tests", "quicksort.tarmac")
    made = []
    original = framestream.FrameSpill.__init__

    def spy(self, folder: Path) -> None:
        made.append(folder)
        original(self, folder)

    monkeypatch.setattr(framestream.FrameSpill, "__init__", spy)
    with framestream.frame_stream(trace) as stream:
        assert len(stream) == 29 and made[0].is_dir()
    assert not made[0].exists()


def _nested(frames: list[dict]) -> list[dict]:
    """The `calls --tree --format json` structure, built from the in-memory tree."""
    nodes: dict[int, dict] = {}
    roots = []
    for row in frames:
        node = {
            "cpu": row["cpu"], "name": row["name"], "address": row["function"],
            **{site: None if row[f"{site}_seq"] is None
               else {k: row[f"{site}_{k}"] for k in ("seq", "time", "pc", "src")}
               for site in ("call", "entry", "exit", "resume")},
            "insns": row["insns"], "insns_self": row["insns_self"], "time": row["time"],
            "time_self": row["time_self"], "calls": [],
        }  # fmt: skip
        nodes[row["id"]] = node
        (roots if row["parent"] is None else nodes[row["parent"]]["calls"]).append(node)
    return roots


@pytest.mark.parametrize(
    ("where", "name"),
    [(("quicksort.tarmac",), "quicksort"), (("calltests", "calltest64.tarmac"), "calltest64")],
)
def test_calls_tree_command_streams_the_call_tree(stores, where, name):  # noqa: F811
    trace = stores(*TTU, "tests", *where)
    elf = IMAGES / f"{name}.elf"
    tree = test_calls.build(trace, f"{name}.elf")
    runner = CliRunner()
    base = ["calls", str(trace.path), "--image", str(elf), "--tree"]
    text = runner.invoke(cli, base)
    assert text.exit_code == 0, text.output
    expected = io.StringIO()
    _tree_text(tree.frames.to_batches(), expected)
    assert text.output == expected.getvalue()
    as_json = runner.invoke(cli, [*base, "--format", "json"])
    assert json.loads(as_json.output) == _nested(tree.frames.to_pylist())
    as_csv = runner.invoke(cli, [*base, "--format", "csv"]).output.splitlines()
    assert as_csv[0].split(",") == tree.frames.column_names and len(as_csv) == 1 + len(tree)
