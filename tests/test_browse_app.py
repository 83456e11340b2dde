"""The browser driven through Textual's headless pilot on the quicksort example (and its ELF):
what its panes show is checked against other commands (`state`, `list`, `sql`), never
against the browser's own code."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from textual.geometry import Region
from textual.widgets import Tree

from cputrace.browse.app import BrowseApp, Start
from cputrace.browse.diffview import DiffView
from cputrace.browse.keys import KEYS
from cputrace.browse.panes.registers import CHANGED
from cputrace.browse.panes.trace import TracePane
from cputrace.browse.screens import CallTreeScreen, HelpScreen
from cputrace.browse.session import Session
from cputrace.cli import cli, exits
from cputrace.image import load_elf
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


def _frames(store: Path, elf: Path) -> list[dict[str, str]]:
    """`cputrace calls --tree` rows (the frames, with call, entry, exit and resume seqs)."""
    text = _cputrace("calls", str(store), "--image", str(elf), "--tree", "--format", "csv")
    return list(csv.DictReader(io.StringIO(text)))


def _holding(frames: list[dict[str, str]], seq: int) -> list[dict[str, str]]:
    return [f for f in frames if int(f["entry_seq"]) <= seq <= int(f["exit_seq"])]


def test_calls_pane_is_the_stack_of_calls_tree(quicksort):
    store, elf = quicksort
    frames = _frames(store, elf)
    app = _browser(quicksort, seq=700)

    async def script(pilot):
        pane = app.calls_pane
        rows = [[str(cell) for cell in pane.get_row_at(i)] for i in range(pane.row_count)]
        await pilot.press("c", "up", "enter")  # the caller's call
        await pilot.pause()
        return rows, _place(app)["seq"]

    rows, seq = drive(app, script)
    stack = _holding(frames, 700)
    assert [r[1] for r in rows] == [f["name"] for f in stack]
    assert [r[3] for r in rows] == [f["call_seq"] or f["entry_seq"] for f in stack]
    assert seq == stack[-2]["call_seq"]


def test_calls_pane_follows_a_jump_to_another_call_of_the_same_depth(quicksort):
    store, elf = quicksort
    frames = _frames(store, elf)
    stacks = [(int(f["entry_seq"]), _holding(frames, int(f["entry_seq"]))) for f in frames]
    (a, a_stack), (b, b_stack) = next(
        (x, y) for x in stacks for y in stacks if len(x[1]) == len(y[1]) > 1 and x[1] != y[1]
    )  # the pane updates the frames that differ in place
    app = _browser(quicksort, seq=a)

    async def script(pilot):
        pane = app.calls_pane
        shown = []
        for seq in (b, a):
            await pilot.press("g", *str(seq), "enter")
            await pilot.pause()
            shown.append([[str(cell) for cell in pane.get_row_at(i)] for i in range(pane.row_count)])
        return shown

    for rows, stack in zip(drive(app, script), (b_stack, a_stack), strict=True):
        assert [r[1] for r in rows] == [f["name"] for f in stack]
        assert [r[3] for r in rows] == [f["call_seq"] or f["entry_seq"] for f in stack]


def test_folding_a_call_makes_it_one_step(quicksort):
    store, elf = quicksort
    frames = _frames(store, elf)
    (call,) = [f for f in _holding(frames, 100) if f["depth"] == "1"]
    app = _browser(quicksort, seq=100)

    async def script(pilot):
        seen = []
        for keys in (("minus",), ("down",), ("up",), ("plus",), ("right_curly_bracket",),
                     ("g", *call["call_seq"], "enter"), ("down",), ("down",)):
            await pilot.press(*keys)
            await pilot.pause()
            seen.append(_place(app)["seq"])
        await pilot.press("left_curly_bracket")
        seen.append(_cursor_line(app))
        return seen

    seen = drive(app, script)
    folded, after, back, unfolded = seen[:4]
    assert folded == call["exit_seq"]  # the folded line's point: after the call's last instruction
    assert after == call["resume_seq"]  # Down steps over the call
    assert back == call["exit_seq"] and unfolded == call["entry_seq"]
    # everything folded: the outermost function's lines, each of its calls one step
    assert seen[5:8] == [call["call_seq"], call["exit_seq"], call["resume_seq"]]
    assert "folded" not in seen[8]


def test_pc_visits_and_searches_against_sql(quicksort):
    store, _ = quicksort
    quick = [r["seq"] for r in _sql(store, "SELECT seq FROM instructions WHERE pc = 0x8038 ORDER BY seq")]
    blr = [r["seq"] for r in _sql(store, "SELECT seq FROM instructions WHERE NOT executed ORDER BY seq")]
    app = _browser(quicksort, seq=400)

    async def script(pilot):
        seen = []
        for keys in (("p", *"quicksort", "enter"), ("n",), ("N",), ("P", *"quicksort", "enter"),
                     ("slash", *"NOT executed", "enter"), ("n",), ("backslash", *"NOT executed", "enter")):
            await pilot.press(*keys)
            await pilot.pause()
            seen.append(int(_place(app)["seq"]))
        return seen

    seen = drive(app, script)
    first = next(s for s in quick if s > 400)
    assert seen[0] == first
    assert seen[1] == next(s for s in quick if s > first)
    assert seen[2] == first
    assert seen[3] == max(s for s in quick if s < first)
    failed = next(s for s in blr if s > seen[3])
    assert seen[4] == failed
    assert seen[5] == next(s for s in blr if s > failed)
    assert seen[6] == failed


def test_bad_sql_and_nothing_found_are_messages(quicksort):
    app = _browser(quicksort, seq=5)

    async def script(pilot):
        said = []
        for keys in (("slash", *"pc = = 1"), ("slash", *"pc = 0x1"), ("slash", *"1; DROP TABLE x")):
            await pilot.press(*keys, "enter")
            await pilot.pause()
            said.append(app.status.message)
        return said, _place(app)["seq"]

    said, seq = drive(app, script)
    assert all(said) and seq == "5"
    assert "0x1" in said[1]


def test_exceptions_step_over_call_tree_and_bookmarks(quicksort):
    store, elf = quicksort
    frames = _frames(store, elf)
    marks = _sql(store, "SELECT seq FROM events WHERE kind IN ('exception', 'trace_gap') ORDER BY seq")
    first_call = next(f for f in frames if f["depth"] == "1")
    app = _browser(quicksort)

    async def script(pilot):
        seen = {}
        await pilot.press("end", "E")
        seen["E"] = _place(app)["seq"]
        await pilot.press("g", *first_call["call_seq"], "enter", "o")
        await pilot.pause()
        seen["o"] = _place(app)["seq"]
        await pilot.press("f")
        await pilot.pause()
        tree = isinstance(app.screen, CallTreeScreen)
        view = app.screen.query_one(Tree)
        line = next(i for i in range(view.last_line + 1) if view.get_node_at_line(i).data.name == "quicksort")
        await pilot.press(*["down"] * (line - view.cursor_line), "enter")
        await pilot.pause()
        seen["tree"] = (tree, _place(app)["seq"])
        await pilot.press("b", "g", *"1000", "enter", "b", "home", "apostrophe")
        await pilot.pause()
        seen["bookmark"] = _place(app)["seq"]
        await pilot.press("apostrophe")
        seen["bookmark 2"] = _place(app)["seq"]
        return seen

    seen = drive(app, script)
    assert seen["E"] == str(max(m["seq"] for m in marks))
    assert seen["o"] == first_call["resume_seq"]  # over the call the cursor's instruction makes
    assert seen["tree"] == (True, first_call["entry_seq"])  # the first call of the first callee
    assert seen["bookmark"] == first_call["entry_seq"] and seen["bookmark 2"] == "1000"


def test_diff_side_by_side_goes_from_divergence_to_divergence(quicksort, tmp_path):
    """Trace B: the example with two x9 writes changed; `cputrace diff` lists where they are."""
    store, elf = quicksort
    lines = (ROOT / "examples" / "quicksort.tarmac").read_text().splitlines(keepends=True)
    writes = [i for i, line in enumerate(lines) if " R X9 " in line]
    for i in (writes[19], writes[59]):
        lines[i] = lines[i].rsplit(" ", 1)[0] + " 00000000DEADBEEF\n"
    (tmp_path / "b.tarmac").write_text("".join(lines))
    other = tmp_path / "b.ctrace"
    _cputrace("ingest", str(tmp_path / "b.tarmac"), "-o", str(other))
    listed = json.loads(_cputrace("diff", str(store), str(other), "--format", "json"))["listed"]
    image = load_elf(elf)
    a, b = Session.open(Trace(store), image), Session.open(Trace(other), image)
    app = BrowseApp(a, Start(seq=0), DiffView.open(a, b))

    async def script(pilot):
        seen = []
        for key in ("d", "d", "D", "d", "d"):
            await pilot.press(key)
            await pilot.pause()
            other_pane = app.query_one("#trace-b", TracePane)
            b_line = other_pane.lines()[other_pane._cursor.start]
            seen.append((_place(app)["seq"], b_line.split()[0], app.status.message, _cursor_line(app)))
        seen.append((app.trace_pane.region, other_pane.region, app.registers_pane.region))
        return seen

    seen = drive(app, script)
    a_region, b_region, right = seen.pop()
    assert a_region.width > 20 and b_region.width > 20  # side by side, on the screen
    assert a_region.right <= b_region.x and b_region.right <= right.x
    first, second = (str(d["a_seq"]) for d in listed)
    assert [s[0] for s in seen] == [first, second, first, second, second]
    assert seen[0][1] == str(listed[0]["b_seq"])  # B's cursor on the instruction paired with A's
    assert "x9" in seen[0][2] and "0xdeadbeef" in seen[0][2]
    assert "no later divergence" in seen[4][2]


def test_the_trace_pane_draws_the_last_instruction_then_blank_rows_and_takes_a_click_there(quicksort):
    """The Trace pane draws its rows itself (its frame the border): at the end of the trace
    its cursor row shows the last instruction `sql` gives, the rows below it are blank, and
    a click on one of them (Textual asks the pane for the row under the pointer) leaves the
    cursor where it was."""
    store, _ = quicksort
    app = _browser(quicksort)

    async def script(pilot):
        await pilot.press("end")
        pane = app.trace_pane
        width, height = pane.size
        await pilot.click("#trace", offset=(3, height - 1))
        await pilot.pause()
        strips = pane.render_lines(Region(0, 0, width, height))
        rows = ["".join(segment.text for segment in strip) for strip in strips]
        return rows, pane._cursor.start, width, app.seq

    rows, cursor, width, seq = drive(app, script)
    (last,) = _sql(store, "SELECT seq, pc FROM instructions ORDER BY seq DESC LIMIT 1")
    assert seq == last["seq"]
    words = rows[cursor].split()
    assert words[0] == str(last["seq"]) and f"{last['pc']:08x}" in words
    assert all(len(row) == width for row in rows)
    assert rows[-1] == " " * width


def test_a_step_repaints_only_the_lines_it_changes(quicksort):
    """Stepping down a screen repaints each Trace pane's old and new cursor lines, and a Memory
    pane only where its bytes changed: setting a pane's border title repaints all of it, and
    Trace B's title (B's seq) and the Memory pane's were set at every move. The lines each
    pane draws are counted; the Memory pane's are checked against the bytes `state` gives."""
    store, elf = quicksort
    image = load_elf(elf)
    a, b = Session.open(Trace(store), image), Session.open(Trace(store), image)
    app = BrowseApp(a, Start(seq=0), DiffView.open(a, b))
    steps = 8

    async def script(pilot):
        await pilot.press("m", *"0x8100", "enter")
        app.trace_pane.focus()
        await pilot.press("down")  # the first move after the new pane's layout shows B anew
        await pilot.pause()
        drawn: dict[str, int] = {}
        panes = {"a": app.trace_pane, "b": app.query_one("#trace-b", TracePane)}
        panes["memory"] = app.memory_panes[0]
        for name, pane in panes.items():
            draw = pane.render_line

            def counted(y: int, draw=draw, name=name):
                drawn[name] = drawn.get(name, 0) + 1
                return draw(y)

            pane.render_line = counted
        seqs = [app.seq]
        for _ in range(steps):
            await pilot.press("down")
            await pilot.pause()
            seqs.append(app.seq)
        return drawn, seqs

    drawn, seqs = drive(app, script)
    rows = Trace(store).sql(
        "SELECT i.seq, 1 + (SELECT count(*) FROM registers r WHERE r.seq = i.seq)"
        " + (SELECT count(*) FROM memory m WHERE m.seq = i.seq)"
        " + (SELECT count(*) FROM events e WHERE e.seq = i.seq) AS lines"
        f" FROM instructions i WHERE i.seq BETWEEN {seqs[0]} AND {seqs[-1]}"
    ).to_pylist()
    lines = {row["seq"]: row["lines"] for row in rows}
    cursor_rows = sum(lines[seqs[i]] + lines[seqs[i + 1]] for i in range(steps))
    assert drawn["a"] == drawn["b"] == cursor_rows  # each step: the cursor's old and new lines
    writes = Trace(store).sql(
        f"SELECT count(*) AS n FROM memory WHERE op IN ('W', 'U') AND seq <= {seqs[-1]}"
        " AND addr < 0x8100 + 96 AND addr + size > 0x8100"
    ).to_pylist()[0]["n"]
    assert writes == 0 and drawn.get("memory", 0) == 0  # its bytes never changed


