"""`cputrace batch` on Dask clusters, checked against the single-process commands.

A regression of recorded corpus programs: each has a "model" trace and an "RTL" trace, a copy
of it with, for a few, a divergence injected into the text (a register value changed, an
instruction left out, a branch that did not execute). One local cluster of two worker
processes serves the module (each start costs seconds); the CLI reaches it with --scheduler.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

import cputrace
from cputrace.cli import cli
from cputrace.image import ImageError
from cputrace.opening import open as open_trace
from cputrace.record import record

pytest.importorskip("distributed")

from cluster_faults import killing_a_busy_worker

from cputrace.batch.cluster import connect
from cputrace.batch.diff import diff_pairs, pairs_from_csv
from cputrace.batch.ingest import Ingested, ingest_many, ingest_one
from cputrace.batch.tasks import SHARED_STORAGE, Failed

CORPUS = Path(__file__).parent / "corpus"
QUICKSORT = Path(__file__).parent.parent / "examples" / "quicksort.tarmac"
INSTRUCTION = re.compile(r"^\d+ clk (IT|IS) \(\d+\) ([0-9a-f]+) ([0-9a-f]+) ")
REGISTER = re.compile(r"^(\d+ clk R \S+ )([0-9a-f]+)$")
CONDITIONS = "ne|eq|hs|lo|cs|cc|gt|le|ge|lt"
CONDITIONAL_BRANCH = re.compile(rf": (b\.({CONDITIONS})|b({CONDITIONS})(\.w|\.n)?) ")


@dataclass(frozen=True)
class RegressionTest:
    """One test of the regression: a program recorded up to `max_insns`, and what is injected."""

    name: str
    program: str
    cpu: str | None = None
    max_insns: int = 10_000_000
    inject: str | None = None  # "register", "skip", "branch"


PROGRAMS = [("calls-a32", None), ("calls-t32", None), ("calls-a64", None), ("calls-armv5te", "pxa270"),
            ("calls-armv5te-thumb", "pxa270")]  # fmt: skip
LIMITS = (None, 2_000, 6_000, 12_000)
INJECTED = {
    ("calls-a32", 6_000): "register",
    ("calls-t32", None): "skip",
    ("calls-a64", 12_000): "branch",
    ("calls-armv5te", 2_000): "register",
    ("calls-armv5te-thumb", None): "branch",
}
TESTS = [
    *(
        RegressionTest(
            f"{program}-{limit or 'full'}", program, cpu, limit or 10_000_000, INJECTED.get((program, limit))
        )
        for program, cpu in PROGRAMS
        for limit in LIMITS
    ),
    RegressionTest("exceptions-a32", "exceptions-a32"),
    RegressionTest("exceptions-a64", "exceptions-a64", inject="skip"),
]


def _inject(lines: list[str], kind: str) -> int:
    """Change the RTL trace's lines as `kind` says, two thirds of the way in; returns the line
    number (1-based) of the instruction record whose instruction diverges."""
    starts = [n for n, line in enumerate(lines) if INSTRUCTION.match(line)]
    for n in starts[2 * len(starts) // 3 :]:
        following = starts[starts.index(n) + 1] if n != starts[-1] else len(lines)
        records = range(n + 1, following)
        if kind == "register":
            written = [k for k in records if REGISTER.match(lines[k])]
            if written:
                prefix, value = REGISTER.match(lines[written[0]]).groups()
                lines[written[0]] = prefix + f"{int(value, 16) ^ 0x10:0{len(value)}x}"
                return n + 1
        elif kind == "skip":
            del lines[n:following]
            return n + 1
        elif kind == "branch" and lines[n].split()[2] == "IT" and CONDITIONAL_BRANCH.search(lines[n]):
            lines[n] = lines[n].replace(" IT ", " IS ", 1)
            return n + 1
    raise AssertionError(f"nowhere to inject {kind}")


@dataclass
class Suite:
    model: Path
    rtl: Path
    expected: dict[str, tuple[int, str]]  # name -> (seq of the divergence in the model trace, kind)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    """The regression: model/NAME.tarmac and rtl/NAME.tarmac for every test."""
    root = tmp_path_factory.mktemp("regression")
    model, rtl = root / "model", root / "rtl"
    model.mkdir()
    rtl.mkdir()
    expected = {}
    for test in TESTS:
        trace = model / f"{test.name}.tarmac"
        record(CORPUS / f"{test.program}.elf", trace, cpu=test.cpu, max_insns=test.max_insns)
        lines = trace.read_text().splitlines()
        if test.inject:
            line = _inject(lines, test.inject)
            seq = open_trace(trace).sql(f"SELECT seq FROM instructions WHERE src = {line}").column("seq")
            expected[test.name] = (seq[0].as_py(), test.inject)
        (rtl / trace.name).write_text("\n".join(lines) + "\n")
    return Suite(model, rtl, expected)


@pytest.fixture(scope="module")
def client():
    """A local cluster of two worker processes for the module, stopped at its end."""
    with connect(workers=2) as client:
        yield client


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def _scheduler(client) -> list[str]:
    return ["--scheduler", client.scheduler.address]


def test_the_regression_has_twenty_programs_and_a_few_divergences(suite: Suite) -> None:
    assert len(TESTS) >= 20
    assert sorted(suite.expected) == sorted(t.name for t in TESTS if t.inject)
    assert {kind for _, kind in suite.expected.values()} == {"register", "skip", "branch"}


def test_batch_diff_names_exactly_the_injected_tests_at_their_seq(suite: Suite, client) -> None:
    status, out, err = _cli(
        "batch", "diff", str(suite.model), str(suite.rtl), "--format", "json", *_scheduler(client)
    )
    assert status == 0, err
    rows = json.loads(out)
    assert len(rows) == len(TESTS)
    divergent = {Path(row["a"]).stem: row for row in rows if row["status"] == "divergent"}
    assert divergent.keys() == suite.expected.keys()
    assert [row["status"] for row in rows] == ["divergent"] * len(divergent) + ["identical"] * (
        len(rows) - len(divergent)
    )
    kinds = {"register": "registers", "skip": "unaligned", "branch": "executed"}
    for name, (seq, injected) in suite.expected.items():
        assert divergent[name]["a_seq"] == seq, name
        assert divergent[name]["kinds"] == kinds[injected], name


def test_batch_diff_equals_cputrace_diff_pair_by_pair(suite: Suite, client) -> None:
    """Every pair's count of divergences and first divergence, as `cputrace diff` gives them."""
    pairs = suite.model.parent / "pairs.csv"
    pairs.write_text("a,b\n" + "".join(f"model/{t.name}.tarmac,rtl/{t.name}.tarmac\n" for t in TESTS))
    status, out, err = _cli("batch", "diff", "--pairs", str(pairs), "--format", "json", *_scheduler(client))
    assert status == 0, err
    for row in json.loads(out):
        status, single, err = _cli("diff", row["a"], row["b"], "--format", "json")
        assert status == 0, err
        alone = json.loads(single)
        assert row["divergences"] == alone["divergences"]
        counts = ("paired", "only_a", "only_b")
        assert [row[name] for name in counts] == [alone[name] for name in counts]
        first = alone["listed"][0] if alone["listed"] else {"a_seq": None, "b_seq": None, "cpu": None}
        assert (row["a_seq"], row["b_seq"], row["cpu"]) == (first["a_seq"], first["b_seq"], first["cpu"])


