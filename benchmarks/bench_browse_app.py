"""The browser app on a large trace, driven through Textual's headless pilot: its first screen,
and what each kind of key press costs beyond the pilot's own waits.

    python benchmarks/bench_browse_app.py --lines 20000000 --actions 240

Uses bench_browse.py's stores (the generated trace, and trace B for --diff; made on first use,
their indexes built by the first `Session.open`). Measures:
- the first screen: `cputrace browse STORE --screenshot` run as a command, from its start to
  the SVG written (it includes the interpreter's start, the imports, the SVG export), wall
  and the command's CPU time;
- `--actions` random actions through the pilot, kinds in turn (step, page, go to a seq or a
  time, next or previous pc visit, the writer of a register, the last write to a memory
  word, fold or unfold, next divergence, next exception, core switch): each counted as the
  pilot's time for the action's keys minus the time for as many presses of a key bound to
  nothing, timed right after it (the pilot waits for the screen after every key); p50, p95
  and max per kind, and over all, of wall time, and p50 and p95 of this process's CPU time
  (the pilot's and the app's) counted the same way;
- peak resident memory of the process.

With `--first-screen STORE --image ELF` (the quicksort example, say), only the first screen
of that store as `cputrace browse` shows it, drawn in the pilot, from the process's start.

The engine's work per action alone (without Textual) is bench_browse.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench_browse import prepared_other
from bench_state import prepared_store
from measure import generated_trace

import cputrace
from cputrace.browse.app import BrowseApp, Start
from cputrace.browse.diffview import DiffView
from cputrace.browse.panes.memory import MemoryPane
from cputrace.browse.session import Session

SIZE = (160, 50)
NOTHING = "z"
"""A key bound to nothing: what the pilot costs for a key press by itself."""


def first_screen(store: Path) -> tuple[float, float]:
    """Seconds from the command's start to its first screen written as SVG: wall, and the
    command's CPU time (user + system)."""
    with tempfile.TemporaryDirectory() as scratch:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "cputrace", "browse", str(store), "--screenshot", f"{scratch}/first.svg"],
            check=True, capture_output=True,
        )  # fmt: skip
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


_PILOT_FIRST_SCREEN = """
import asyncio, os, sys, time
import cputrace
from cputrace.browse.app import BrowseApp
from cputrace.browse.session import Session
from cputrace.cli.params import load_images
session = Session.open(cputrace.open(sys.argv[1]), load_images(sys.argv[2:]))
app = BrowseApp(session, targets_later=True)
async def main():
    async with app.run_test(size=(160, 50)):
        print(time.time(), time.process_time(), flush=True)
        os._exit(0)  # not waiting for the branch targets' decoders, still loading
asyncio.run(main())
"""


def pilot_first_screen(trace: Path, images: list[str]) -> tuple[float, float]:
    """Seconds from the start of a process that opens the browser as `cputrace browse TRACE
    --image ...` does (branch targets after the first screen) to its first screen drawn in
    the pilot: wall, and the process's CPU time."""
    start = time.time()
    found = subprocess.run([sys.executable, "-c", _PILOT_FIRST_SCREEN, str(trace), *images],
                           check=True, capture_output=True, text=True)  # fmt: skip
    drawn, cpu = map(float, found.stdout.split())
    return drawn - start, cpu


Action = Callable[[object], Awaitable[list[str]]]
"""Readies one action (a pane focused, a row selected: not timed) and gives its keys."""


def actions(app: BrowseApp, rng: random.Random, memory: MemoryPane) -> dict[str, Action]:
    session = app.session

    def count() -> int:
        return session.count(app.cpu)

    async def step(pilot) -> list[str]:
        return [rng.choice(("down", "up"))]

    async def page(pilot) -> list[str]:
        return [rng.choice(("pagedown", "pageup"))]

    async def goto_seq(pilot) -> list[str]:
        return ["g", *str(session.seq_of(app.cpu, rng.randrange(count()))), "enter"]

    async def goto_time(pilot) -> list[str]:
        line = session.lines(app.cpu, rng.randrange(count()), 1)[0]
        return ["t", *str(line.time), "enter"]

    async def pc_visit(pilot) -> list[str]:
        return [rng.choice(("n", "N"))]

    async def register_writer(pilot) -> list[str]:
        app.registers_pane.focus()
        app.registers_pane.move_cursor(row=rng.randrange(max(1, app.registers_pane.row_count)))
        await pilot.pause()
        return ["enter"]

    async def memory_writer(pilot) -> list[str]:
        memory.focus()
        await pilot.pause()
        return [rng.choice(("1", "2", "4", "8"))]

    async def fold(pilot) -> list[str]:
        return [rng.choice(("minus", "plus", "left_square_bracket", "left_curly_bracket"))]

    async def divergence(pilot) -> list[str]:
        return [rng.choice(("d", "D"))]

    async def exception(pilot) -> list[str]:
        return [rng.choice(("e", "E"))]

    async def core(pilot) -> list[str]:
        return ["x"]

    found = {
        "step": step, "page": page, "go to seq": goto_seq, "go to time": goto_time,
        "pc visit": pc_visit, "register writer": register_writer, "memory writer": memory_writer,
        "fold/unfold": fold, "exception": exception, "core switch": core,
    }  # fmt: skip
    if app.diff is not None:
        found["divergence"] = divergence
    return found


