"""The browser's keys on every kind of store (the TC2 ETMv3 snapshot with its three cores, LEON
control-flow and instruction trace buffers, an XScale trace buffer, the reference tool's
calltest64), and its Source and Timeline panes on a program recorded under unicorn: what the
panes show against SQL, `cputrace state`, `cputrace calls --tree` and binutils' addr2line."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from paths import DATA, SHARED, shared

from cputrace.browse.app import BrowseApp, Start
from cputrace.browse.panes.timeline import LABEL
from cputrace.browse.session import Session
from cputrace.cli import cli
from cputrace.image import load_elf
from cputrace.store.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
SIZE = (160, 50)
STORES = {
    # name: (input, ingest keyword arguments, image for the browser)
    "tc2": ("tests/data/etmv3/tc2/snapshot.ini", {}, None),
    "leon-cf": ("examples/leon-cf.txt", {"images": [DATA / "leon" / "itb_demo.elf"]}, None),
    "leon-itb": ("examples/leon-itb.bin", {"format": "leon-itb"}, DATA / "leon" / "itb_demo.elf"),
    "xscale": ("tests/data/xscale/calls-armv5te-wrap.txt",
               {"images": [ROOT / "tests" / "corpus" / "calls-armv5te.elf"]},
               ROOT / "tests" / "corpus" / "calls-armv5te.elf"),
    "calltest64": (str(SHARED / "tarmac-trace-utilities" / "tests" / "calltests" / "calltest64.tarmac"), {},
                   DATA / "image" / "calltest64.elf"),
}  # fmt: skip


def _cputrace(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def drive(app: BrowseApp, script) -> Any:
    async def main() -> Any:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            return await script(pilot)

    return asyncio.run(main())


def _place(app: BrowseApp) -> dict[str, str]:
    words = app.status.place.split("  ")
    return dict(w.split(" ", 1) for w in words if w.split(" ", 1)[0] in ("seq", "time", "cpu", "pc"))


@pytest.fixture(scope="module", params=list(STORES))
def store(request, open_input) -> tuple[Trace, Path | None]:
    source, kwargs, image = STORES[request.param]
    path = ROOT / source
    if not path.exists():
        shared(*path.relative_to(SHARED).parts)  # skips (fails in CI) without the shared corpus
    return open_input(path, **kwargs), image


def test_keys_on_every_kind_of_store(store):
    trace, image = store
    images = ["--image", str(image)] if image else []
    app = BrowseApp(Session.open(trace, load_elf(image) if image else None))
    cores = [r["cpu"] for r in trace.sql("SELECT DISTINCT cpu FROM instructions ORDER BY cpu").to_pylist()]

    async def script(pilot):
        seen: dict[str, Any] = {"first": _place(app)}
        await pilot.press(*["down"] * 5)
        seen["down"] = _place(app)
        seen["registers"] = app.registers_pane.text()
        seen["cores"] = []
        for _ in cores:
            await pilot.press("x")
            seen["cores"].append((_place(app), app.status.place))
        await pilot.press("end")
        seen["end"] = _place(app)
        return seen

    seen = drive(app, script)
    first = cores[0]
    seqs = [r["seq"] for r in trace.sql(
        f"SELECT seq FROM instructions WHERE cpu = {first} ORDER BY seq LIMIT 6").to_pylist()]  # fmt: skip
    assert seen["first"]["seq"] == str(seqs[0]) and seen["first"]["cpu"] == str(first)
    assert seen["down"]["seq"] == str(seqs[5])
    state = json.loads(_cputrace("state", str(trace.path), "--at", str(seqs[5]), "--cpu", str(first),
                                 "--format", "json"))  # fmt: skip
    shown = dict(line.split() for line in seen["registers"].splitlines())
    assert {r["name"]: "0x" + r["hex"] for r in state["registers"]} == {
        name: value for name, value in shown.items() if value != "?"
    }
    assert [int(place["cpu"]) for place, _ in seen["cores"]] == cores[1:] + cores[:1]
    for place, status in seen["cores"]:
        if len(cores) > 1:
            assert "others: " in status
        (last,) = trace.sql(f"SELECT max(seq) AS n FROM instructions WHERE cpu = {place['cpu']}").to_pylist()
        assert int(place["seq"]) <= last["n"]
    (last,) = trace.sql(f"SELECT max(seq) AS seq FROM instructions WHERE cpu = {first}").to_pylist()
    assert seen["end"]["seq"] == str(last["seq"])
    frames = list(csv.DictReader(io.StringIO(_cputrace("calls", str(trace.path), *images, "--tree",
                                                       "--cpu", str(first), "--format", "csv"))))  # fmt: skip
    _check_a_fold(trace, image, first, frames)


def _check_a_fold(trace: Trace, image: Path | None, cpu: int, frames: list[dict[str, str]]) -> None:
    """Folding the first call that returns makes it one step: Down from the call goes to the
    instruction it returns to."""
    call = next((f for f in frames if f["depth"] != "0" and f["resume_seq"]), None)
    if call is None:
        return
    session = Session.open(trace, load_elf(image) if image else None)
    app = BrowseApp(session, Start(seq=int(call["entry_seq"])))

    async def script(pilot):
        await pilot.press("minus")
        folded = _place(app)["seq"]
        await pilot.press("down")
        return folded, _place(app)["seq"]

    folded, after = drive(app, script)
    assert (folded, after) == (call["exit_seq"], call["resume_seq"])


def test_source_and_timeline_on_a_recorded_program(recorded_calls_a64):
    if shutil.which("addr2line") is None:
        pytest.skip("binutils' addr2line is not installed")
    elf, trace = recorded_calls_a64
    source_dir = ROOT / "tests" / "corpus" / "src"
    app = BrowseApp.open(trace, [str(elf)], Start(seq=40), source_dirs=[str(source_dir)])

    async def script(pilot):
        seen = {"source": (app.source_pane.border_title, str(app.source_pane.render()))}
        seen["pc"] = _place(app)["pc"]
        pane = app.timeline_pane
        await pilot.click("#timeline", offset=(pane.content_region.x - pane.region.x + LABEL, 2))  # column 0
        await pilot.pause()
        seen["click first"] = _place(app)["seq"]
        moves = []
        for _ in range(3):
            await pilot.press("greater_than_sign")
            moves.append((pane.cursor, int(_place(app)["seq"])))
        seen["moves"] = moves
        return seen

    seen = drive(app, script)
    answer = subprocess.run(["addr2line", "-e", str(elf), seen["pc"]], capture_output=True, text=True,
                            check=True).stdout.strip()  # fmt: skip
    file, _, line = answer.split(" (discriminator")[0].rpartition(":")
    title, text = seen["source"]
    assert title.endswith(f"{Path(file).name}:{line}")
    source = (source_dir / Path(file).name).read_text().splitlines()
    assert source[int(line) - 1].strip() in text
    (first,) = trace.sql("SELECT min(seq) AS seq FROM instructions").to_pylist()
    assert seen["click first"] == str(first["seq"])
    columns = [c for c, _ in seen["moves"]]
    seqs = [s for _, s in seen["moves"]]
    assert columns == sorted(columns) and seqs == sorted(seqs) and seqs[-1] > first["seq"]


def test_moves_never_lay_the_screen_out_again(recorded_calls_a64):
    """Every pane keeps its size whatever it shows, so no move lays the screen out again (a
    layout repaints all of it: the Source pane's new text did at every move, the Calls
    pane's table when the stack's depth changed). Textual's layout pass is spied on."""
    elf, trace = recorded_calls_a64
    source_dir = ROOT / "tests" / "corpus" / "src"
    app = BrowseApp.open(trace, [str(elf)], Start(seq=40), source_dirs=[str(source_dir)])
    (last,) = trace.sql("SELECT max(seq) AS seq FROM instructions").to_pylist()

    async def script(pilot):
        screen = app.screen
        lay_out, layouts = screen._refresh_layout, []

        def counted(*args: Any, **kwargs: Any) -> None:
            layouts.append(args)
            lay_out(*args, **kwargs)

        screen._refresh_layout = counted
        places = []
        for keys in (("down",), ("g", *str(last["seq"] // 2), "enter"), ("end",), ("home",), ("pagedown",),
                     ("g", *"40", "enter"), ("minus",), ("plus",), ("c", "enter")):
            await pilot.press(*keys)
            await pilot.pause()
            places.append(_place(app)["seq"])
        return len(layouts), app.source_pane.display, places

    layouts, source_shown, places = drive(app, script)
    assert source_shown and len(set(places)) > 4  # the moves moved, the Source pane with them
    assert layouts == 0