def test_readme_lists_every_key_of_the_help():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### browse\n", 1)[1].split("\n### ", 1)[0]
    rows = [line.split(" | ")[:2] for line in section.splitlines() if line.startswith("| `")]
    listed = [(keys.strip("| ").replace("`", ""), does.rstrip(" |")) for keys, does in rows]
    assert listed == [(key.shown, key.help) for key in KEYS]


def test_screenshot_without_colours(quicksort, tmp_path):
    """NO_COLOR (as test_readme runs the README's commands) once failed every pane that drew
    blank cells without a style; a browser that fails writes no screenshot."""
    store, elf = quicksort
    svg = tmp_path / "browse.svg"
    result = CliRunner(env={"NO_COLOR": "1"}).invoke(
        cli, ["browse", str(store), "--image", str(elf), "--at", "700", "--screenshot", str(svg)]
    )
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "quicksort" in svg.read_text()


def test_a_locked_memory_pane_stays_at_its_point(quicksort):
    store, elf = quicksort
    at_50 = _state(store, 50, "--mem", "0x8100", "16", "--image", str(elf))["memory"][0]["hex"]
    at_900 = _state(store, 900, "--mem", "0x8100", "16", "--image", str(elf))["memory"][0]["hex"]
    assert at_50 != at_900  # the sort has changed these bytes in between
    app = _browser(quicksort, seq=50)

    async def script(pilot):
        await pilot.press("m", *"0x8100", "enter", "l", "escape", "g", *"900", "enter")
        await pilot.pause()
        locked = app.memory_panes[0].text()
        await pilot.press("m", *"0x8100", "enter")
        await pilot.pause()
        return locked, app.memory_panes[1].text()

    locked, following = drive(app, script)
    assert "".join(locked.splitlines()[1].split()[1:]) == at_50 and "seq 50" in locked
    assert "".join(following.splitlines()[1].split()[1:]) == at_900 and "seq 900" in following