Costs = dict[str, list[float]]


async def drive(app: BrowseApp, count: int, seed: int) -> tuple[Costs, Costs, list[float]]:
    """Per kind, each action's seconds beyond the pilot's, wall and CPU (this process's, the
    pilot's and the app's); and the unbound key's own wall seconds. Focusing a pane for an
    action (Registers, Memory) and back is not timed: Textual repaints the whole screen when
    the focus moves."""
    rng = random.Random(seed)
    costs: Costs = {}
    cpu_costs: Costs = {}
    nothing: list[float] = []
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("m", "s", "p", "enter")  # a memory pane at sp
        memory = app.memory_panes[0]
        app.trace_pane.focus()
        pc = f"0x{app.session.line(app.seq).pc:x}"
        await pilot.press("p", *pc, "enter")  # the pc `n` and `N` look for
        kinds = actions(app, rng, memory)
        names = list(kinds)
        for number in range(count):
            name = names[number % len(names)]
            keys = await kinds[name](pilot)
            start, cpu = time.perf_counter(), time.process_time()
            await pilot.press(*keys)
            spent, cpu_spent = time.perf_counter() - start, time.process_time() - cpu
            start, cpu = time.perf_counter(), time.process_time()
            await pilot.press(*[NOTHING] * len(keys))
            baseline, cpu_baseline = time.perf_counter() - start, time.process_time() - cpu
            nothing.append(baseline / len(keys))
            costs.setdefault(name, []).append(spent - baseline)
            cpu_costs.setdefault(name, []).append(cpu_spent - cpu_baseline)
            if app.focused is not app.trace_pane:
                app.trace_pane.focus()
                await pilot.pause()
    return costs, cpu_costs, nothing


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{1000 * statistics.median(ordered):8.1f} {1000 * p95:8.1f} {1000 * ordered[-1]:8.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=20_000_000)
    parser.add_argument("--actions", type=int, default=240)
    parser.add_argument("--no-diff", action="store_true", help="Without trace B beside (no divergences).")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--first-screen", metavar="STORE", type=Path,
                        help="Only the first screen of STORE (and --image), drawn in the pilot.")  # fmt: skip
    parser.add_argument("--image", action="append", default=[], help="With --first-screen: PATH[@ADDR].")
    args = parser.parse_args()
    if args.first_screen is not None:
        runs = [pilot_first_screen(args.first_screen, args.image) for _ in range(3)]
        shown = ", ".join(f"{wall:.2f}/{cpu:.2f}" for wall, cpu in runs)
        print(f"first screen in the pilot: median {statistics.median(w for w, _ in runs):.2f} s wall, "
              f"{statistics.median(c for _, c in runs):.2f} s CPU (runs, wall/CPU: {shown})")  # fmt: skip
        return
    store = prepared_store(args.lines)
    a = Session.open(cputrace.open(store))
    diff = None
    if not args.no_diff:
        b = Session.open(cputrace.open(prepared_other(args.lines, generated_trace(args.lines))))
        diff = DiffView.open(a, b)
    print(f"store: {store} ({a.count(a.cpu):,} instructions on cpu {a.cpu})")
    runs = [first_screen(store) for _ in range(3)]
    walls, cpus = [wall for wall, _ in runs], [cpu for _, cpu in runs]
    shown = ", ".join(f"{wall:.2f}/{cpu:.2f}" for wall, cpu in runs)
    print(f"first screen, `cputrace browse --screenshot`: median {statistics.median(walls):.2f} s wall, "
          f"{statistics.median(cpus):.2f} s CPU (runs, wall/CPU: {shown})")  # fmt: skip
    app = BrowseApp(a, Start(seq=a.count(a.cpu) // 2), diff, freeze_heap=True)  # as `cputrace browse`
    costs, cpu_costs, nothing = asyncio.run(drive(app, args.actions, args.seed))
    print(f"a key bound to nothing (the pilot's own time): median {1000 * statistics.median(nothing):.1f} ms")
    print(f"{'action (ms beyond the pilot)':<30} {'n':>4} {'p50':>8} {'p95':>8} {'max':>8}"
          f" {'CPU p50':>8} {'CPU p95':>8}")  # fmt: skip
    for name, values in costs.items():
        print(f"{name:<30} {len(values):>4} {_ms(values)} {_ms(cpu_costs[name])[:17]}")
    every = [v for values in costs.values() for v in values]
    every_cpu = [v for values in cpu_costs.values() for v in values]
    print(f"{'all':<30} {len(every):>4} {_ms(every)} {_ms(every_cpu)[:17]}")
    print(f"peak resident memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
