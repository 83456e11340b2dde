"""Golden digests: every command's output on the corpus, pinned, so that a change meant to alter
no behaviour (a refactoring) is seen to alter none.

Each case is one `cputrace` command line, run in this process (click's test runner) from the
repository's root on stores ingested once per module into a temporary folder. Its digests are
the sha256 of each of its outputs after normalisation: stdout, stderr and every file it wrote
into its own output folder (so which files it writes is pinned too), with its exit status.
`tests/golden/digests.json` holds them with the first lines of each output, so that a failure
shows the case, its command and what changed (expected head against actual head).

Normalisations, each of something that varies from run to run or machine to machine and
nothing else:
- paths: this module's temporary folder is `<TMP>`, the shared corpus `<SHARED>`, the
  repository `<REPO>`;
- a store's version folder (`v-` and 12 random hex digits) is `v-<version>`;
- the duration in `ingest`'s summary ("in 0.33 s") is `in <seconds> s`;
- `info --json`: `ingest_seconds`, each input's `mtime_ns`, `files` (the store's own Parquet
  files: sizes and hashes depend on the Parquet writer's version) and `data` (the version
  folder) are left out;
- Cobertura XML: the `timestamp` attribute (the time of writing) is `<timestamp>`;
- `cputrace X.Y.Z` (callgrind `creator:`, Cobertura `version`, speedscope `exporter`) is
  `cputrace <version>`: a release changes it, not a behaviour;
- Parquet files are digested as their decoded content (row groups, compression, Arrow schema
  with metadata, rows as JSON lines), not as bytes, which carry `created_by`, the writer's
  version.
Rich tables are drawn 120 columns wide (`COLUMNS`; rich otherwise takes the width of the
terminal pytest runs in).

Re-pinning: `CPUTRACE_GOLDEN_UPDATE=1 pytest tests/test_golden.py` rewrites the entries of the
cases it runs (and drops those of cases no longer listed). Re-pin only for a change that is a
bug fix, named in the commit that makes it with the cases it changes; a refactoring leaves
every digest as it is.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from paths import SHARED, shared

from cputrace.cli import cli

ROOT = Path(__file__).resolve().parents[1]
DIGESTS = Path(__file__).parent / "golden" / "digests.json"
UPDATE = os.environ.get("CPUTRACE_GOLDEN_UPDATE", "") not in ("", "0")
HEAD_LINES = 40
HEAD_WIDTH = 160
ENV = {
    "COLUMNS": "120", "LINES": "50",
    "CPUTRACE_DEBUG": None, "CPUTRACE_CACHE": None, "FORCE_COLOR": None, "TTY_COMPATIBLE": None,
}  # fmt: skip


# -- the corpus ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Input:
    """One input of the corpus: `ingest` arguments (a command line) and the ELF that names its
    functions, for the commands that take one. `record`: it is first recorded, by this
    `cputrace record` command line, into `{input}`."""

    ingest: str
    image: str = ""
    record: str = ""


TTU = "{shared}/tarmac-trace-utilities"
INPUTS = {
    "quicksort": Input("examples/quicksort.tarmac", "examples/quicksort.elf"),
    "calltest32": Input(f"{TTU}/tests/calltests/calltest32.tarmac", "tests/data/image/calltest32.elf"),
    "calltest64": Input(f"{TTU}/tests/calltests/calltest64.tarmac", "tests/data/image/calltest64.elf"),
    "calc64-fastmodel": Input(
        "examples/calculator-aarch64-fastmodel.tarmac.xz", "tests/data/image/calculator-aarch64.elf"
    ),
    "calc64-gem5": Input(
        "examples/calculator-aarch64-gem5.tarmac.xz", "tests/data/image/calculator-aarch64.elf"
    ),
    "calc64-es": Input(
        f"{TTU}/samples/calculator-aarch64-es-ld-st-style.tarmac", "tests/data/image/calculator-aarch64.elf"
    ),
    "calc32-fastmodel": Input(
        f"{TTU}/samples/calculator-aarch32-fastmodel.tarmac", "tests/data/image/calculator-aarch32.elf"
    ),
    "calc32-es": Input(
        f"{TTU}/samples/calculator-aarch32-es-ld-st-style.tarmac", "tests/data/image/calculator-aarch32.elf"
    ),
    "cov-a64": Input("tests/data/coverage/cov-a64.tarmac", "tests/data/coverage/cov-a64.elf"),
    "cov-t32": Input("tests/data/coverage/cov-t32.tarmac", "tests/data/coverage/cov-t32.elf"),
    "tc2": Input("tests/data/etmv3/tc2/snapshot.ini"),
    "ptm-snowball": Input("{shared}/opencsd-snapshots/Snowball/snapshot.ini"),
    "leon-itb": Input("--format leon-itb examples/leon-itb.bin", "tests/data/leon/itb_demo.elf"),
    "leon-cf": Input(
        "examples/leon-cf.txt --image tests/data/leon/itb_demo.elf", "tests/data/leon/itb_demo.elf"
    ),
    "leon-ahb": Input("--format leon-ahb examples/leon-ahb.bin"),
    "xscale": Input(
        "tests/data/xscale/calls-armv5te-wrap.txt --image tests/corpus/calls-armv5te.elf",
        "tests/corpus/calls-armv5te.elf",
    ),
    "flow-t32": Input(
        "{input} --image tests/corpus/calls-t32.elf",
        "tests/corpus/calls-t32.elf",
        record="tests/corpus/calls-t32.elf --flow-only",
    ),
    "exceptions-a32": Input(
        "{input}", "tests/corpus/exceptions-a32.elf", record="tests/corpus/exceptions-a32.elf"
    ),
    "armulator": Input("examples/armulator.trc"),
}


# -- the cases -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A command line. `@NAME` is the store of input NAME, `@NAME.elf` its image, `{out}` the
    case's own output folder, `{shared}` the shared corpus."""

    name: str
    command: str


