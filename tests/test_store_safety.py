"""Stores never lose data: outputs that are not stores, failed and killed commits, leftovers of
killed ingests, readers while a store is re-ingested, read-only stores, and stores written
before versions (model version 1)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import cputrace
from cputrace.errors import StoreError, UsageError
from cputrace.ingest import ingest
from cputrace.store import folder
from cputrace.store.batches import read_batches
from cputrace.store.manifest import load_manifest
from cputrace.store.write import StoreWriter

SRC = Path(cputrace.__file__).parents[1]


def tarmac(instructions: int, mark: int) -> str:
    """A Tarmac trace whose every instruction writes `mark` to r0: a store's rows say which
    input they came from."""
    lines = []
    for i in range(instructions):
        lines.append(f"{i} clk IT ({i}) {0x8000 + 4 * (i % 64):08x} e3a00001 A svc_s : MOV r0,#1")
        lines.append(f"{i} clk R r0 {mark:08x}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    """Two inputs told apart by their rows: A (3 instructions, r0 = 0xa), B (5, r0 = 0xb)."""
    made = {}
    for name, count, mark in (("A", 3, 0xA), ("B", 5, 0xB)):
        made[name] = tmp_path / f"{name}.tarmac"
        made[name].write_text(tarmac(count, mark))
    return made


def rows_of(trace: cputrace.Trace) -> tuple[int, tuple[int, ...]]:
    """Instruction count and the r0 values, by SQL, through Arrow and through the chunked reader."""
    by_sql = trace.sql(
        "SELECT (SELECT count(*) FROM instructions) AS n, list(DISTINCT value) AS v FROM registers"
    )
    count, values = by_sql.column("n")[0].as_py(), tuple(sorted(by_sql.column("v")[0].as_py()))
    assert trace.instructions.num_rows == count
    assert tuple(sorted(set(trace.registers.column("value").to_pylist()))) == values
    assert sum(b.num_rows for b in read_batches(trace, "instructions", ["pc"])) == count
    return count, values


A_ROWS, B_ROWS = (3, (0xA,)), (5, (0xB,))


def leftovers(store: Path) -> list[str]:
    """What is beside or in a store besides the store itself: staging folders, old versions."""
    beside = [p.name for p in store.parent.iterdir() if p.name.startswith(store.name + ".")]
    if not store.is_dir():
        return beside
    data = load_manifest(store).get("data")
    inside = [p.name for p in store.iterdir() if p.name not in (data, "manifest.json")]
    return beside + inside


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cputrace", *args], capture_output=True, text=True)


# -- outputs that are not stores (issue 17, item 1) ----------------------------------------


def test_a_folder_that_is_not_a_store_is_refused_and_kept(tmp_path: Path, inputs: dict[str, Path]) -> None:
    docs = tmp_path / "mydocs"
    docs.mkdir()
    (docs / "a.txt").write_text("x")
    with pytest.raises(UsageError, match=r"mydocs exists and is a folder, not a cputrace store"):
        ingest([inputs["A"]], docs)
    assert [p.name for p in docs.iterdir()] == ["a.txt"] and (docs / "a.txt").read_text() == "x"
    r = run_cli("ingest", str(inputs["A"]), "-o", str(docs))
    assert r.returncode == 2 and "mydocs exists and is a folder" in r.stderr
    assert [p.name for p in docs.iterdir()] == ["a.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["A.tarmac", "B.tarmac", "mydocs"]


def test_an_input_as_output_or_inside_it_is_refused(tmp_path: Path, inputs: dict[str, Path]) -> None:
    before = inputs["A"].read_bytes()
    with pytest.raises(UsageError, match=r"A\.tarmac exists and is a file"):
        ingest([inputs["A"]], inputs["A"])
    r = run_cli("ingest", str(inputs["A"]), "-o", str(inputs["A"]))
    assert r.returncode == 2 and "A.tarmac exists and is a file" in r.stderr
    work = tmp_path / "work"
    work.mkdir()
    held = work / "C.tarmac"
    shutil.copy(inputs["A"], held)
    with pytest.raises(UsageError, match=r"work exists and is a folder"):  # the folder holding it
        ingest([held], work)
    store = ingest([inputs["B"]], tmp_path / "s.ctrace").store
    inside = store / "A.tarmac"  # an input kept in a store's folder: the store may not replace it
    shutil.copy(inputs["A"], inside)
    with pytest.raises(UsageError, match=r"would hold the input"):
        ingest([inside], store)
    assert all(path.read_bytes() == before for path in (inputs["A"], held, inside))
    with pytest.raises(UsageError):
        StoreWriter(inputs["A"])  # the writer itself never replaces anything but a store
    assert sorted(p.name for p in tmp_path.iterdir()) == ["A.tarmac", "B.tarmac", "s.ctrace", "work"]


def test_an_empty_folder_becomes_the_store(tmp_path: Path, inputs: dict[str, Path]) -> None:
    (tmp_path / "out").mkdir()
    ingest([inputs["A"]], tmp_path / "out")
    assert rows_of(cputrace.open(tmp_path / "out")) == A_ROWS


# -- replacing a store (item 2) ------------------------------------------------------------


def test_a_failed_manifest_switch_keeps_the_old_store(
    tmp_path: Path, inputs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ingest([inputs["A"]], tmp_path / "s.ctrace").store

    def fail(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="No space left"):
        ingest([inputs["B"]], store)
    monkeypatch.undo()
    assert rows_of(cputrace.open(store)) == A_ROWS
    assert leftovers(store) == []


def test_a_failed_move_into_the_store_keeps_the_old_store(
    tmp_path: Path, inputs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ingest([inputs["A"]], tmp_path / "s.ctrace").store
    real_rename = os.rename

    def rename(source: object, target: object) -> None:
        if Path(target).parent == store:
            raise OSError(13, "Permission denied")
        real_rename(source, target)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="Permission denied"):
        ingest([inputs["B"]], store)
    monkeypatch.undo()
    assert rows_of(cputrace.open(store)) == A_ROWS
    assert leftovers(store) == []


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from cputrace.store import folder
    from cputrace.ingest import ingest

    source, store, point = sys.argv[1], Path(sys.argv[2]), sys.argv[3]

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    if point == "collect":  # after the switch, before old versions are removed
        folder.collect = die
    elif point.startswith("rename"):  # at the Nth rename of the commit
        wanted, seen = int(point[len("rename"):]), []
        real_commit = folder.Staging.commit

        def commit(self, manifest):
            for name in ("rename", "replace"):
                real = getattr(os, name)

                def counted(*args, real=real):
                    if len(seen) == wanted:
                        die()
                    seen.append(args)
                    return real(*args)

                setattr(os, name, counted)
            real_commit(self, manifest)

        folder.Staging.commit = commit
    ingest([source], store)
    """
)


