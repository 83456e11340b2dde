"""The trace browser on a large trace: index builds, then the engine's work per kind of action.

    python benchmarks/bench_browse.py --lines 20000000

Generates the Fast-Models-style AArch64 trace (gen_tarmac.py) and ingests it unless both exist
(bench_state.prepared_store), and a copy of it with one register value in `CHANGE_EVERY`
lines changed (trace B of the diff), removes their indexes, then measures:
- the index builds (`Session.open` on a store without them, then `DiffView.open` against
  B): time and size on disk;
- `Session.open` again (indexes there): what the browser waits for before its first screen;
- random actions of each kind (`engine_actions`), in a process of their own: the store and
  index work the browser does for the action alone, without Textual: the move itself, then
  what the screen shows after it (a screen of lines, the registers, 128 bytes of memory at
  sp, the call stack, B's lines beside A's); p50, p95 and max per kind;
- peak resident memory of the builds, and of the browsing process.

`engine_actions` is the boundary with the app's benchmark: it names the actions, and each
returns the engine calls behind one key press.
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench_state import prepared_store
from measure import OUT, run_measured

import cputrace
from cputrace.browse.diffview import DiffView
from cputrace.browse.session import Session
from cputrace.errors import BrowseError

SCREEN = 40  # lines of the trace pane
MEMORY_BYTES = 128
CHANGE_EVERY = 10_007
"""Trace B differs from A in one `R X0` value every this many lines."""


def prepared_other(lines: int, trace: Path) -> Path:
    """Trace B's store: the generated trace with an `R X0` value changed now and then."""
    store = OUT / f"bench-{lines}-b.ctrace"
    if (store / "manifest.json").exists():
        return store
    text = OUT / f"bench-{lines}-b.tarmac"
    with open(trace) as source, open(text, "w") as out:
        pending = False  # a change is due: at the next `R X0` line
        for number, line in enumerate(source):
            pending = pending or number % CHANGE_EVERY == 0
            if pending and " R X0 " in line:
                line = line[:-2] + ("1" if line[-2] == "0" else "0") + "\n"
                pending = False
            out.write(line)
    run_measured([sys.executable, "-m", "cputrace", "ingest", str(text), "-o", str(store)])
    text.unlink()
    return store


@dataclass
class Cursor:
    """Where the simulated user is: a core and an index among its instructions."""

    cpu: int
    index: int
    pc_seen: list[int] = field(default_factory=list)


def show(session: Session, cursor: Cursor) -> None:
    """What a screen reads after a move: lines from the cursor, registers, memory at sp, stack."""
    cpu = cursor.cpu
    lines = session.lines(cpu, cursor.index, SCREEN, session.folds)
    seq = lines[0].seq
    session.registers(cpu, seq)
    session.memory(stack_pointer(session, cpu, seq), MEMORY_BYTES, seq)
    session.stack(cpu, seq)


def stack_pointer(session: Session, cpu: int, seq: int) -> int:
    """sp at the point, or 0 before the trace writes it."""
    try:
        return session.evaluate("sp", cpu, seq)
    except BrowseError:
        return 0


