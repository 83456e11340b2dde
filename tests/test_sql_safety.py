"""SQL that others could hand cputrace: filter options take one expression only, and the
library's untrusted mode reads the store's tables and nothing else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import cputrace
from cputrace.errors import UsageError
from cputrace.ingest import ingest
from cputrace.store.checksums import file_xxh3_128
from cputrace.store.manifest import table_path
from cputrace.store.sql import sql_condition

TRACE = (
    "0 clk IT (0) 00008000 e3a00001 A svc_s : MOV r0,#1\n"
    "0 clk R r0 00000001\n"
    "1 clk IT (1) 00008004 e5801000 A svc_s : STR r1,[r0,#0]\n"
    "1 clk MW4 00000001 00000000\n"
    "2 clk IT (2) 00008008 e3a00002 A svc_s : MOV r0,#2\n"
)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    source = tmp_path / "t.tarmac"
    source.write_text(TRACE)
    return ingest([source], tmp_path / "t.ctrace").store


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cputrace", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize(
    "where",
    [
        "1=1; COPY (SELECT 42) TO 'leak.csv'",
        "1=1) UNION SELECT * FROM read_csv('leak.csv') --",
        "1=1 /*",
        "pc > 1 ORDER BY 1",
        "",
    ],
)
def test_where_takes_one_expression_only(store: Path, where: str) -> None:
    r = run_cli("list", str(store), "--where", where, cwd=store.parent)
    assert r.returncode == 2 and "Invalid value for '--where'" in r.stderr
    assert not (store.parent / "leak.csv").exists()
    with pytest.raises(UsageError):
        sql_condition(where)


def test_where_expressions_still_filter(store: Path) -> None:
    for where, pcs in (
        ("pc = 0x8004", [0x8004]),
        ("disasm LIKE '%;%' OR pc >= 0x8008 -- a comment", [0x8008]),
        ("seq IN (SELECT seq FROM memory)", [0x8004]),
    ):
        r = run_cli("list", str(store), "--where", where, "--format", "csv", cwd=store.parent)
        assert r.returncode == 0, r.stderr
        assert [int(line.split(",")[3]) for line in r.stdout.splitlines()[1:]] == pcs


def test_the_cli_user_keeps_full_sql(store: Path) -> None:
    r = run_cli("sql", str(store), "COPY (SELECT pc FROM instructions) TO 'pcs.csv'", cwd=store.parent)
    assert r.returncode == 0, r.stderr
    assert (store.parent / "pcs.csv").read_text().split() == ["pc", "32768", "32772", "32776"]


# Refused by the connection itself (for a caller of `Trace.db` too), and by `Trace.sql`.
REFUSED_BY_DUCKDB = [
    "COPY (SELECT 1) TO '{dir}/leak.csv'",
    "COPY (SELECT 1 AS a) TO '{store_file}' (FORMAT parquet, USE_TMP_FILE false)",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_parquet('{store_file}')",
    "SELECT * FROM glob('/etc/*')",
    "ATTACH '{dir}/other.duckdb'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET threads = 1",
    "RESET lock_configuration",
]
# Refused by `Trace.sql`, which runs one SELECT statement only.
REFUSED_BY_SQL = ["SELECT 1; SELECT * FROM read_csv('/etc/passwd')", "CREATE TABLE t AS SELECT 1"]


@pytest.mark.parametrize("template", REFUSED_BY_DUCKDB + REFUSED_BY_SQL)
def test_untrusted_sql_reads_the_tables_and_nothing_else(store: Path, template: str) -> None:
    file = table_path(store, "instructions")
    before = file_xxh3_128(file)
    query = template.format(dir=store.parent, store_file=file)
    with cputrace.open(store, untrusted=True) as t:
        joined = t.sql("SELECT count(*) AS n FROM instructions JOIN registers USING (seq)")
        assert joined.column("n").to_pylist() == [1]
        with pytest.raises((duckdb.Error, UsageError)):
            t.sql(query)
        if template in REFUSED_BY_DUCKDB:
            with pytest.raises(duckdb.Error):
                t.db.execute(query)
        below = t.sql("SELECT max(pc) AS pc FROM instructions WHERE pc < 0x8008")
        assert below.column("pc").to_pylist() == [0x8004]
    assert file_xxh3_128(file) == before
    assert sorted(p.name for p in store.parent.iterdir()) == ["t.ctrace", "t.tarmac"]


def test_the_same_queries_run_when_trusted(store: Path) -> None:
    """What untrusted mode refuses is refused by it, not broken: trusted, these run."""
    with cputrace.open(store) as t:
        memory = t.sql("SELECT count(*) AS n FROM read_parquet(?)", [str(table_path(store, "memory"))])
        assert memory.column("n").to_pylist() == [1]
        t.sql(f"COPY (SELECT 1) TO '{store.parent / 'ok.csv'}'")
    assert (store.parent / "ok.csv").is_file()


_PROGRESS_BARS = """
import sys
import cputrace
from cputrace.analysis.state import StateIndex

trace = cputrace.Trace(sys.argv[1])
connections = (trace.db, cputrace.Trace(sys.argv[1], untrusted=True).db, StateIndex.open(trace)._db)
for db in connections:
    print(db.sql("SELECT current_setting('enable_progress_bar')").fetchall()[0][0])
"""


def test_no_connection_draws_duckdb_progress_bar(store: Path) -> None:
    """DuckDB draws its progress bar on standard output for queries past two seconds, even into
    a pipe or file (checked by hand: `cputrace sql ... --format csv > f` got bar characters in
    f). Its default depends on how Python runs (on in a plain process, as here; off under
    pytest's capture), so a plain process reports the settings. Every connection the library
    makes has it off, and makes it in one place."""
    run = subprocess.run([sys.executable, "-c", _PROGRESS_BARS, str(store)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False", "False", "False"]
    src = Path(cputrace.__file__).parent
    connecting = [str(p.relative_to(src)) for p in src.rglob("*.py") if "duckdb.connect(" in p.read_text()]
    assert connecting == ["store/sql.py"]