def kill_at(point: str, source: Path, store: Path) -> None:
    r = subprocess.run([sys.executable, "-c", KILLER, str(source), str(store), point], capture_output=True)
    assert r.returncode == -signal.SIGKILL, r.stderr.decode()


@pytest.mark.parametrize("point", ["rename0", "rename1", "collect"])
def test_an_ingest_killed_while_replacing_a_store(
    tmp_path: Path, inputs: dict[str, Path], point: str
) -> None:
    """Killed before the version moves in, between it and the manifest switch, and after the
    switch: the store is whole (old, or new once switched), and the next ingest leaves
    nothing of the killed one."""
    store = ingest([inputs["A"]], tmp_path / "s.ctrace").store
    kill_at(point, inputs["B"], store)
    assert rows_of(cputrace.open(store)) == (B_ROWS if point == "collect" else A_ROWS)
    assert run_cli("verify", str(store)).returncode == 0
    assert leftovers(store)  # the killed ingest's staging folder or old version
    ingest([inputs["A"]], store)
    assert rows_of(cputrace.open(store)) == A_ROWS and leftovers(store) == []


@pytest.mark.parametrize("point", ["rename0", "rename1", "rename2"])
def test_an_ingest_killed_while_creating_a_store(tmp_path: Path, inputs: dict[str, Path], point: str) -> None:
    """Killed at each step of creating a store: nothing at the path, or the whole store."""
    store = tmp_path / "s.ctrace"
    kill_at(point, inputs["B"], store)
    assert not store.exists() and leftovers(store)
    ingest([inputs["A"]], store)
    assert rows_of(cputrace.open(store)) == A_ROWS and leftovers(store) == []


