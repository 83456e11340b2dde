"""Flat profiles: totals that must add up, agreement with the trace's own records, source lines
through DWARF, plots, and the command line."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import test_calls
from click.testing import CliRunner
from paths import DATA
from test_calls import IMAGES, TTU, build

import cputrace
from cputrace.analysis.profile import TABLES, profile
from cputrace.cli import cli
from cputrace.image import load_elf
from cputrace.store.window import Window

stores = test_calls.stores  # the session fixture of ingested shared traces

SAMPLES = [("tests", "quicksort.tarmac", "quicksort.elf"),
           ("samples", "calculator-aarch32-fastmodel.tarmac", "calculator-aarch32.elf")]  # fmt: skip


def _sql_one(trace: cputrace.Trace, query: str) -> int:
    return trace.sql(query).column(0)[0].as_py()


@pytest.mark.parametrize(("folder", "name", "elf"), SAMPLES)
def test_profile_adds_up_and_agrees_with_the_records(stores, folder, name, elf):
    trace = stores(*TTU, folder, name)
    image = load_elf(IMAGES / elf)
    result = profile(trace, image=image)
    instructions = trace.manifest["counts"]["instructions"]
    span = _sql_one(trace, "SELECT max(time) - min(time) FROM instructions")
    addresses = result.addresses
    assert addresses.column("count").to_numpy().sum() == instructions
    assert addresses.column("time").to_numpy().sum() == span
    assert result.blocks.column("insns").to_numpy().sum() == instructions
    assert result.blocks.column("time").to_numpy().sum() == span
    mix = result.mix.to_pylist()[0]
    assert mix["instructions"] == instructions
    assert mix["condition_failed"] == _sql_one(trace, "SELECT count(*) FROM instructions WHERE NOT executed")
    # every executed load or store instruction printed its memory accesses
    assert mix["loads"] == _sql_one(trace, "SELECT count(DISTINCT seq) FROM memory WHERE op = 'R'")
    assert mix["stores"] == _sql_one(trace, "SELECT count(DISTINCT seq) FROM memory WHERE op = 'W'")
    assert result.functions == build(trace, elf).functions()
    # the block at a function's entry runs at least once per call
    blocks = result.blocks
    runs = dict(zip(blocks.column("start").to_pylist(), blocks.column("executions").to_pylist(), strict=True))
    for row in result.functions.to_pylist():
        assert runs[row["address"]] >= row["calls"]
    names = dict(zip(addresses.column("pc").to_pylist(), addresses.column("name").to_pylist(), strict=True))
    for row in result.functions.to_pylist():
        assert names[row["address"]] == row["name"]


def test_window_profile(stores):
    trace = stores(*TTU, "tests", "quicksort.tarmac")
    result = profile(trace, Window(100, 600))
    assert result.addresses.column("count").to_numpy().sum() == 500
    assert result.mix.column("instructions")[0].as_py() == 500


def test_profile_by_source_line(tmp_path):
    """Instructions at addresses of a program with DWARF lines are counted per line."""
    image = load_elf(DATA / "image" / "lines-dwarf4.elf")
    functions = [s for s in image.symbols if s.size and s.kind == "func"]
    pcs = np.concatenate([np.arange(f.address, f.address + f.size, 4, dtype=np.uint64) for f in functions])
    repeat = np.arange(len(pcs)) % 3 + 1  # some addresses run more often than others
    executed = np.repeat(pcs, repeat)
    lines = [f"{t + 1} clk IT ({t + 1}) {pc:08x} d503201f O EL3h_s : NOP" for t, pc in enumerate(executed)]
    source = tmp_path / "lines.tarmac"
    source.write_text("\n".join(lines) + "\n")
    trace = cputrace.open(cputrace.ingest([source], tmp_path / "lines.ctrace").store)
    result = profile(trace, image=image)
    files, numbers = image.lines.lines_for_many(executed)
    known = files >= 0
    assert known.any()
    expected: dict[tuple[str, int], int] = {}
    for file, line in zip(files[known].tolist(), numbers[known].tolist(), strict=True):
        key = (image.lines.files[file], line)
        expected[key] = expected.get(key, 0) + 1
    got = {(r["file"], r["line"]): r["count"] for r in result.lines.to_pylist()}
    assert got == expected
    counts = result.lines.column("count").to_pylist()
    assert counts == sorted(counts, reverse=True)


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot(stores, tmp_path, suffix):
    pytest.importorskip("matplotlib")
    from cputrace.analysis.plot import plot_profile

    trace = stores(*TTU, "samples", "calculator-aarch64-fastmodel.tarmac")
    result = profile(trace, image=load_elf(IMAGES / "calculator-aarch64.elf"), heat=True)
    cells = result.heat.cells
    assert cells.column("count").to_numpy().sum() == trace.manifest["counts"]["instructions"]
    path = tmp_path / f"profile{suffix}"
    plot_profile(result, path, title="calculator", unit="clk")
    if suffix == ".png":
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert ET.parse(path).getroot().tag.endswith("svg")


def test_profile_command(stores, tmp_path):
    trace = stores(*TTU, "tests", "quicksort.tarmac")
    runner = CliRunner()
    elf = str(IMAGES / "quicksort.elf")
    text = runner.invoke(cli, ["profile", str(trace.path), "--image", elf, "--top", "3"])
    assert text.exit_code == 0, text.output
    for title in ("Functions", "Addresses (top 3", "Instruction mix", "Hottest basic blocks"):
        assert title in text.output
    as_json = json.loads(runner.invoke(cli, ["profile", str(trace.path), "--format", "json"]).output)
    assert set(as_json) == set(TABLES)
    csv_rows = runner.invoke(cli, ["profile", str(trace.path), "--by", "addresses", "--format", "csv"])
    header, *rows = csv_rows.output.splitlines()
    assert header == "cpu,pc,name,count,failed,time"
    assert sum(int(r.split(",")[3]) for r in rows) == trace.manifest["counts"]["instructions"]
    two = runner.invoke(cli, ["profile", str(trace.path), "--by", "mix", "--by", "lines", "--format", "csv"])
    assert two.exit_code == 2
    if pytest.importorskip("matplotlib"):
        plotted = runner.invoke(
            cli, ["profile", str(trace.path), "--by", "mix", "--plot", str(tmp_path / "p.png")]
        )
        assert plotted.exit_code == 0 and (tmp_path / "p.png").stat().st_size > 0
