"""The CoreSight input format's name, `coresight`, and `etmv3`, the name it had before, which
scripts and the stores they made still give: one format, answering to both."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import DATA

import cputrace
from cputrace.browse.session import Session
from cputrace.cli import cli
from cputrace.errors import UsageError
from cputrace.formats import check_options, get_decoder
from cputrace.ingest import ingest

SNAPSHOT = DATA / "etmv3" / "tc2" / "snapshot.ini"
SOURCE_0X10 = "0x10"  # TC2's ETMv3 source: DS-5 decodes it to 7,205 instructions, 24,968 cycles (README)


def run(*args: object, code: int = 0) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result.output


def manifest(store: Path) -> dict:
    return json.loads((store / "manifest.json").read_text())


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """TC2's source 0x10 ingested now, and the same store as ingest wrote it under the format's
    former name: `etmv3` where its manifest records the format (nothing else differed)."""
    where = tmp_path_factory.mktemp("stores")
    new = where / "new.ctrace"
    run("ingest", SNAPSHOT, "--source", SOURCE_0X10, "-o", new)
    old = where / "old.ctrace"
    shutil.copytree(new, old)
    written = manifest(old)
    assert written["format"] == "coresight" and [i["format"] for i in written["inputs"]] == ["coresight"]
    written["format"] = "etmv3"
    written["inputs"][0]["format"] = "etmv3"
    (old / "manifest.json").write_text(json.dumps(written, indent=2))
    return new, old


def test_formats_lists_coresight_with_its_former_name_as_an_alias() -> None:
    heads = [line for line in run("formats").splitlines() if not line.startswith(" ")]
    assert [h for h in heads if "CoreSight" in h] == [
        "coresight (sniffed, alias etmv3): Arm CoreSight ETMv3, PTM and ETMv4 trace: snapshots "
        "(snapshot.ini) and trace buffers"
    ]
    assert not [h for h in heads if h.startswith("etmv3")]


def test_either_name_gives_the_one_decoder_and_its_options() -> None:
    assert get_decoder("etmv3") is get_decoder("coresight")
    assert check_options({"source": 0x10}, ["etmv3"]) == check_options({"source": 0x10}, ["coresight"])
    with pytest.raises(UsageError, match=r"unknown option 'vbar': format coresight takes options source, "):
        check_options({"vbar": 0}, ["etmv3"])
    with pytest.raises(UsageError, match=r"unknown format 'etmv4' \(known: armulator, coresight, leon-ahb, "):
        get_decoder("etmv4")


def test_format_etmv3_ingests_as_coresight_and_the_store_says_coresight(
    tmp_path: Path, stores: tuple[Path, Path]
) -> None:
    """`--format etmv3` (a script's) and `format="etmv3"` (the API's) decode as the sniffed
    ingest does and record the format's name now."""
    new, _ = stores
    by_flag = tmp_path / "flag.ctrace"
    said = run("ingest", SNAPSHOT, "--format", "etmv3", "--source", SOURCE_0X10, "-o", by_flag)
    assert f"{SNAPSHOT}: format coresight (given)\n" in said
    by_api = ingest([SNAPSHOT], tmp_path / "api.ctrace", format="etmv3", options={"source": 0x10}).store
    query = "SELECT count(*) AS n, sum(cycles) AS cycles, sum(pc) AS pcs FROM instructions"
    expected = run("sql", new, query, "--format", "csv")
    assert expected.splitlines()[1].startswith("7205,24968,")
    for store in (by_flag, by_api):
        assert manifest(store)["format"] == "coresight"
        assert [i["format"] for i in manifest(store)["inputs"]] == ["coresight"]
        assert run("sql", store, query, "--format", "csv") == expected


def test_a_store_that_records_etmv3_reads_as_before(tmp_path: Path, stores: tuple[Path, Path]) -> None:
    """Every command that reads a store gives an old store's rows as the new store's; `info`
    shows the format it records."""
    new, old = stores
    assert "(286 bytes, etmv3)" in run("info", old)
    assert "(286 bytes, coresight)" in run("info", new)
    run("verify", old)
    for command in (
        ("list", "--limit", "40"), ("list", "--format", "tarmac", "--limit", "40"),
        ("sql", "SELECT kind, count(*) AS n FROM events GROUP BY kind ORDER BY kind"),
        ("calls", "--cpu", "0"), ("profile", "--top", "10"),
    ):  # fmt: skip
        assert run(command[0], old, *command[1:]) == run(command[0], new, *command[1:]), command
    for store in (old, new):
        run("export", store, "--to", "tarmac", "-o", tmp_path / f"{store.stem}.tarmac")
    assert (tmp_path / "old.tarmac").read_bytes() == (tmp_path / "new.tarmac").read_bytes()
    assert "no divergence in 7,205 paired instructions" in run("diff", old, new, "--exit-code")


def test_a_store_that_records_etmv3_browses_as_before(stores: tuple[Path, Path]) -> None:
    new, old = stores
    before, now = Session.open(cputrace.Trace(old)), Session.open(cputrace.Trace(new))
    try:
        assert before.cores == now.cores == [0]
        lines = [(line.seq, line.pc, line.executed) for line in before.lines(0, 100, 20)]
        assert lines == [(line.seq, line.pc, line.executed) for line in now.lines(0, 100, 20)]
    finally:
        before.close()
        now.close()
