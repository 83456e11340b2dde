"""What every command shares: the group, exit statuses, progress, opening a trace, row output."""

from __future__ import annotations

import contextlib
import csv
import datetime
import decimal
import importlib
import json
import math
import os
import sys
import traceback
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TextIO

import click
from rich.console import Console
from rich.markup import escape

from .. import __version__
from ..errors import CputraceError, MissingExtra, UsageError, os_error_text
from ..inputs import Fingerprint
from . import exits
from .examples import examples_epilog, with_examples

if TYPE_CHECKING:
    import pyarrow as pa

    from ..ingest import ProgressHook
    from ..store.trace import Trace
    from ..store.window import Window

err = Console(stderr=True, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def progress(total: int, label: str, unit: str = "bytes") -> Iterator[ProgressHook | None]:
    """A progress bar on a terminal; nothing when stderr is piped. `unit` is what `total`
    counts: bytes (shown with their speed), or anything else (tasks), shown as done/total."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich import progress as bars


    amount = (
        (bars.DownloadColumn(), bars.TransferSpeedColumn()) if unit == "bytes"
        else (bars.TextColumn(f"{{task.completed:,.0f}}/{{task.total:,.0f}} {unit}"),)
    )  # fmt: skip
    columns = ("{task.description}", bars.BarColumn(), *amount, bars.TimeRemainingColumn())
    with bars.Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


@contextlib.contextmanager
def reading_bar(traces: Sequence[Trace], window: Window | None = None) -> Iterator[None]:
    """A progress bar of the instructions that analyses and exports read inside the block (a new
    pass over them starts it again), on a terminal; nothing when stderr is piped.

    It appears with the first instructions read: work that reads none (a DuckDB copy) shows none.
    """
    if not sys.stderr.isatty():
        yield
        return
    from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

    from ..store.batches import reading_progress

    total = sum(_instructions_in(t, window) for t in traces)
    count = TextColumn("{task.completed:,.0f}/{task.total:,.0f} instructions")
    bar = Progress("reading", BarColumn(), count, TimeRemainingColumn(), console=err, transient=True)
    task: TaskID | None = None

    def advance(rows: int) -> None:
        nonlocal task
        if task is None:
            bar.start()
            task = bar.add_task("reading", total=total)
        elif bar.tasks[0].completed + rows > total:
            bar.reset(task)
        bar.advance(task, rows)

    try:
        with reading_progress(advance):
            yield
    finally:
        bar.stop()


def _instructions_in(trace: Trace, window: Window | None) -> int:
    if window is None or (window.start, window.stop) == (None, None):
        return int(trace.manifest["counts"]["instructions"])
    counted = trace.sql(f"SELECT count(*) AS n FROM instructions WHERE {window.sql()}")
    return int(counted.column("n")[0].as_py())


def open_trace_arg(trace: str) -> Trace:
    """A store, or a raw input ingested (once) into its cached store."""
    from ..opening import open as open_trace
    from ..store.trace import Trace

    path = Path(trace)
    if not path.exists():
        raise click.BadParameter(f"{trace}: no such file or store", param_hint="TRACE")
    if path.is_dir():
        return Trace(path)
    with progress(Fingerprint.of(path).size, f"ingesting {path.name}") as hook:
        return open_trace(path, progress=hook)


class _Group(click.Group):
    """The command group: imports command modules lazily, and ends a failed command with the exit
    status that says why (see `fail`).

    `modules` maps each command to the module that defines it, so a command pays only for
    the imports it needs (start-up matters for short commands).
    """

    modules: ClassVar[dict[str, str]] = {
        "ingest": "ingest", "formats": "ingest", "info": "store", "list": "store", "sql": "store",
        "calls": "analysis", "profile": "analysis", "export": "export",
        "state": "state", "diff": "diff", "coverage": "coverage",
        "record": "record", "etm": "etm", "verify": "verify", "batch": "batch", "browse": "browse",
    }  # fmt: skip

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.modules, *self.commands})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.modules:
            try:
                importlib.import_module(f"{__package__}.{self.modules[name]}")
            except MissingExtra as missing:
                return _unavailable(name, missing)
        command = super().get_command(ctx, name)
        return with_examples(command, name) if command is not None else None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except (Exception, KeyboardInterrupt) as exc:
            fail(exc)


def _unavailable(name: str, missing: MissingExtra) -> click.Command:
    """A command whose optional dependency is not installed: listed, and saying what to install
    whatever its arguments (exit 2)."""

    def say_so() -> NoReturn:
        raise missing

    return click.Command(
        name,
        callback=say_so,
        help=str(missing),
        short_help=str(missing),
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )


@click.group(
    cls=_Group, context_settings={"help_option_names": ["-h", "--help"]}, epilog=examples_epilog("")
)
@click.version_option(__version__, prog_name="cputrace")
def cli() -> None:
    """Read processor instruction traces into one queryable execution history."""
    if "numba" in sys.modules:  # the command compiles nothing otherwise (ingest sees to itself)
        from .compiling import explain_compiling

        explain_compiling()


def run() -> NoReturn:
    """The command line of this process, ended with the exit status that says how it went."""
    try:
        status = cli.main(prog_name="cputrace", standalone_mode=False)
    except SystemExit as exc:  # a command's own status (diff --exit-code), or `fail`'s
        status = exc.code
    except click.ClickException as exc:
        exc.show()
        status = exc.exit_code
    except click.Abort as exc:  # click's form of Ctrl-C while parsing (or printing --help)
        if not isinstance(exc.__cause__, KeyboardInterrupt):
            fail(exc)
        status = exits.INTERRUPTED  # click has ended the line of the terminal's ^C
    except (Exception, KeyboardInterrupt) as exc:
        fail(exc)
    _flush_stdout()
    sys.exit(status)


def fail(exc: BaseException) -> NoReturn:
    """Exit for an exception that ended a command: bad input and failed file operations 1 (the
    message names the file), bad usage the library finds (UsageError) and bad SQL 2, Ctrl-C
    130, a closed stdout 141 (quietly), and anything else 70, a bug, in one line
    (CPUTRACE_DEBUG=1 adds the traceback)."""
    status = exits.INTERNAL
    duckdb = sys.modules.get("duckdb")  # only a command that imported DuckDB can raise its errors
    if isinstance(exc, KeyboardInterrupt):
        if sys.stderr.isatty():
            sys.stderr.write("\n")  # ends the line of the terminal's ^C
        status = exits.INTERRUPTED
    elif isinstance(exc, BrokenPipeError):
        status = exits.BROKEN_PIPE
    elif isinstance(exc, UsageError):
        status = _error(str(exc), exits.USAGE)
    elif isinstance(exc, CputraceError):
        status = _error(str(exc), exits.BAD_INPUT)
    elif isinstance(exc, OSError):
        status = _error(os_error_text(exc), exits.BAD_INPUT)
    elif duckdb is not None and isinstance(exc, duckdb.IOException):
        status = _error(str(exc), exits.BAD_INPUT)
    elif duckdb is not None and isinstance(exc, duckdb.Error):
        status = _error(f"SQL: {exc}", exits.USAGE)
    else:
        if os.environ.get("CPUTRACE_DEBUG"):
            traceback.print_exception(exc)
        err.print(
            f"[red]internal error[/red] (a bug in cputrace): {escape(f'{type(exc).__name__}: {exc}')}; "
            "run again with CPUTRACE_DEBUG=1 for the traceback",
            markup=True,
        )
    _flush_stdout()
    sys.exit(status)


def _error(message: str, status: int) -> int:
    err.print(f"[red]error:[/red] {escape(message)}", markup=True)
    return status


def _flush_stdout() -> None:
    """Flush what is left for stdout; if its reader went away (or it cannot take more), drop it.

    Standard output then points at the null device, so the flush at exit is quiet too.
    """
    try:
        sys.stdout.flush()
    except OSError:
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def plain(value: Any) -> str:
    """A cell of csv (and of text tables): empty for null, bytes in hex, booleans as `true`/`false`
    (as DuckDB's and Arrow's csv writers have them)."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def json_value(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else value


def json_default(value: Any) -> Any:
    """What `json` cannot write itself, from any SQL column type: bytes in hex, decimals as
    numbers where that is exact (HUGEINT and DECIMAL(38,0) arrive as Decimal) and as their text
    where a double would round them, dates and times in ISO 8601, anything else (UUID) as text."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, decimal.Decimal):
        if value == value.to_integral_value():
            return int(value)
        return float(value) if decimal.Decimal(repr(float(value))) == value else str(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return str(value)


def json_finite(value: Any) -> Any:
    """`value` with every NaN and infinity (in lists and structs too) as None: JSON has no such
    numbers, and `json` would write the `NaN` and `Infinity` strict readers (jq) refuse."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [json_finite(item) for item in value]
    if isinstance(value, dict):
        return {key: json_finite(item) for key, item in value.items()}
    return value


def write_rows(table: pa.Table, fmt: str, out: Any) -> None:
    """csv (header row, plain decimal integers) or one JSON object per line."""
    write_batches(table.schema, table.to_batches(65536), fmt, out)


def write_batches(schema: pa.Schema, batches: Iterable[pa.RecordBatch], fmt: str, out: Any) -> None:
    """`write_rows` of rows that come in batches (never all in memory)."""
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(schema.names)
        for batch in batches:
            for row in batch.to_pylist():
                writer.writerow([plain(v) for v in row.values()])
    else:
        for batch in batches:
            for row in batch.to_pylist():
                out.write(json.dumps({k: json_value(v) for k, v in row.items()}) + "\n")


def plain_table(table: pa.Table, out: TextIO, hex_columns: Sequence[str] = ()) -> None:
    """An aligned text table: numbers right-aligned with thousands separators, addresses in hex."""
    import pyarrow as pa

    names = table.column_names
    rows = []
    for row in table.to_pylist():
        cells = []
        for name in names:
            value = row[name]
            if value is None:
                cells.append("-")
            elif name in hex_columns:
                cells.append(f"{value:#x}")
            elif isinstance(value, float):
                cells.append(f"{value:.1f}")
            elif isinstance(value, int):
                cells.append(f"{value:,}")
            else:
                cells.append(str(value))
        rows.append(cells)
    widths = [max(len(n), *(len(r[i]) for r in rows)) if rows else len(n) for i, n in enumerate(names)]
    textual = {n for n in names if pa.types.is_string(table.schema.field(n).type) or n in hex_columns}

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if n in textual else c.rjust(w) for c, w, n in zip(cells, widths, names, strict=True)
        ]
        return "  ".join(parts).rstrip()

    out.write(line(names) + "\n")
    for cells in rows:
        out.write(line(cells) + "\n")
