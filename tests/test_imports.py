"""Importing cputrace stays light, and `record` is an extra: each import checked in a fresh
interpreter, where only the modules it loads are in `sys.modules`."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cputrace.cli import exits

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "tests" / "corpus" / "calls-a32.elf"

HEAVY = ("pyarrow.parquet", "duckdb", "numba", "zstandard", "unicorn")
"""Modules only the commands and analyses that use them may load."""

NO_UNICORN = "import sys; sys.modules['unicorn'] = None  # as if the record extra were not installed\n"
CLI = "from cputrace.cli import main; sys.argv[0] = 'cputrace'; main()"
MISSING = "recording needs unicorn, the record extra: pip install 'cputrace[record]'"


def python(code: str, *args: str, unicorn: bool = True) -> subprocess.CompletedProcess:
    """Python `code` in a fresh interpreter (argv: ARGS), as if unicorn were not installed
    unless `unicorn`."""
    code = textwrap.dedent(code) if unicorn else NO_UNICORN + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


def loaded_by(statement: str) -> set[str]:
    """The modules of HEAVY that `statement` loads."""
    r = python(f"import sys\n{statement}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


@pytest.mark.parametrize(
    "statement",
    ["import cputrace", "import cputrace.image", "import cputrace.cli", "import cputrace.errors",
     "from cputrace import TraceFormatError"],
)  # fmt: skip
def test_importing_loads_no_heavy_module(statement):
    assert loaded_by(statement) == set()


def test_the_package_loads_no_third_party_module():
    """`python -m cputrace` imports the package before Ctrl-C is handled: it must take no time."""
    r = python("import sys; before = set(sys.modules); import cputrace, cputrace.cli; "
               "print(' '.join(set(sys.modules) - before))")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert {m.partition(".")[0] for m in r.stdout.split()} <= {*sys.stdlib_module_names, "cputrace"}


def test_top_level_names_are_loaded_on_use():
    r = python("""
        import cputrace
        from cputrace.ingest import IngestResult  # the submodule of the same name, imported first
        import cputrace.opening
        print(cputrace.ingest.__module__, cputrace.ingest.__name__, cputrace.open.__module__,
              cputrace.Trace.__name__)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["cputrace.ingest", "ingest", "cputrace.opening", "Trace"]


def test_an_unknown_top_level_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        import cputrace

        cputrace.nothing  # noqa: B018


def test_without_unicorn_the_record_package_says_what_to_install():
    r = python("""
        from cputrace.errors import MissingExtra
        try:
            import cputrace.record
        except ImportError as exc:
            assert isinstance(exc, MissingExtra), exc
            print(exc)
    """, unicorn=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == MISSING


@pytest.mark.parametrize("args", [["record", str(PROGRAM)], ["record"], ["record", "--help"]])
def test_without_unicorn_the_record_command_says_what_to_install(args):
    r = python(CLI, *args, unicorn=False)
    assert r.returncode == exits.USAGE
    assert r.stderr.strip() == f"error: {MISSING}"
    assert r.stdout == ""


def test_without_unicorn_the_other_commands_are_listed_and_run(tmp_path):
    r = python(CLI, "--help", unicorn=False)
    assert r.returncode == exits.OK, r.stderr
    commands = r.stdout.split("Commands:")[1]
    assert re.search(r"^  record +recording needs unicorn, the record extra", commands, re.M)
    assert re.search(r"^  ingest +Decode INPUT", commands, re.M)
    store = tmp_path / "q.ctrace"
    r = python(CLI, "ingest", str(ROOT / "examples" / "quicksort.tarmac"), "-o", str(store), unicorn=False)
    assert r.returncode == exits.OK, r.stderr
    assert (store / "manifest.json").is_file()
