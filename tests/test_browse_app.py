"""The browser driven through Textual's headless pilot on the quicksort example (and its ELF):
what its panes show is checked against other commands (`state`, `list`, `sql`), never
against the browser's own code."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cputrace.browse.app import BrowseApp, Start
from cputrace.browse.screens import HelpScreen
from cputrace.cli import cli, exits
from cputrace.store.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
SIZE = (150, 50)


@pytest.fixture(scope="module")
def quicksort(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The example trace ingested into a store of its own, and its ELF."""
    where = tmp_path_factory.mktemp("browse")
    for name in ("quicksort.tarmac", "quicksort.elf"):
        shutil.copy(ROOT / "examples" / name, where / name)
    store = where / "quicksort.ctrace"
    assert _cputrace("ingest", str(where / "quicksort.tarmac"), "-o", str(store))
    return store, where / "quicksort.elf"


def _cputrace(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def _sql(store: Path, query: str) -> list[dict[str, Any]]:
    return json.loads(_cputrace("sql", str(store), query, "--format", "json"))


def _state(store: Path, seq: int, *more: str) -> dict[str, Any]:
    return json.loads(_cputrace("state", str(store), "--at", str(seq), "--format", "json", *more))


def drive(app: BrowseApp, script: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run `script(pilot)` on the app, headless."""

    async def main() -> Any:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            return await script(pilot)

    return asyncio.run(main())


def _browser(quicksort: tuple[Path, Path], **start: Any) -> BrowseApp:
    store, elf = quicksort
    return BrowseApp.open(Trace(store), [str(elf)], Start(**start))


def _place(app: BrowseApp) -> dict[str, str]:
    """The status line's `seq N  time T  cpu C  pc 0x..` as a dict."""
    words = app.status.place.split("  ")
    return dict(w.split(" ", 1) for w in words if w.split(" ", 1)[0] in ("seq", "time", "cpu", "pc"))


def _cursor_line(app: BrowseApp) -> str:
    pane = app.trace_pane
    return pane.lines()[pane._cursor.start]


def test_opens_at_seq_with_the_instruction_and_registers_of_state(quicksort):
    store, _ = quicksort
    app = _browser(quicksort, seq=100)

    async def script(pilot):
        return _place(app), _cursor_line(app), app.registers_pane.text()

    place, line, registers = drive(app, script)
    (row,) = _sql(store, "SELECT seq, time, pc, disasm FROM instructions WHERE seq = 100")
    assert place == {"seq": "100", "time": str(row["time"]), "cpu": "0", "pc": f"0x{row['pc']:x}"}
    assert f"{row['pc']:08x}" in line and row["disasm"].split()[0] in line
    shown = dict(line.split() for line in registers.splitlines())
    state = _state(store, 100)
    assert {r["name"]: "0x" + r["hex"] for r in state["registers"]} == shown


def test_moving_keys_follow_the_instructions_of_list(quicksort):
    store, _ = quicksort
    app = _browser(quicksort)
    seqs = [r["seq"] for r in _sql(store, "SELECT seq FROM instructions ORDER BY seq")]

    async def script(pilot):
        seen = {}
        for keys in (("down",) * 3, ("up",), ("end",), ("up", "up"), ("home",), ("g", *"100", "enter"),
                     ("pagedown",), ("pageup",)):
            await pilot.press(*keys)
            seen[keys] = int(_place(app)["seq"])
        return seen

    seen = drive(app, script)
    assert seen[("down",) * 3] == seqs[3]
    assert seen[("up",)] == seqs[2]
    assert seen[("end",)] == seqs[-1]
    assert seen[("up", "up")] == seqs[-3]
    assert seen[("home",)] == seqs[0]
    # a screenful of instructions (one less), whatever its records: more than one, less than its lines
    assert 100 + 1 < seen[("pagedown",)] < 100 + SIZE[1]
    assert seen[("pageup",)] < seen[("pagedown",)]


def test_goto_seq_and_time(quicksort):
    store, _ = quicksort
    app = _browser(quicksort)
    (at_time,) = _sql(store, "SELECT max(seq) AS seq FROM instructions WHERE time <= 500")

    async def script(pilot):
        await pilot.press("g", *"0x4b0", "enter")
        await pilot.pause()
        by_seq = _place(app)["seq"]
        await pilot.press("t", *"500", "enter")
        await pilot.pause()
        return by_seq, _place(app)["seq"]

    by_seq, by_time = drive(app, script)
    assert by_seq == str(0x4B0)
    assert by_time == str(at_time["seq"])


def test_enter_on_a_register_goes_to_its_writer(quicksort):
    store, _ = quicksort
    app = _browser(quicksort, seq=300)
    state = _state(store, 300)
    names = [r["name"] for r in state["registers"]]
    x21 = next(r for r in state["registers"] if r["name"] == "x21")

    async def script(pilot):
        await pilot.press("r")
        for _ in range(names.index("x21")):
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        return _place(app)["seq"]

    assert drive(app, script) == str(x21["seq"])


def test_memory_pane_shows_state_bytes_and_goes_to_the_last_write(quicksort):
    store, elf = quicksort
    app = _browser(quicksort, seq=300)
    # the string the program sorts, in place: written by the sort, from the image before that
    state = _state(store, 300, "--mem", "0x8100", "32", "--image", str(elf))
    expected = state["memory"][0]["hex"]
    second = state["memory"][0]["runs"]
    word = next(run for run in second if run["address"] <= 0x8104 < run["address"] + run["length"])

    async def script(pilot):
        await pilot.press("m", *"0x8100", "enter")
        await pilot.pause()
        text = app.memory_panes[0].text()
        for _ in range(4):
            await pilot.press("right")
        await pilot.press("4")
        await pilot.pause()
        return text, _place(app)["seq"]

    text, seq = drive(app, script)
    rows = [line.split()[1:] for line in text.splitlines()[1:3]]
    assert "".join(b for row in rows for b in row) == expected
    writes = _sql(
        store,
        "SELECT max(seq) AS seq FROM memory WHERE op IN ('W', 'U') AND seq <= 300 "
        "AND addr < 0x8108 AND addr + size > 0x8104",
    )
    assert seq == str(writes[0]["seq"])
    if word["seq"] is not None:
        assert int(seq) >= word["seq"]


def test_bad_input_is_a_message_and_the_app_goes_on(quicksort):
    app = _browser(quicksort, seq=10)

    async def script(pilot):
        said = []
        for keys in (("g", *"nosuch"), ("g", *"99999"), ("m", *"sp+"), ("t", *"(")):
            await pilot.press(*keys, "enter")
            await pilot.pause()
            said.append(app.status.message)
        await pilot.press("down")
        return said, _place(app)["seq"]

    said, seq = drive(app, script)
    assert "nosuch" in said[0]
    assert "99999" in said[1]
    assert "sp+" in said[2]
    assert "(" in said[3]
    assert seq == "11"


def test_help_opens_on_f1_and_question_mark_and_lists_the_keys(quicksort):
    app = _browser(quicksort)

    async def script(pilot):
        shown = []
        for key in ("f1", "question_mark"):
            await pilot.press(key)
            await pilot.pause()
            shown.append(isinstance(app.screen, HelpScreen))
            await pilot.press("escape")
            await pilot.pause()
        return shown, isinstance(app.screen, HelpScreen)

    shown, still = drive(app, script)
    assert shown == [True, True] and not still


def test_copy_gives_the_registers_and_memory_of_state(quicksort):
    store, _ = quicksort
    app = _browser(quicksort, seq=50)

    async def script(pilot):
        await pilot.press("m", *"sp", "enter")
        await pilot.pause()
        await pilot.press("y")
        return app.clipboard

    copied = drive(app, script)
    state = _state(store, 50)
    for register in state["registers"]:
        assert f"{register['name']} " in copied and "0x" + register["hex"] in copied
    sp = next(r for r in state["registers"] if r["name"] == "sp_el3")["value"]
    assert f"{sp:016x}" in copied


def test_without_textual_the_command_names_the_extra(monkeypatch, quicksort):
    monkeypatch.setitem(sys.modules, "textual", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "cputrace.cli.browse", raising=False)
    monkeypatch.delitem(cli.commands, "browse", raising=False)
    result = CliRunner().invoke(cli, ["browse", str(quicksort[0])])
    assert result.exit_code == exits.USAGE
    assert "needs textual, the browse extra: pip install 'cputrace[browse]'" in result.output
