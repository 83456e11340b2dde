"""How a command ends when something goes wrong: a full disk, a read-only folder, a bug, Ctrl-C,
a closed pipe. Exit statuses say why (cli/exits.py), messages are one line, and an output file is
written whole or not at all."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from cputrace.cli import cli, exits
from cputrace.export.registry import EXPORTERS

ROOT = Path(__file__).resolve().parent.parent
QUICKSORT = ROOT / "examples" / "quicksort.tarmac"
COVERAGE = ROOT / "tests" / "data" / "coverage"


def cputrace(*args: str, **options) -> subprocess.CompletedProcess:
    """`python -m cputrace ARGS` in a child process, as a user runs it."""
    command = [sys.executable, "-m", "cputrace", *args]
    return subprocess.run(command, capture_output=True, text=True, **options)


def child(code: str, *args: str, **options) -> subprocess.CompletedProcess:
    """Python `code` in a child process (argv: ARGS), which ends by running the command line."""
    command = [sys.executable, "-c", textwrap.dedent(code), *args]
    return subprocess.run(command, capture_output=True, text=True, **options)


# -- a bug ----------------------------------------------------------------------------------------


def _failing_sql(*_args, **_kwargs):
    raise RuntimeError("boom")


def test_a_bug_is_one_line_and_its_own_exit_status(quicksort_copy, monkeypatch):
    monkeypatch.setattr("cputrace.store.trace.Trace.sql", _failing_sql)
    monkeypatch.delenv("CPUTRACE_DEBUG", raising=False)
    result = CliRunner().invoke(cli, ["info", str(quicksort_copy)])
    assert result.exit_code == exits.INTERNAL
    assert "internal error" in result.output and "RuntimeError: boom" in result.output
    assert "CPUTRACE_DEBUG=1" in result.output and "Traceback" not in result.output

    monkeypatch.setenv("CPUTRACE_DEBUG", "1")
    result = CliRunner().invoke(cli, ["info", str(quicksort_copy)])
    assert result.exit_code == exits.INTERNAL
    assert "Traceback" in result.output and "_failing_sql" in result.output


def test_a_bug_in_a_child_process(quicksort_copy):
    """`main`, as the console script runs it: one line on stderr, nothing else."""
    r = child(
        """
        import sys
        import cputrace.store.trace

        def boom(*args, **kwargs):
            raise RuntimeError("boom")

        cputrace.store.trace.Trace.sql = boom
        sys.argv = ["cputrace", "info", sys.argv[1]]
        from cputrace.cli import main
        main()
        """,
        str(quicksort_copy),
    )
    assert r.returncode == exits.INTERNAL, r.stderr
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert "RuntimeError: boom" in r.stderr and "Traceback" not in r.stderr


# -- a full disk, a read-only folder ----------------------------------------------------------------

needs_dev_full = pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")


@needs_dev_full
def test_stdout_on_a_full_disk(quicksort_copy):
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "cputrace", "list", str(quicksort_copy)], stdout=full,
                           stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert r.returncode == exits.BAD_INPUT
    assert r.stderr.strip() == "error: No space left on device"


@needs_dev_full
@pytest.mark.parametrize("fmt", ["tarmac", "csv", "parquet"])
def test_export_to_a_full_disk(quicksort_copy, fmt):
    r = cputrace("export", str(quicksort_copy), "--to", fmt, "--table", "instructions", "-o", "/dev/full")
    assert r.returncode == exits.BAD_INPUT
    assert r.stderr.strip() == "error: /dev/full: No space left on device"


def _namespaces() -> bool:
    """Whether this process may make a private mount namespace (and mount a tmpfs in it)."""
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


needs_namespaces = pytest.mark.skipif(not _namespaces(), reason="no private mount namespaces (unshare -rm)")


FILL_DISK = """
def fill_disk(path):
    \"\"\"Write zeros to the file `path` until the file system has no space left.\"\"\"
    with open(path, "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(bytes(512))
        except OSError:
            pass
"""


def in_tmpfs(folder: Path, options: str, code: str, *args: str) -> subprocess.CompletedProcess:
    """Python `code` run where `folder` is a fresh tmpfs mounted with `options`, in a mount
    namespace of its own: nothing outside it sees the file system, which goes with it. The
    code may call `fill_disk(path)` (FILL_DISK)."""
    folder.mkdir()
    script = f'mount -t tmpfs -o {options} tmpfs "$1" && shift && exec "$@"'
    command = [sys.executable, "-c", FILL_DISK + textwrap.dedent(code), str(folder), *args]
    return subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", str(folder), *command],
                          capture_output=True, text=True)  # fmt: skip


@needs_namespaces
def test_ingest_on_a_full_disk_names_the_store(tmp_path):
    """Arrow's error names no file ('Error writing bytes to file. Detail: [errno 28] ...'): the
    message named nothing either, though the README promises the file. Now exit 1 naming the
    store, an existing store as it was, and no staging folder left."""
    r = in_tmpfs(
        tmp_path / "disk",
        "size=64k",
        """
        import json, os, shutil, sys
        from pathlib import Path
        from click.testing import CliRunner
        from cputrace.cli import cli

        disk, trace = Path(sys.argv[1]), sys.argv[2]
        old = CliRunner().invoke(cli, ["ingest", trace, "-o", str(disk / "old.ctrace")])
        manifest = (disk / "old.ctrace" / "manifest.json").read_bytes()
        fill_disk(disk / "filler")
        results = {}
        for store in (disk / "old.ctrace", disk / "new.ctrace"):
            result = CliRunner().invoke(cli, ["ingest", trace, "-o", str(store)])
            results[str(store)] = [result.exit_code, result.output.splitlines()[-1]]
        kept = (disk / "old.ctrace" / "manifest.json").read_bytes() == manifest
        left = sorted(os.listdir(disk))
        print(json.dumps({"old": old.exit_code, "results": results, "kept": kept, "left": left}))
        """,
        str(QUICKSORT),
    )
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.splitlines()[-1])
    assert report["old"] == exits.OK and report["kept"]
    for store, (status, last_line) in report["results"].items():
        assert status == exits.BAD_INPUT, (store, last_line)
        assert last_line == f"error: {store}: No space left on device"
    assert report["left"] == ["filler", "old.ctrace"]


@needs_namespaces
def test_every_export_on_a_full_disk(tmp_path):
    """Every exporter, on a real file system with no space left: exit 1 naming the file, an
    existing file left as it was, and no new, partial or temporary file."""
    trace, elf = COVERAGE / "cov-a64.tarmac", COVERAGE / "cov-a64.elf"
    store = tmp_path / "cov.ctrace"
    assert CliRunner().invoke(cli, ["ingest", str(trace), "-o", str(store)]).exit_code == 0
    r = in_tmpfs(
        tmp_path / "disk",
        "size=64k",
        """
        import json, os, sys
        from pathlib import Path
        from click.testing import CliRunner
        from cputrace.cli import cli
        from cputrace.export.registry import EXPORTERS

        disk, store, elf = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
        for name in EXPORTERS:
            (disk / f"old.{name}").write_text("old\\n")
        fill_disk(disk / "filler")
        results = {}
        for name in EXPORTERS:
            for target in (disk / f"old.{name}", disk / f"new.{name}"):
                args = ["export", store, "--to", name, "-o", str(target), "--image", elf, "--table", "frames"]
                result = CliRunner().invoke(cli, args)
                results[str(target)] = [result.exit_code, result.output]
        print(json.dumps({"results": results, "left": sorted(os.listdir(disk))}))
        """,
        str(store),
        str(elf),
    )
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.splitlines()[-1])  # after a DuckDB progress bar, on a slow machine
    for target, (status, output) in report["results"].items():
        assert status == exits.BAD_INPUT, (target, output)
        assert output.strip() == f"error: {target}: No space left on device", target
    assert report["left"] == sorted(["filler", *(f"old.{name}" for name in EXPORTERS)])


@needs_namespaces
def test_export_into_a_read_only_folder(quicksort_copy, tmp_path):
    r = in_tmpfs(
        tmp_path / "read-only",
        "ro",
        """
        import sys
        sys.argv = ["cputrace", "export", sys.argv[2], "--to", "tarmac", "-o", sys.argv[1] + "/out.tarmac"]
        from cputrace.cli import main
        main()
        """,
        str(quicksort_copy),
    )
    assert r.returncode == exits.BAD_INPUT
    assert r.stderr.strip() == f"error: {tmp_path}/read-only/out.tarmac: Read-only file system"


@pytest.mark.skipif(os.geteuid() == 0, reason="permissions do not stop root")
def test_export_into_a_folder_without_write_permission(quicksort_copy, tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir(mode=0o555)
    r = cputrace("export", str(quicksort_copy), "--to", "tarmac", "-o", str(folder / "out.tarmac"))
    assert r.returncode == exits.BAD_INPUT
    assert r.stderr.strip() == f"error: {folder}/out.tarmac: Permission denied"


# -- an export that fails half-way ------------------------------------------------------------------


def _half_then(exc: BaseException):
    """A writer that writes part of its file, then fails with `exc`."""

    def write(request) -> None:
        with open(request.output, "w") as out:
            out.write("partial\n")
            out.flush()
            raise exc

    return write


@pytest.mark.parametrize(
    ("failure", "status", "message"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), exits.BAD_INPUT, "No space left on device"),
        (RuntimeError("a bug"), exits.INTERNAL, "RuntimeError: a bug"),
        (KeyboardInterrupt(), exits.INTERRUPTED, ""),
    ],
)
@pytest.mark.parametrize("name", sorted(EXPORTERS))
def test_a_failed_export_leaves_no_file(
    quicksort_copy, tmp_path, monkeypatch, name, failure, status, message
):
    """Whatever fails, whichever the exporter: an existing file stays as it was, a new one is not
    made, and no temporary file is left."""
    exporter = EXPORTERS[name]
    monkeypatch.setattr(exporter.code.replace(":", "."), _half_then(failure))
    old, new = tmp_path / f"old.{name}", tmp_path / f"new.{name}"
    old.write_text("old\n")
    for target in (old, new):
        result = CliRunner().invoke(cli, ["export", str(quicksort_copy), "--to", name, "-o", str(target)])
        assert result.exit_code == status, result.output
        assert message in result.output
    assert old.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [old.name]


def test_a_finished_export_replaces_the_file(quicksort_copy, tmp_path):
    target = tmp_path / "out.tarmac"
    target.write_text("old\n")
    target.chmod(0o640)
    result = CliRunner().invoke(cli, ["export", str(quicksort_copy), "--to", "tarmac", "-o", str(target)])
    assert result.exit_code == 0, result.output
    listed = CliRunner().invoke(cli, ["list", str(quicksort_copy), "--format", "tarmac"])
    assert target.read_bytes() == listed.stdout_bytes
    assert target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_coverage_reports_fail_whole(tmp_path, monkeypatch):
    def fail(coverage, out, *args) -> None:
        out.write("partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("cputrace.cli.coverage.write_lcov", fail)
    trace = tmp_path / "cov.tarmac"
    shutil.copy(COVERAGE / "cov-a64.tarmac", trace)
    info = tmp_path / "cov.info"
    result = CliRunner().invoke(
        cli, ["coverage", str(trace), "--image", str(COVERAGE / "cov-a64.elf"), "--lcov", str(info)]
    )
    assert result.exit_code == exits.BAD_INPUT
    assert f"error: {info}: No space left on device" in result.output
    assert not info.exists() and not list(tmp_path.glob(".*"))


# -- Ctrl-C -----------------------------------------------------------------------------------------

_INTERRUPT_AT_IMPORT = """
import importlib.abc, os, runpy, signal, sys

class Interrupt(importlib.abc.MetaPathFinder):
    def __init__(self, module):
        self.module = module

    def find_spec(self, name, path, target=None):
        if name == self.module:
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, Interrupt(sys.argv[1]))
sys.argv = ["cputrace", *sys.argv[2:]]
runpy.run_module("cputrace", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("module", ["pyarrow", "click", "rich.console", "cputrace.cli.analysis", "duckdb"])
def test_ctrl_c_during_the_imports_of_start_up(quicksort_copy, module):
    """SIGINT as `python -m cputrace calls` imports `module` (before any command runs)."""
    r = child(_INTERRUPT_AT_IMPORT, module, "calls", str(quicksort_copy))
    assert r.returncode == exits.INTERRUPTED, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_ctrl_c_during_a_long_ingest(tmp_path):
    """SIGINT while the first ingest compiles the decoder (an empty compiled-code cache makes
    it long, in a worker thread): exit 130 promptly, no traceback, no store."""
    trace, store = tmp_path / "q.tarmac", tmp_path / "q.ctrace"
    shutil.copy(QUICKSORT, trace)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "empty-cache"))
    ingest = subprocess.Popen([sys.executable, "-m", "cputrace", "ingest", str(trace), "-o", str(store)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    assert "format tarmac" in ingest.stderr.readline()  # decoding starts
    ingest.send_signal(signal.SIGINT)
    out, err = ingest.communicate(timeout=120)
    assert ingest.returncode == exits.INTERRUPTED, err
    assert "Traceback" not in err and out == ""
    assert not store.exists()


def test_ctrl_c_in_a_command(quicksort_copy, monkeypatch):
    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("cputrace.store.trace.Trace.sql", interrupted)
    result = CliRunner().invoke(cli, ["info", str(quicksort_copy)])
    assert result.exit_code == exits.INTERRUPTED
    assert result.output == ""


# -- a closed pipe ----------------------------------------------------------------------------------


def test_reader_of_stdout_goes_away(quicksort_copy):
    """`cputrace list ... | head -1`: a quiet exit with the status of SIGPIPE, as Unix tools have."""
    listing = subprocess.Popen([sys.executable, "-m", "cputrace", "list", str(quicksort_copy)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert listing.stdout.readline().split()[:2] == [b"seq", b"time"]
    listing.stdout.close()  # the listing (150 kB) is far more than a pipe holds
    assert listing.wait(timeout=120) == exits.BROKEN_PIPE
    assert listing.stderr.read() == b""


# -- an input that can be read only once -------------------------------------------------------


def test_a_pipe_as_input_is_a_clear_error_not_an_empty_store(tmp_path):
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)  # like bash's <(zcat trace.gz): the content could be read only once
    r = cputrace("ingest", str(fifo), "-o", str(tmp_path / "s"), timeout=120)
    assert r.returncode == exits.BAD_INPUT
    assert r.stderr.startswith(f"error: {fifo}: not a regular file") and "save it to a file" in r.stderr
    assert not (tmp_path / "s").exists()
