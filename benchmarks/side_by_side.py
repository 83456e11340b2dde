"""Two checkouts of cputrace timed in turns on the same commands: the figure for "is it slower?".

    git worktree add /tmp/base main~3
    python benchmarks/side_by_side.py --base /tmp/base/src --store STORE --rounds 5
    python benchmarks/side_by_side.py --base /tmp/base/src --store STORE --command "calls --tree"

Each round runs every command once under each checkout, alternating which goes first, in a
fresh process (imports and compiled-code cache loads included, as a user runs it). The load
of a shared machine moves absolute times by a third within minutes; taking turns exposes both
checkouts to the same load, so only the ratio is meaningful. Prints, per command, the least
and median CPU seconds (user + system of the process) and wall seconds of each, and the
ratio of least CPU times. Both checkouts are warmed first (their compiled-code caches are
built by a run outside the rounds). STORE must be readable by both: a store written by the
older checkout, if their store versions differ.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_COMMANDS = ("calls", "calls --tree", "profile", "export --to callgrind -o /dev/null")


def timed(src: Path, argv: list[str]) -> tuple[float, float]:
    """CPU and wall seconds of `python -m cputrace ARGV` importing cputrace from SRC."""
    env = dict(os.environ, PYTHONPATH=str(src))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "cputrace", *argv], env=env, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{src}: cputrace {shlex.join(argv)} failed:\n{done.stderr.decode(errors='replace')}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return cpu, wall


def command_argv(command: str, store: str) -> list[str]:
    """The command's words with the store after the command name ('calls --tree' -> calls STORE --tree)."""
    words = shlex.split(command)
    return [words[0], store, *words[1:]]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", type=Path, required=True, help="the other checkout's src/ folder")
    parser.add_argument("--head", type=Path, default=Path(__file__).resolve().parent.parent / "src")
    parser.add_argument("--store", required=True)
    parser.add_argument("--command", action="append", help="a command to time (repeatable)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    checkouts = {"base": args.base.resolve(), "head": args.head.resolve()}
    commands = args.command or list(DEFAULT_COMMANDS)
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for command in commands:
        for src in checkouts.values():
            timed(src, command_argv(command, args.store))
    for round_ in range(args.rounds):
        order = list(checkouts.items())
        if round_ % 2:
            order.reverse()
        for command in commands:
            for name, src in order:
                times.setdefault((command, name), []).append(timed(src, command_argv(command, args.store)))
    print(f"{args.rounds} rounds in turns; base {checkouts['base']}, head {checkouts['head']}")
    header = ("base cpu", "head cpu", "ratio", "", "base wall", "head wall")
    print(f"{'command':40s} " + " ".join(f"{h:>9s}" for h in header))
    for command in commands:
        base, head = times[(command, "base")], times[(command, "head")]
        base_cpu, head_cpu = min(c for c, _ in base), min(c for c, _ in head)
        print(
            f"{command:40s} {base_cpu:9.2f} {head_cpu:9.2f} {head_cpu / base_cpu:6.2f}   "
            f"{min(w for _, w in base):9.2f} {min(w for _, w in head):9.2f}"
            f"   (median cpu {statistics.median(c for c, _ in base):.2f} / "
            f"{statistics.median(c for c, _ in head):.2f})"
        )


if __name__ == "__main__":
    main()