def engine_actions(
    session: Session, rng: random.Random, diff: DiffView | None = None
) -> dict[str, Callable[[Cursor], None]]:
    """Each kind of action as a function moving the cursor as its key would, and showing the
    screen after it (with `diff`, trace B's lines beside it too)."""

    def seq(cursor: Cursor) -> int:
        return session.seq_of(cursor.cpu, cursor.index)

    def to_seq(cursor: Cursor, found: int | None) -> None:
        if found is not None:
            cursor.index = session.index_of(cursor.cpu, found) or 0

    def step(cursor: Cursor) -> None:
        cursor.index = session.move(cursor.cpu, cursor.index, rng.choice((1, -1)), session.folds)

    def page(cursor: Cursor) -> None:
        cursor.index = session.move(cursor.cpu, cursor.index, rng.choice((SCREEN, -SCREEN)), session.folds)

    def goto_seq(cursor: Cursor) -> None:
        cursor.index = rng.randrange(session.count(cursor.cpu))

    def goto_time(cursor: Cursor) -> None:
        line = session.lines(cursor.cpu, rng.randrange(session.count(cursor.cpu)), 1)[0]
        to_seq(cursor, session.seq_at_time(line.time + rng.randrange(3), cursor.cpu))

    def next_pc_visit(cursor: Cursor) -> None:
        to_seq(cursor, session.next_visit(cursor.cpu, seq(cursor), forward=rng.random() < 0.5))

    def register_writer(cursor: Cursor) -> None:
        registers = session.registers(cursor.cpu, seq(cursor))
        if registers:
            register = rng.choice(registers)
            to_seq(cursor, session.register_writer(cursor.cpu, register.name, seq(cursor)))

    def memory_writer(cursor: Cursor) -> None:
        at = seq(cursor)
        address = stack_pointer(session, cursor.cpu, at) + rng.randrange(MEMORY_BYTES)
        to_seq(cursor, session.memory_writer(address, rng.choice((1, 2, 4, 8)), at))

    def fold(cursor: Cursor) -> None:
        at = seq(cursor)
        if session.folds.any(cursor.cpu) and rng.random() < 0.5:
            session.unfold_all()
        elif rng.random() < 0.5:
            session.fold_call(cursor.cpu, at)
        else:
            session.fold_callees(cursor.cpu, at)

    def core_switch(cursor: Cursor) -> None:
        positions = session.positions_at(seq(cursor))
        others = [cpu for cpu, at in positions.items() if at is not None and cpu != cursor.cpu]
        if others:
            cursor.cpu = rng.choice(others)
            to_seq(cursor, positions[cursor.cpu])

    def timeline_jump(cursor: Cursor) -> None:
        strip = session.timeline(cursor.cpu, 200, 16)
        session.timeline_column(strip, seq(cursor))
        to_seq(cursor, session.timeline_seq(strip, rng.randrange(strip.columns)))

    def next_divergence(cursor: Cursor) -> None:
        assert diff is not None
        found = diff.next_divergence(cursor.cpu, seq(cursor), forward=rng.random() < 0.5)
        if found is not None:
            to_seq(cursor, found.position)
            if found.a_seq is not None and found.b_seq is not None:
                diff.differences(found.a_seq, found.b_seq)

    def search(cursor: Cursor) -> None:
        to_seq(cursor, session.search("NOT executed", cursor.cpu, seq(cursor), forward=rng.random() < 0.5))

    kinds = {
        "step": step,
        "page": page,
        "go to seq": goto_seq,
        "go to time": goto_time,
        "next pc visit": next_pc_visit,
        "register writer": register_writer,
        "memory writer": memory_writer,
        "fold/unfold": fold,
        "core switch": core_switch,
        "timeline jump": timeline_jump,
        "search (SQL)": search,
    }
    if not session.has_time:
        del kinds["go to time"]
    if diff is not None:
        kinds["next divergence"] = next_divergence

    def with_screen(move: Callable[[Cursor], None]) -> Callable[[Cursor], None]:
        def action(cursor: Cursor) -> None:
            move(cursor)
            show(session, cursor)
            if diff is not None:
                beside, _ = diff.aligned(cursor.cpu, seq(cursor))
                if beside is not None:
                    diff.b.lines(cursor.cpu, diff.b.index_of(cursor.cpu, beside) or 0, SCREEN)

        return action

    return {name: with_screen(move) for name, move in kinds.items()}