def test_batch_diff_text_lists_divergent_pairs_first_and_a_missing_name_fails(suite: Suite, client) -> None:
    lonely = suite.model / "lonely.tarmac"
    shutil.copy(suite.model / "exceptions-a32.tarmac", lonely)
    try:
        status, out, err = _cli("batch", "diff", str(suite.model), str(suite.rtl), *_scheduler(client))
    finally:
        lonely.unlink()
    assert status == 1
    assert "lonely.tarmac: no trace of that name in" in err
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["status", "divergences"]
    statuses = [line.split()[0] for line in lines[1:-1]]
    assert statuses == sorted(statuses, key=["divergent", "failed", "identical"].index)
    assert lines[-1] == f"{len(TESTS) + 1} pairs: {len(suite.expected)} divergent, 1 failed, " + (
        f"{len(TESTS) - len(suite.expected)} identical"
    )


def test_a_pair_whose_file_is_missing_fails_as_missing(suite: Suite, client, tmp_path) -> None:
    """A path in --pairs that does not exist: that pair fails naming it as missing (it was
    reported as a file system the workers do not share), the other pairs are compared."""
    name = next(test.name for test in TESTS if test.name not in suite.expected)  # identical
    model, rtl = suite.model / f"{name}.tarmac", suite.rtl / f"{name}.tarmac"
    pairs = tmp_path / "pairs.csv"
    pairs.write_text(f"{model},{rtl}\n{tmp_path / 'gone.tarmac'},{rtl}\n")
    status, out, err = _cli("batch", "diff", "--pairs", str(pairs), *_scheduler(client))
    assert status == 1
    assert f"{tmp_path / 'gone.tarmac'}: no such file or store" in err and "shared file system" not in err
    assert out.splitlines()[-1] == "2 pairs: 0 divergent, 1 failed, 1 identical"


