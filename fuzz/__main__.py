"""Command line: run a campaign, replay a saved crasher, or list the targets.

`python -m fuzz --seconds 60 [--families tarmac,etmv3] [--seed N] [--json out.json]`,
`python -m fuzz replay fuzz/crashers/FAMILY-HASH.json [--keep DIR]`, `python -m fuzz list`.
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
import tempfile
from pathlib import Path

from . import campaign
from .case import FAILURES, Case
from .targets import FAMILIES, ROOT, Seed, all_targets
from .worker import Limits, Worker

DEFAULT_CRASHERS = Path(__file__).resolve().parent / "crashers"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["replay"]:
        return replay(argv[1:])
    if argv[:1] == ["list"]:
        for target in all_targets():
            print(f"{target.family:12} {target.name:40} " + " ".join(s.name for s in target.seeds))
        return 0
    return run(argv)


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description="Fuzz every cputrace decoder.")
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="fuzzing time, after the warm-up (default 60)"
    )
    parser.add_argument(
        "--inputs", type=int, help="stop after this many inputs, if before the time (the same on any machine)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="campaign seed: the same seed makes the same inputs"
    )
    parser.add_argument(
        "--families", default=",".join(FAMILIES), help=f"comma-separated, of {', '.join(FAMILIES)}"
    )
    parser.add_argument("--targets", default="", help="comma-separated target names (see `list`): only these")
    parser.add_argument("--modes", default="lenient,strict", help="lenient, strict or both (default)")
    parser.add_argument(
        "--memory-mib", type=int, default=1024, help="resident memory an ingest may add (default 1024)"
    )
    parser.add_argument(
        "--hang-factor", type=float, default=10.0, help="time limit: the seed's time times this"
    )
    parser.add_argument(
        "--hang-floor", type=float, default=10.0, help="time limit at least this (seconds of CPU)"
    )
    parser.add_argument(
        "--crashers", type=Path, default=DEFAULT_CRASHERS, help="where failing inputs are saved"
    )
    parser.add_argument("--json", type=Path, help="write the summary as JSON here")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    names = {n for n in args.targets.split(",") if n}
    modes = tuple(m for m in args.modes.split(",") if m)
    unknown = set(families) - set(FAMILIES) or set(modes) - set(campaign.MODES)
    if unknown:
        parser.error(f"unknown {', '.join(sorted(unknown))}")
    targets = [t for t in all_targets() if t.family in families and (not names or t.name in names)]
    if not targets:
        parser.error("no target selected")
    settings = campaign.Settings(
        seconds=args.seconds, inputs=args.inputs, seed=args.seed, modes=modes,
        memory_limit=args.memory_mib << 20, hang_factor=args.hang_factor, hang_floor=args.hang_floor,
        crashers=args.crashers,
        progress=None if args.quiet else lambda line: print(line, file=sys.stderr, flush=True),
    )  # fmt: skip
    signal.signal(signal.SIGTERM, _interrupt)  # a killed campaign cleans up as after Ctrl-C
    signal.signal(signal.SIGINT, _interrupt)  # even where a shell started it with SIGINT ignored
    try:
        summary = campaign.run(targets, settings)
    except KeyboardInterrupt:  # during the warm-up: nothing to show
        return 130
    campaign.print_table(summary)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary.as_json(), indent=2) + "\n")
    return 130 if summary.interrupted else 1 if summary.failures() else 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def replay(argv: list[str]) -> int:
    """Rebuild a saved case's files, ingest them in a watched worker, print what happened and
    the `cputrace ingest` command that does the same (on the files kept with --keep)."""
    parser = argparse.ArgumentParser(prog="python -m fuzz replay")
    parser.add_argument("crasher", type=Path, help="a FAMILY-HASH.json written by a campaign")
    parser.add_argument("--keep", type=Path, help="keep the case's files and the worker's folder here")
    parser.add_argument("--seconds", type=float, default=60.0, help="CPU time limit (default 60)")
    parser.add_argument("--memory-mib", type=int, default=1024)
    args = parser.parse_args(argv)
    case, mode = load_case(args.crasher)
    with tempfile.TemporaryDirectory(prefix="cputrace-replay-") as scratch:
        folder = args.keep or Path(scratch)
        memory = args.memory_mib << 20
        worker = Worker(folder / "worker", memory)
        result, alive = worker.run(case, mode == "strict", Limits(args.seconds, memory))
        if alive:
            worker.close()
    print(f"{result.outcome}: {result.signature}\n{result.message}\n{result.traceback}")
    inputs = (args.keep or Path("DIR")) / "input"
    if args.keep:
        inputs.mkdir(parents=True, exist_ok=True)
        for name, data in case.files.items():
            (inputs / name).write_bytes(data)
    command = ["cputrace", "ingest", str(inputs / case.main), "-o", str(inputs.parent / "out.ctrace")]
    command += ["--format", case.format] if case.format else []
    command += ["--strict"] if mode == "strict" else []
    for key, value in case.options.items():
        command += ["--option", f"{key}={value}"]
    for image in case.image_specs(inputs):
        command += ["--image", image]
    where = "" if args.keep else " (with the files written by --keep DIR)"
    print(f"the same from the command line{where}:\n  " + shlex.join(command))
    return 1 if result.outcome in FAILURES else 0


def load_case(path: Path) -> tuple[Case, str]:
    """The case a crasher's JSON describes, its mutated file read from the .bin beside it."""
    described = json.loads(path.read_text())
    files = {}
    for name, seed in described["seeds"].items():
        files[name] = Seed(name, ROOT / seed["path"], seed["kind"], seed["cut"]).load()
    files[described["file"]] = path.with_suffix(".bin").read_bytes()
    case = Case(
        described["target"], described["family"], described["index"], described["main"], files,
        described["format"], described["options"], tuple(described["images"]),
        described["mutated"], described["mutations"],
    )  # fmt: skip
    return case, described["mode"]


if __name__ == "__main__":
    sys.exit(main())