def build(lines: int) -> None:
    """Remove both stores' indexes, build them again, and print what that took."""
    store = prepared_store(lines)
    other = prepared_other(lines, OUT / f"bench-{lines}.tarmac")
    trace, trace_b = cputrace.open(store), cputrace.open(other)
    for held in (trace, trace_b):
        shutil.rmtree(held.data / "index", ignore_errors=True)
    start = time.perf_counter()
    session = Session.open(trace)
    seconds = time.perf_counter() - start
    session_b = Session.open(trace_b)
    start = time.perf_counter()
    diff = DiffView.open(session, session_b)
    diff_seconds = time.perf_counter() - start
    instructions = trace.manifest["counts"]["instructions"]
    print(f"trace               {lines:,} lines, {instructions:,} instructions ({store.name})")
    print(f"index builds        {seconds:.1f} s (browse and calls indexes, first Session.open)")
    divergences = diff.summary["divergences"]
    print(f"diff build          {diff_seconds:.1f} s (first DiffView.open; {divergences:,} divergences)")
    folders = (
        ("browse", session.index.directory),
        ("calls", session.calls.directory),
        ("diff", diff.directory),
    )
    for name, directory in folders:
        size = sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())
        print(f"  {name:<17} {size / 1e6:,.1f} MB")
    print(
        f"peak RSS            {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:,.0f} MiB (builds)"
    )


def browse(lines: int, count: int) -> None:
    """Open the stores (indexes built), run `count` random actions of each kind, print timings."""
    start = time.perf_counter()
    session = Session.open(cputrace.open(OUT / f"bench-{lines}.ctrace"))
    opened = time.perf_counter() - start
    diff = DiffView.open(session, Session.open(cputrace.open(OUT / f"bench-{lines}-b.ctrace")))
    rng = random.Random(1)
    actions = engine_actions(session, rng, diff)
    cursor = Cursor(session.cpu, session.count(session.cpu) // 2)
    show(session, cursor)
    times: dict[str, list[float]] = {name: [] for name in actions}
    cpu_times: dict[str, list[float]] = {name: [] for name in actions}
    order = [name for name in actions for _ in range(count)]
    rng.shuffle(order)
    for name in order:
        start, cpu_start = time.perf_counter(), time.process_time()
        actions[name](cursor)
        times[name].append(time.perf_counter() - start)
        cpu_times[name].append(time.process_time() - cpu_start)
    print(f"Session.open        {opened * 1e3:.0f} ms with the indexes built")
    print(f"actions             {count} of each kind, random order; engine work and screen (ms):")
    print(f"  {'kind':<17} {'p50':>6} {'p95':>6} {'max':>6}   {'CPU p50':>7} {'p95':>6}")
    for name, values in times.items():
        wall, cpu = _percentiles(values), _percentiles(cpu_times[name])
        print(f"  {name:<17} {wall[0]:6.1f} {wall[1]:6.1f} {wall[2]:6.1f}   {cpu[0]:7.1f} {cpu[1]:6.1f}")
    print(
        f"peak RSS            {peak_rss() / 2**20:,.0f} MiB (the browsing process: both stores, the actions)"
    )


def _percentiles(seconds: list[float]) -> tuple[float, float, float]:
    """p50, p95 and max in milliseconds."""
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e3, p95 * 1e3, ordered[-1] * 1e3


def peak_rss() -> int:
    """This process's peak resident memory since it started (VmHWM: getrusage's would count
    what the parent held before the fork)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=20_000_000)
    parser.add_argument("--actions", type=int, default=100, help="Random actions of each kind.")
    parser.add_argument("--browse-only", action="store_true", help=argparse.SUPPRESS)  # the child's part
    args = parser.parse_args()
    if args.browse_only:
        browse(args.lines, args.actions)
        return
    build(args.lines)
    child = [
        sys.executable,
        __file__,
        "--lines",
        str(args.lines),
        "--actions",
        str(args.actions),
        "--browse-only",
    ]
    sys.stdout.write(subprocess.run(child, stdout=subprocess.PIPE, text=True, check=True).stdout)


if __name__ == "__main__":
    main()