def _cases() -> list[Case]:
    cases: list[Case] = []

    def add(name: str, command: str) -> None:
        cases.append(Case(name, command))

    everything = list(INPUTS)
    with_code = [n for n in INPUTS if n != "leon-ahb"]
    named = [n for n in with_code if INPUTS[n].image]
    for n in everything:
        add(f"{n}/info", f"info @{n}")
        add(f"{n}/info-json", f"info @{n} --json")
        add(f"{n}/list", f"list @{n} --limit 40")
        for table in ("instructions", "registers", "memory", "events"):
            add(f"{n}/export-csv-{table}", f"export @{n} --to csv --table {table} -o {{out}}/{table}.csv")
        add(f"{n}/export-tarmac", f"export @{n} --to tarmac -o {{out}}/trace.tarmac")
    for n in with_code:
        image = f" --image @{n}.elf" if n in named else ""
        add(f"{n}/calls", f"calls @{n}{image}")
        add(f"{n}/calls-tree", f"calls @{n}{image} --tree")
        add(f"{n}/profile", f"profile @{n}{image}")
    return cases


CASES = _cases()


# -- running and normalising -----------------------------------------------------------------


class Session:
    """The module's temporary folder, its stores (each ingested once, on first use) and the
    results of the commands run to make them."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.stores: dict[str, Path] = {}
        self.made: dict[str, Result] = {}  # case name -> result, for record and ingest

    def out(self, case: str) -> Path:
        folder = self.tmp / "out" / case.replace("/", "__")
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def store(self, name: str) -> Path:
        if name not in self.stores:
            spec = INPUTS[name]
            recorded = ""
            if spec.record:
                command = f"record {spec.record} -o {{out}}/{name}.tarmac"
                self.made[f"{name}/record"] = self.run(f"{name}/record", command)
                recorded = shlex.quote(str(self.out(f"{name}/record") / f"{name}.tarmac"))
            store = self.tmp / "stores" / f"{name}.ctrace"
            command = f"ingest {spec.ingest} -o {shlex.quote(str(store))}".replace("{input}", recorded)
            result = self.run(f"{name}/ingest", command)
            assert result.exit == 0, f"{name}: ingest failed: {result.outputs}"
            self.made[f"{name}/ingest"] = result
            self.stores[name] = store
        return self.stores[name]

    def argv(self, case: str, command: str) -> list[str]:
        argv = []
        for token in shlex.split(command):
            if token.startswith("@"):
                name, _, elf = token[1:].partition(".")
                token = INPUTS[name].image if elf == "elf" else str(self.store(name))
            elif "{shared}/" in token:
                prefix, rest = token.split("{shared}/", 1)
                token = prefix + str(shared(*rest.split("/")))
            argv.append(token.replace("{out}", str(self.out(case))))
        return argv

    def run(self, case: str, command: str) -> Result:
        argv = self.argv(case, command)
        folder = self.out(case)
        runner = CliRunner(env=ENV)
        result = runner.invoke(cli, argv, prog_name="cputrace", catch_exceptions=False)
        outputs = {
            "stdout": self.normalise(case, "stdout", result.stdout_bytes),
            "stderr": self.normalise(case, "stderr", result.stderr_bytes),
        }
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            name = path.relative_to(folder).as_posix()
            outputs[f"file {name}"] = self.normalise_file(case, path)
        return Result(result.exit_code, outputs)

    def normalise(self, case: str, what: str, data: bytes) -> list[str] | bytes:
        try:
            text = data.decode()
        except UnicodeDecodeError:
            return data
        for path, token in ((self.tmp, "<TMP>"), (SHARED, "<SHARED>"), (ROOT, "<REPO>")):
            for form in {str(path), str(Path(path).resolve())}:
                text = text.replace(form, token)
        text = re.sub(r"\bv-[0-9a-f]{12}\b", "v-<version>", text)
        text = re.sub(r"\bcputrace \d+\.\d+\.\d+\S*", "cputrace <version>", text)
        if case.endswith("/ingest") and what == "stdout":
            text = re.sub(r" in \d+\.\d+ s$", " in <seconds> s", text, flags=re.M)
        if case.endswith("/info-json") and what == "stdout":
            text = _without_volatile_manifest_fields(text)
        text = re.sub(r'\btimestamp="\d+"', 'timestamp="<timestamp>"', text)
        return text.splitlines(keepends=True)

    def normalise_file(self, case: str, path: Path) -> list[str] | bytes:
        if path.suffix == ".parquet":
            return _parquet_content(path)
        return self.normalise(case, "file", path.read_bytes())


def _without_volatile_manifest_fields(text: str) -> str:
    info = json.loads(text)
    for field in ("ingest_seconds", "files", "data"):
        info.pop(field)
    for entry in info["inputs"]:
        entry.pop("mtime_ns")
    return json.dumps(info, indent=2) + "\n"


def _parquet_content(path: Path) -> list[str]:
    """A Parquet file as what it holds: row groups, compression, schema, rows."""
    file = pq.ParquetFile(path)
    meta = file.metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    lines = [f"rows {meta.num_rows}, row groups {groups}"]
    if meta.num_row_groups:
        group = meta.row_group(0)
        columns = (group.column(i) for i in range(group.num_columns))
        lines += [f"column {column.path_in_schema}: {column.compression}" for column in columns]
    lines += file.schema_arrow.to_string(show_schema_metadata=True).splitlines()
    for batch in file.iter_batches():
        for row in batch.to_pylist():
            lines.append(json.dumps(row, default=lambda v: v.hex() if isinstance(v, bytes) else repr(v)))
    return [line + "\n" for line in lines]


@dataclass
class Result:
    exit: int
    outputs: dict[str, list[str] | bytes]

    def pinned(self, command: str) -> dict:
        return {
            "command": command,
            "exit": self.exit,
            "outputs": {name: _pin(content) for name, content in self.outputs.items()},
        }


def _pin(content: list[str] | bytes) -> dict:
    if isinstance(content, bytes):
        digest = hashlib.sha256(content).hexdigest()
        return {"sha256": digest, "size": len(content), "head": _hexdump(content)}
    data = "".join(content).encode()
    head = [line.rstrip("\n")[:HEAD_WIDTH] for line in content[:HEAD_LINES]]
    return {"sha256": hashlib.sha256(data).hexdigest(), "lines": len(content), "head": head}


def _hexdump(data: bytes) -> list[str]:
    return [f"{i:08x}  {data[i:i + 16].hex(' ')}" for i in range(0, min(len(data), 16 * HEAD_LINES), 16)]


# -- the test --------------------------------------------------------------------------------


_pinned: dict[str, dict] = json.loads(DIGESTS.read_text()) if DIGESTS.exists() else {}
_updated = False


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    global _updated
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        yield Session(tmp_path_factory.mktemp("golden"))
    if UPDATE and _updated:
        names = {c.name for c in CASES} | {f"{n}/ingest" for n in INPUTS}
        names |= {f"{n}/record" for n, spec in INPUTS.items() if spec.record}
        kept = {name: entry for name, entry in _pinned.items() if name in names}
        DIGESTS.parent.mkdir(exist_ok=True)
        DIGESTS.write_text(json.dumps(dict(sorted(kept.items())), indent=1) + "\n")


def _check(name: str, command: str, result: Result) -> None:
    global _updated
    actual = result.pinned(command)
    if UPDATE:
        _pinned[name] = actual
        _updated = True
        return
    expected = _pinned.get(name)
    if expected is None:
        pytest.fail(f"{name}: not pinned; CPUTRACE_GOLDEN_UPDATE=1 pytest tests/test_golden.py pins it")
    problems = []
    if actual["exit"] != expected["exit"]:
        problems.append(f"exit status {actual['exit']}, pinned {expected['exit']}")
    for output in sorted(set(actual["outputs"]) | set(expected["outputs"])):
        want, got = expected["outputs"].get(output), actual["outputs"].get(output)
        if want is None or got is None:
            problems.append(f"{output}: {'not written before' if want is None else 'no longer written'}")
        elif want["sha256"] != got["sha256"]:
            problems.append(_difference(output, want, got))
    if problems:
        pytest.fail(f"{name}: cputrace {command}\n" + "\n".join(problems), pytrace=False)


def _difference(output: str, want: dict, got: dict) -> str:
    size = "lines" if "lines" in want else "size"
    header = f"{output} changed ({want.get(size)} {size} pinned, {got.get(size)} now)"
    diff = list(difflib.unified_diff(want["head"], got["head"], "pinned", "now", lineterm="", n=2))
    if not diff:
        return f"{header}; the first {HEAD_LINES} lines agree"
    return header + "\n" + "\n".join(diff)


@pytest.mark.parametrize("name", [n for n in INPUTS if INPUTS[n].record])
def test_record(session, name):
    session.store(name)
    _check(f"{name}/record", f"record {INPUTS[name].record}", session.made[f"{name}/record"])


@pytest.mark.parametrize("name", list(INPUTS))
def test_ingest(session, name):
    session.store(name)
    _check(f"{name}/ingest", f"ingest {INPUTS[name].ingest}", session.made[f"{name}/ingest"])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_command(session, case):
    _check(case.name, case.command, session.run(case.name, case.command))