def test_registers_changed_by_a_step_are_highlighted(quicksort):
    store, _ = quicksort
    before = {r["name"]: r["hex"] for r in _state(store, 102)["registers"]}
    after = {r["name"]: r["hex"] for r in _state(store, 103)["registers"]}
    changed = {name for name in after if before.get(name) != after[name]}
    assert changed  # LDRB then a flag-setting CMP: something changes
    app = _browser(quicksort, seq=101)

    async def script(pilot):
        seen = []
        for _ in range(2):
            await pilot.press("down")
            pane = app.registers_pane
            seen.append({str(pane.get_row_at(i)[0]) for i in range(pane.row_count)
                         if pane.get_row_at(i)[0].style == CHANGED})  # fmt: skip
        return seen

    at_102, at_103 = drive(app, script)
    assert at_103 == changed and at_102 != at_103


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--at", "1", "--time", "1"], "at most one of --at SEQ and --time T"),
        (["--serve", "--screenshot", "x.svg"], "cannot go with --serve"),
        (["--port", "0", "--serve"], "0 is not in the range"),
    ],
)
def test_bad_usage_is_exit_2(quicksort, args, said):
    result = CliRunner().invoke(cli, ["browse", str(quicksort[0]), *args])
    assert result.exit_code == exits.USAGE and said in result.output


