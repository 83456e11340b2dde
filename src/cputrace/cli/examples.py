"""The examples that end each command's --help: they run as written from the repository root,
on files of the repository (tests/test_help.py runs them all, in order, in a copy of it)."""

from __future__ import annotations

import click

QUICKSORT = "examples/quicksort.tarmac"
IMAGE = "--image examples/quicksort.elf"

EXAMPLES: dict[str, tuple[str, ...]] = {
    "": (
        f"cputrace ingest {QUICKSORT}",
        f"cputrace calls {QUICKSORT} {IMAGE}",
    ),
    "ingest": (
        f"cputrace ingest {QUICKSORT} -o quicksort.ctrace",
        "cputrace ingest tests/data/xscale/calls-armv5te-wrap.txt --image tests/corpus/calls-armv5te.elf",
    ),
    "formats": ("cputrace formats",),
    "info": (f"cputrace info {QUICKSORT}", f"cputrace info {QUICKSORT} --json"),
    "list": (
        f'cputrace list {QUICKSORT} --where "pc between 0x8000 and 0x8010" --limit 3',
        f"cputrace list {QUICKSORT} --limit 3 --format tarmac",
    ),
    "sql": (
        f'cputrace sql {QUICKSORT} "SELECT reg, count(*) AS writes FROM registers GROUP BY reg '
        'ORDER BY writes DESC LIMIT 3"',
    ),
    "calls": (f"cputrace calls {QUICKSORT} {IMAGE}", f"cputrace calls {QUICKSORT} {IMAGE} --tree"),
    "profile": (
        f"cputrace profile {QUICKSORT} {IMAGE} --top 5",
        f"cputrace profile {QUICKSORT} --by mix --format csv",
    ),
    "export": (
        f"cputrace export {QUICKSORT} --to perfetto -o quicksort.perfetto-trace {IMAGE}",
        f"cputrace export {QUICKSORT} --to csv --table instructions --start 100 --stop 102 -o first.csv",
    ),
    "state": ("cputrace state tests/data/state/indextest.tarmac --at 2 --mem 0x10400 0x18",),
    "diff": (
        f"cputrace export {QUICKSORT} --to tarmac --stop 1000 -o first-half.tarmac",
        f"cputrace diff {QUICKSORT} first-half.tarmac --ignore-time",
    ),
    "coverage": (
        "cputrace coverage tests/data/coverage/cov-a64.tarmac --image tests/data/coverage/cov-a64.elf "
        "--lcov cov.info",
    ),
    "record": (
        "cputrace record tests/corpus/calls-t32.elf -o calls.tarmac",
        "cputrace record tests/corpus/calls-t32.elf --flow-only --max-insns 5000 -o calls.flow.tarmac",
    ),
    "verify": (f"cputrace ingest {QUICKSORT} -o quicksort.ctrace", "cputrace verify quicksort.ctrace"),
    "browse": (
        f"cputrace browse {QUICKSORT} {IMAGE} --at 100 --screenshot quicksort.svg",
        "cputrace browse tests/data/state/indextest.tarmac --screenshot indextest.svg",
    ),
    "etm": ("cputrace etm packets tests/data/etmv3/tc2 --limit 14",),
    "batch": (f"cputrace batch ingest {QUICKSORT} examples/armulator.trc --workers 2",),
    "batch ingest": (f"cputrace batch ingest {QUICKSORT} examples/armulator.trc -d stores --workers 2",),
    "batch diff": ("cputrace batch diff --pairs examples/pairs.csv --ignore-time --workers 2",),
    "batch coverage": (
        "cputrace export tests/data/coverage/cov-a64.tarmac --to tarmac --stop 150 -o cov-start.tarmac",
        "cputrace batch coverage tests/data/coverage/cov-a64.tarmac cov-start.tarmac "
        "--image tests/data/coverage/cov-a64.elf --workers 2",
    ),
    "batch profile": (
        f"cputrace batch profile {QUICKSORT} examples/calculator-aarch64-fastmodel.tarmac.xz --by mix "
        "--workers 2",
    ),
    "etm packets": (
        "cputrace etm packets tests/data/etmv3/tc2 --limit 14",
        "cputrace etm packets tests/data/etmv3/tc2/snapshot.ini --source 0x11 --format jsonl --limit 5",
    ),
}
"""Command path (space-separated, "" for `cputrace` itself) -> example command lines."""


def examples_epilog(path: str) -> str:
    """The examples of a command as a paragraph of its help that click prints as it is."""
    lines = "\n".join(f"  $ {line}" for line in EXAMPLES[path])
    return f"\b\nExamples:\n{lines}"


def with_examples(command: click.Command, path: str) -> click.Command:
    """`command` with its examples (and those of its subcommands) after its other epilog text."""
    if path in EXAMPLES and "Examples:" not in (command.epilog or ""):
        command.epilog = "\n\n".join(filter(None, (command.epilog, examples_epilog(path))))
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            with_examples(sub, f"{path} {name}".strip())
    return command