def _coverage_lines(info: str) -> dict[tuple[str, int], int]:
    """(file, line) -> hits of an lcov tracefile."""
    hits, source = {}, ""
    for line in info.splitlines():
        if line.startswith("SF:"):
            source = line[3:]
        elif line.startswith("DA:"):
            number, count = line[3:].split(",")[:2]
            hits[(source, int(number))] = int(count)
    return hits


def test_merged_coverage_equals_coverage_of_all_traces_ingested_as_one(
    suite: Suite, client, tmp_path: Path
) -> None:
    traces = [str(suite.model / f"calls-a64-{limit or 'full'}.tarmac") for limit in LIMITS]
    image = str(CORPUS / "calls-a64.elf")
    reports = ("--lcov", str(tmp_path / "suite.info"), "--cobertura", str(tmp_path / "suite.xml"))
    status, out, err = _cli("batch", "coverage", *traces, "--image", image, *reports, *_scheduler(client))
    assert status == 0, err
    together = tmp_path / "together.ctrace"
    assert _cli("ingest", *traces, "-o", str(together))[0] == 0
    reports = ("--lcov", str(tmp_path / "one.info"), "--cobertura", str(tmp_path / "one.xml"))
    status, _, err = _cli("coverage", str(together), "--image", image, *reports)
    assert status == 0, err
    test_name = re.compile(r"^TN:.*$", re.MULTILINE)
    merged, one = (test_name.sub("", (tmp_path / name).read_text()) for name in ("suite.info", "one.info"))
    assert merged == one
    strip_time = re.compile(r' timestamp="\d+"')
    assert strip_time.sub("", (tmp_path / "suite.xml").read_text()) == strip_time.sub(
        "", (tmp_path / "one.xml").read_text()
    )
    status, summary, err = _cli("coverage", str(together), "--image", image, "--no-functions")
    assert status == 0, err
    assert out.startswith(summary)  # the summary of `coverage`, then the traces' table

    # what each trace covered that no other did, against each trace's own coverage
    status, shares, err = _cli("batch", "coverage", *traces, "--image", image, "--format", "json",
                               *_scheduler(client))  # fmt: skip
    each = []
    for n, trace in enumerate(traces):
        assert _cli("coverage", trace, "--image", image, "--lcov", str(tmp_path / f"{n}.info"))[0] == 0
        lines = _coverage_lines((tmp_path / f"{n}.info").read_text())
        each.append({key for key, hits in lines.items() if hits})
    for n, row in enumerate(json.loads(shares)):
        others = set().union(*(lines for m, lines in enumerate(each) if m != n))
        assert row["trace"] == traces[n]
        assert row["only_lines"] == len(each[n] - others)
    assert json.loads(shares)[0]["only_lines"] > 0  # the full run covers what its prefixes do not


def _keyed(tables: dict[str, list[dict]]) -> dict[str, dict[tuple, dict]]:
    keys = {"functions": ("cpu", "address"), "lines": ("cpu", "file", "line"), "addresses": ("cpu", "pc"),
            "mix": ("cpu",), "blocks": ("cpu", "start")}  # fmt: skip
    return {name: {tuple(row[k] for k in keys[name]): row for row in rows} for name, rows in tables.items()}


ADDED = {
    "functions": ("calls", "insns_self", "insns", "time_self", "time"),
    "lines": ("count", "time"),
    "addresses": ("count", "failed", "time"),
    "mix": ("instructions", "executed", "condition_failed", "loads", "stores", "branches", "calls", "returns",
            "unknown"),
    "blocks": ("executions", "insns", "time"),
}  # fmt: skip


def test_batch_profile_equals_the_profiles_of_each_trace_added_up(suite: Suite, client) -> None:
    traces = [str(suite.model / f"calls-t32-{limit or 'full'}.tarmac") for limit in LIMITS]
    image = str(CORPUS / "calls-t32.elf")
    status, out, err = _cli(
        "batch", "profile", *traces, "--image", image, "--format", "json", *_scheduler(client)
    )
    assert status == 0, err
    expected: dict[str, dict[tuple, dict]] = defaultdict(dict)
    for trace in traces:
        status, single, err = _cli("profile", trace, "--image", image, "--format", "json")
        assert status == 0, err
        for name, rows in _keyed(json.loads(single)).items():
            for key, row in rows.items():
                if key not in expected[name]:
                    expected[name][key] = dict(row)
                    continue
                for column in ADDED[name]:
                    expected[name][key][column] += row[column]
    got = _keyed(json.loads(out))
    assert got.keys() == expected.keys()
    for name in got:
        assert got[name] == expected[name], name
    assert got["mix"][(0,)]["instructions"] == sum(  # four traces: the full run and three prefixes
        min(limit or 21_808, 21_808) for limit in LIMITS
    )