def test_the_status_line_asks_and_edits_the_answer(quicksort):
    """The prompt is the status line: typed keys edit the answer (bound keys such as `q` and
    `d` too), Escape drops it, and the focus never leaves the pane it was on."""
    store, _ = quicksort
    seqs = {r["seq"] for r in _sql(store, "SELECT seq FROM instructions WHERE seq IN (192, 193, 50)")}
    app = _browser(quicksort, seq=50)

    async def script(pilot):
        seen = []
        await pilot.press("g", *"123", "backspace", "left", "9")
        seen.append((app.status.asking, app.status.answer, app.focused is app.trace_pane))
        await pilot.press("enter")
        seen.append(_place(app)["seq"])
        await pilot.press("g", *"5", "escape")
        seen.append((app.status.asking, _place(app)["seq"]))
        await pilot.press("backslash", *"seq = 50 and pc >= 0 or q", "home", "ctrl+u", *"seq = 50", "enter")
        seen.append((app.is_running, _place(app)["seq"], app.status.message))
        return seen

    typing, went, cancelled, searched = drive(app, script)
    assert seqs == {192, 193, 50}
    assert typing == (True, "192", True)
    assert went == "192"
    assert cancelled == (False, "192")
    assert searched[0] and searched[1] == "50" and "seq = 50" in searched[2]