def test_ingests_killed_at_random_moments(tmp_path: Path) -> None:
    """kill -9 at random moments of re-ingesting a store: it always opens whole, as the old
    or the new version, and the next ingest removes what the killed ones left."""
    old, new = tmp_path / "old.tarmac", tmp_path / "new.tarmac"
    old.write_text(tarmac(2000, 1))
    new.write_text(tarmac(20000, 2))
    store = ingest([old], tmp_path / "s.ctrace").store
    rng = random.Random(17)
    for _ in range(6):
        child = subprocess.Popen([sys.executable, "-m", "cputrace", "ingest", str(new), "-o", str(store)])
        while child.poll() is None and not list(tmp_path.glob("s.ctrace.tmp-*")):
            time.sleep(0.005)  # the ingest has started writing: kill it somewhere from here on
        time.sleep(rng.uniform(0, 0.5))
        child.send_signal(signal.SIGKILL)
        child.wait()
        with cputrace.open(store) as t:
            count, values = rows_of(t)
        assert (count, values) in ((2000, (1,)), (20000, (2,)))
        assert run_cli("verify", str(store)).returncode == 0
        ingest([old], store)
        assert leftovers(store) == []


def test_ingests_of_one_store_at_once(tmp_path: Path, inputs: dict[str, Path]) -> None:
    """Four processes create and replace the same store at once: each one's version is
    whole, the last switch wins, and nothing is left of the others."""
    store = tmp_path / "s.ctrace"
    command = [sys.executable, "-m", "cputrace", "ingest", "-o", str(store)]
    children = [subprocess.Popen([*command, str(source)]) for source in [inputs["A"], inputs["B"]] * 2]
    assert [child.wait() for child in children] == [0] * 4
    assert rows_of(cputrace.open(store)) in (A_ROWS, B_ROWS)
    assert leftovers(store) == []


# -- leftovers of killed ingests (item 3) --------------------------------------------------


def test_staging_folders_of_killed_ingests_are_removed_running_ones_kept(
    tmp_path: Path, inputs: dict[str, Path]
) -> None:
    store = tmp_path / "s.ctrace"
    dead = tmp_path / "s.ctrace.tmp-0badc0de"  # an ingest killed while writing: marker, lock free
    (dead / "v-000000000000").mkdir(parents=True)
    (dead / folder.INGEST_MARKER).write_bytes(b"cputrace ingest in progress\n")
    running = folder.Staging(store)  # an ingest of the same store running meanwhile
    mine = tmp_path / "s.ctrace.tmp-12345678"  # named like ours but not marked: a user's
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    unlike = tmp_path / "s.ctrace.tmp-87654321"  # marked with something else
    unlike.mkdir()
    (unlike / folder.INGEST_MARKER).write_text("not ours")
    ingest([inputs["A"]], store)
    assert not dead.exists()
    assert running.root.is_dir() and (mine / "notes.txt").read_text() == "mine" and unlike.is_dir()
    running.discard()
    assert sorted(p.name for p in tmp_path.glob("s.ctrace*")) == [
        "s.ctrace", "s.ctrace.tmp-12345678", "s.ctrace.tmp-87654321",
    ]  # fmt: skip


def test_stores_set_aside_by_older_cputrace_are_removed(tmp_path: Path, inputs: dict[str, Path]) -> None:
    store = ingest([inputs["A"]], tmp_path / "s.ctrace").store
    aside = tmp_path / "s.ctrace.old-0badc0de"  # what a commit killed between its renames left
    shutil.copytree(store, aside)
    other = tmp_path / "s.ctrace.old-12345678"  # not a store: left alone
    other.mkdir()
    ingest([inputs["B"]], store)
    assert not aside.exists() and other.is_dir()


# -- readers while a store is re-ingested (item 4) -----------------------------------------


def test_an_open_trace_keeps_reading_its_version(tmp_path: Path, inputs: dict[str, Path]) -> None:
    store = ingest([inputs["A"]], tmp_path / "s.ctrace").store
    reader = cputrace.open(store)
    assert rows_of(reader) == A_ROWS
    first = reader.data
    r = run_cli("ingest", str(inputs["B"]), "-o", str(store))  # another process
    assert r.returncode == 0, r.stderr
    assert rows_of(reader) == A_ROWS and first.is_dir()
    with cputrace.open(store) as now:
        assert rows_of(now) == B_ROWS and now.data != first
    reader.close()
    assert not first.exists() and leftovers(store) == []  # its last reader let it go