def test_batch_ingest_gives_the_stores_of_ingest_and_reports_a_failed_input(
    suite: Suite, client, tmp_path: Path
) -> None:
    inputs = [str(suite.model / f"{t.name}.tarmac") for t in TESTS[:3]]
    broken = Path(__file__).parent.parent / "examples" / "broken.tarmac"
    out_dir = tmp_path / "stores"
    status, out, err = _cli("batch", "ingest", *inputs, str(broken), "--strict", "-d", str(out_dir),
                            *_scheduler(client))  # fmt: skip
    assert status == 1
    assert f"{broken}:11: expected an instruction address and opcode" in err
    assert "1 of 4 inputs failed" in err
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(Path(p).name + ".ctrace" for p in inputs)
    for path in inputs:
        batch = open_trace(out_dir / (Path(path).name + ".ctrace"))
        single = open_trace(path)
        for table in ("instructions", "registers", "memory", "events"):
            assert batch.table(table).equals(single.table(table)), (path, table)
        count = single.manifest["counts"]["instructions"]
        assert f"{out_dir / (Path(path).name + '.ctrace')}: {count:,} instructions" in out


def test_a_path_a_worker_cannot_read_is_said_to_need_shared_storage(client, tmp_path) -> None:
    """A worker that cannot read an input the client found (the task run as a worker runs it,
    here on a path that is not there) says so and why. An input or a pair the client itself
    cannot find fails as missing, and the others go on; an image it cannot find is refused
    before any task starts, as `ingest` refuses it."""
    failed = ingest_one(str(tmp_path / "elsewhere.tarmac"), str(tmp_path / "e.ctrace"), None, False, {}, ())
    assert isinstance(failed, Failed)
    assert failed.message.endswith(SHARED_STORAGE) and "elsewhere.tarmac: worker on" in failed.message
    missing, done = ingest_many(client, [tmp_path / "gone.tarmac", QUICKSORT], tmp_path / "batch")
    assert isinstance(missing, Failed)
    assert missing.message == f"{tmp_path / 'gone.tarmac'}: no such file or store"
    single = cputrace.ingest(QUICKSORT, tmp_path / "single.ctrace").manifest
    assert isinstance(done, Ingested) and done.manifest["counts"] == single["counts"]
    with pytest.raises(ImageError, match=r"nope\.elf: cannot read: No such file or directory"):
        ingest_many(client, [QUICKSORT], tmp_path, images=[str(tmp_path / "nope.elf")])
    (pair,) = diff_pairs(client, [(tmp_path / "a.ctrace", tmp_path / "b.ctrace")])
    assert isinstance(pair, Failed) and pair.message == f"{tmp_path / 'a.ctrace'}: no such file or store"


def test_pairs_csv_paths_are_relative_to_its_folder_and_bad_rows_are_named(tmp_path) -> None:
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("a,b\nm/t.tarmac,r/t.tarmac\n\nx\n")
    with pytest.raises(Exception, match=r"pairs.csv:4: expected two paths, a,b, got \['x'\]"):
        pairs_from_csv(pairs)
    pairs.write_text("m/t.tarmac, r/t.tarmac\n")
    assert pairs_from_csv(pairs) == [(str(tmp_path / "m/t.tarmac"), str(tmp_path / "r/t.tarmac"))]


def test_a_worker_killed_during_a_batch_changes_no_result(suite: Suite, client) -> None:
    pairs = [(suite.model / f"{t.name}.tarmac", suite.rtl / f"{t.name}.tarmac") for t in TESTS]
    before = diff_pairs(client, pairs)
    with killing_a_busy_worker(client) as killed:
        after = diff_pairs(client, pairs)
    assert killed and killed[0] not in client.scheduler_info()["workers"]
    assert after == before
    client.wait_for_workers(2, timeout=180)