def test_branch_targets_are_named_after_the_first_screen(quicksort):
    """As the command runs it (`targets_later`): the decoders that find branch targets load
    in the background, and then the call into quicksort (`calls --tree`) names its target."""
    store, elf = quicksort
    call = next(f for f in _frames(store, elf) if f["name"] == "quicksort")
    session = Session.open(Trace(store), load_elf(elf))
    app = BrowseApp(session, Start(seq=int(call["call_seq"])), targets_later=True)

    async def script(pilot):
        await app.workers.wait_for_complete()
        await pilot.pause()
        return _cursor_line(app)

    assert "<quicksort>" in drive(app, script)


def test_the_heap_is_frozen_after_the_first_screen_when_asked(quicksort):
    """`freeze_heap` (as `cputrace browse` runs the app): once the first screen is drawn, the
    objects alive before the app started are out of the collector's passes (frozen, by
    Python's own count); without it, nothing is. In a process of its own: freezing is for a
    process that runs one app."""
    store, _ = quicksort
    script = (
        "import asyncio, gc, sys\n"
        "from cputrace.browse.app import BrowseApp\n"
        "from cputrace.browse.session import Session\n"
        "from cputrace.store.trace import Trace\n"
        "async def main(freeze):\n"
        "    app = BrowseApp(Session.open(Trace(sys.argv[1])), freeze_heap=freeze)\n"
        "    before = len(gc.get_objects())\n"
        "    async with app.run_test() as pilot:\n"
        "        await pilot.pause()\n"
        "        frozen = gc.get_freeze_count()\n"
        "    gc.unfreeze()\n"
        "    return before, frozen\n"
        "print(*asyncio.run(main(False)), *asyncio.run(main(True)))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-c", script, str(store)]
    found = subprocess.run(command, capture_output=True, text=True, env=env)
    assert found.returncode == 0, found.stderr
    _, unfrozen, before, frozen = map(int, found.stdout.split())
    assert unfrozen == 0
    assert frozen >= 0.9 * before > 10_000


def test_the_branch_targets_decoders_are_frozen_too(quicksort):
    """With an image, the decoders that find branch targets load after the first screen
    (numba and capstone: more objects than the rest of the app); `freeze_heap` freezes them
    once the targets are shown, leaving few objects to the collector's passes."""
    store, elf = quicksort
    Session.open(Trace(store), load_elf(elf)).close()  # its indexes (call detection: numba), here
    script = (
        "import asyncio, gc, sys\n"
        "from cputrace.browse.app import BrowseApp\n"
        "from cputrace.browse.session import Session\n"
        "from cputrace.image import load_elf\n"
        "from cputrace.store.trace import Trace\n"
        "async def main():\n"
        "    session = Session.open(Trace(sys.argv[1]), load_elf(sys.argv[2]))\n"
        "    app = BrowseApp(session, targets_later=True, freeze_heap=True)\n"
        "    before = 'numba' in sys.modules\n"
        "    async with app.run_test() as pilot:\n"
        "        await pilot.pause()  # the first screen: the decoders' worker starts after it\n"
        "        await app.workers.wait_for_complete()\n"
        "        return before, 'numba' in sys.modules, gc.get_freeze_count(), len(gc.get_objects())\n"
        "print(*asyncio.run(main()))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-c", script, str(store), str(elf)]
    found = subprocess.run(command, capture_output=True, text=True, env=env)
    assert found.returncode == 0, found.stderr
    before, loaded, frozen, unfrozen = found.stdout.split()
    assert (before, loaded) == ("False", "True")
    assert int(unfrozen) < int(frozen) / 4