WRITER = textwrap.dedent(
    """
    import sys
    from cputrace.ingest import ingest

    store, rounds, sources = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    for turn in range(rounds):
        ingest([sources[turn % 2]], store)
    """
)


def test_readers_never_mix_two_ingests(tmp_path: Path, inputs: dict[str, Path]) -> None:
    """Queries of Traces opened while another process re-ingests the store over and over:
    each Trace answers from one ingest, never the instructions of one and the registers of
    the other."""
    store = ingest([inputs["A"]], tmp_path / "s.ctrace").store
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(store), "12", str(inputs["B"]), str(inputs["A"])]
    )
    answers = []
    try:
        while writer.poll() is None or not answers:
            with cputrace.open(store) as t:
                first = rows_of(t)
                for _ in range(3):
                    assert rows_of(t) == first
                answers.append(first)
    finally:
        writer.wait()
    assert writer.returncode == 0
    assert set(answers) <= {A_ROWS, B_ROWS}
    assert leftovers(store) == []


def test_a_version_removed_under_a_reader_is_a_clear_error(tmp_path: Path, inputs: dict[str, Path]) -> None:
    store = ingest([inputs["A"]], tmp_path / "s.ctrace").store
    for queried_before in (False, True):
        reader = cputrace.open(store)
        if queried_before:
            rows_of(reader)
        shutil.rmtree(reader.data)  # by hand: no ingest removes a version a reader holds
        with pytest.raises(StoreError, match="removed while it was open"):
            reader.sql("SELECT count(*) FROM instructions")
        with pytest.raises(StoreError, match="removed while it was open"):
            list(read_batches(reader, "instructions", ["pc"]))
        reader.close()
        ingest([inputs["A"]], store)


# -- stores of model version 1 (tables beside the manifest) --------------------------------


def make_version_1(store: Path) -> None:
    """Rewrite a store in the layout of model version 1 (docs/model.md before versions)."""
    manifest = json.loads((store / "manifest.json").read_text())
    data = store / manifest.pop("data")
    for file in data.iterdir():
        file.rename(store / file.name)
    data.rmdir()
    del manifest["files"]
    manifest["model_version"] = 1
    (store / "manifest.json").write_text(json.dumps(manifest))


def test_a_version_1_store_is_read_and_replaced(tmp_path: Path, inputs: dict[str, Path]) -> None:
    store = ingest([inputs["A"]], tmp_path / "s.ctrace").store
    make_version_1(store)
    old = cputrace.open(store)
    assert old.data == store and rows_of(old) == A_ROWS
    r = run_cli("verify", str(store))
    assert r.returncode == 0 and "no checksums recorded, every page read" in r.stdout
    ingest([inputs["B"]], store)
    assert load_manifest(store)["model_version"] >= 2
    assert rows_of(old) == A_ROWS  # its tables stay while it is open
    assert rows_of(cputrace.open(store)) == B_ROWS
    old.close()
    assert sorted(p.name for p in store.iterdir()) == ["manifest.json", load_manifest(store)["data"]]


# -- read-only stores ----------------------------------------------------------------------


@contextlib.contextmanager
def read_only(folder: Path):
    """`folder` made read-only: by permissions, or for root (whom they do not stop) by a
    read-only bind mount."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")]}
        for path, mode in modes.items():
            path.chmod(mode & ~0o222)
        try:
            yield
        finally:
            for path, mode in modes.items():
                path.chmod(mode)
        return
    mounted = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot make a read-only folder as root: {mounted.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True, capture_output=True)
        yield
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


def test_a_read_only_store_is_read_and_not_replaced(
    tmp_path: Path, inputs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cputrace.analysis.state import StateIndex

    monkeypatch.setenv("CPUTRACE_CACHE", str(tmp_path / "cache"))
    store = ingest([inputs["A"]], tmp_path / "s.ctrace").store
    with read_only(store):
        with cputrace.open(store) as t:
            assert rows_of(t) == A_ROWS
            index = StateIndex.open(t)  # a derived index goes to the cache instead
            assert (tmp_path / "cache") in index.directory.parents
            index.close()
        assert run_cli("verify", str(store)).returncode == 0
        with pytest.raises(OSError):
            ingest([inputs["B"]], store)
        assert leftovers(store) == []
        with cputrace.open(store) as t:
            assert rows_of(t) == A_ROWS