def test_a_task_whose_workers_keep_dying_fails_naming_its_input_and_leaves_no_store(
    suite: Suite, client, tmp_path
) -> None:
    """With no failure allowed, the task on the killed worker cannot complete."""
    inputs = [suite.model / f"{t.name}.tarmac" for t in TESTS[:8]]
    allowed = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.allowed_failures)
    client.run_on_scheduler(lambda dask_scheduler: setattr(dask_scheduler, "allowed_failures", 0))
    try:
        with killing_a_busy_worker(client):
            results = ingest_many(client, inputs, tmp_path)
    finally:
        client.run_on_scheduler(lambda dask_scheduler: setattr(dask_scheduler, "allowed_failures", allowed))
        client.wait_for_workers(2, timeout=180)
    failed = [r for r in results if isinstance(r, Failed)]
    assert failed
    for result, path in zip(results, inputs, strict=True):
        store = tmp_path / (path.name + ".ctrace")
        if isinstance(result, Failed):
            assert result.name == str(path)
            assert result.message.startswith(f"{path}: the job could not complete: 1 worker process died")
            assert not store.exists()
        else:
            assert isinstance(result, Ingested) and store.is_dir()
    assert not list(tmp_path.glob("*.tmp-*"))  # no staging folder left either


@pytest.fixture
def running_cluster(tmp_path):
    """A `dask scheduler` and two `dask worker` processes on 127.0.0.1, and its scheduler file;
    all stopped at the end."""
    scheduler_file = tmp_path / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    dask = [sys.executable, "-m", "dask"]
    processes = []

    def start(*args: str) -> None:
        processes.append(subprocess.Popen([*dask, *args], env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, start_new_session=True))  # fmt: skip

    try:
        start("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
              "--scheduler-file", str(scheduler_file))  # fmt: skip
        for _ in range(2):
            start("worker", "--scheduler-file", str(scheduler_file), "--nthreads", "1", "--nworkers", "1",
                  "--no-dashboard", "--host", "127.0.0.1")  # fmt: skip
        from distributed import Client

        for _ in range(600):
            if scheduler_file.exists():
                break
            time.sleep(0.1)
        with Client(scheduler_file=str(scheduler_file), timeout=60) as waiting:
            waiting.wait_for_workers(2, timeout=60)
        yield scheduler_file
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_the_command_line_on_a_running_cluster_gives_the_single_process_answers(
    suite: Suite, running_cluster: Path, tmp_path: Path
) -> None:
    pairs = [*[t.name for t in TESTS if t.inject][:2], "exceptions-a32"]
    csv = suite.model.parent / "three.csv"
    csv.write_text("".join(f"model/{name}.tarmac,rtl/{name}.tarmac\n" for name in pairs))
    address = json.loads(running_cluster.read_text())["address"]
    cputrace = [sys.executable, "-m", "cputrace", "batch"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def run(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([*cputrace, *args], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done

    rows = json.loads(run("diff", "--pairs", str(csv), "--format", "json", "--scheduler", address).stdout)
    for row in rows:
        alone = json.loads(_cli("diff", row["a"], row["b"], "--format", "json")[1])
        assert row["divergences"] == alone["divergences"]
        first = alone["listed"][0] if alone["listed"] else {"a_seq": None}
        assert row["a_seq"] == first["a_seq"]
    assert [row["status"] for row in rows] == ["divergent", "divergent", "identical"]

    inputs = [str(suite.rtl / f"{name}.tarmac") for name in pairs]
    run("ingest", *inputs, "-d", str(tmp_path), "--scheduler-file", str(running_cluster))
    for path in inputs:
        batch, single = open_trace(tmp_path / (Path(path).name + ".ctrace")), open_trace(path)
        assert all(batch.table(t).equals(single.table(t)) for t in ("instructions", "registers", "memory"))


def test_a_job_stopped_early_cancels_its_tasks_on_the_cluster(client) -> None:
    """What Ctrl-C does while a batch waits: the job's tasks left are cancelled on the cluster."""
    from cputrace.batch.cluster import run_tasks

    def queued() -> int:
        return client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))

    tasks = run_tasks(client, time.sleep, [(str(n), (0.5,)) for n in range(8)])
    next(tasks)
    assert queued() > 0
    tasks.close()
    for _ in range(100):
        if queued() == 0:
            break
        time.sleep(0.05)
    assert queued() == 0


def test_without_distributed_the_batch_commands_say_which_extra_to_install() -> None:
    blocked = "import sys; sys.modules['distributed'] = None; from cputrace.cli import main; main()"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", blocked, "batch", "diff", "a", "b"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert "needs distributed, the cluster extra: pip install 'cputrace[cluster]'" in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["profile", "x.tarmac", "--workers", "2", "--scheduler", "tcp://127.0.0.1:8786"],
        ["profile", "x.tarmac", "--format", "csv", "--by", "functions", "--by", "lines"],
        ["diff", "--pairs", __file__, "a", "b"],
        ["diff", "only-a"],
        ["ingest", __file__, "--workers", "0"],
    ],
)
def test_where_to_run_and_what_to_compare_are_checked_before_any_work(args: list[str]) -> None:
    status, _, err = _cli("batch", *args)
    assert status == 2, err
