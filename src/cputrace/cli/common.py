"""What every command shares: the group, error handling, progress, opening a trace, row output."""

from __future__ import annotations

import contextlib
import csv
import importlib
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import click
from rich.console import Console
from rich.markup import escape

from .. import __version__
from ..errors import CputraceError, UsageError
from ..inputs import Fingerprint

if TYPE_CHECKING:
    import pyarrow as pa

    from ..ingest import ProgressHook
    from ..trace import Trace

err = Console(stderr=True, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def progress(total: int, label: str) -> Iterator[ProgressHook | None]:
    """A progress bar on a terminal; nothing when stderr is piped."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    columns = (
        "{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
        TimeRemainingColumn(),
    )  # fmt: skip
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def open_trace_arg(trace: str) -> Trace:
    """A store, or a raw input ingested (once) into its cached store."""
    from ..trace import Trace
    from ..trace import open as open_trace

    path = Path(trace)
    if not path.exists():
        raise click.BadParameter(f"{trace}: no such file or store", param_hint="TRACE")
    if path.is_dir():
        return Trace(path)
    with progress(Fingerprint.of(path).size, f"ingesting {path.name}") as hook:
        return open_trace(path, progress=hook)


class _Group(click.Group):
    """The command group: reports CputraceError as exit 1 (UsageError 2), and imports command
    modules lazily.

    `modules` maps each command to the module that defines it, so a command pays only for
    the imports it needs (start-up matters for short commands).
    """

    modules: ClassVar[dict[str, str]] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.modules, *self.commands})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.modules:
            importlib.import_module(f"{__package__}.{self.modules[name]}")
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            err.print(f"[red]error:[/red] {escape(str(exc))}", markup=True)
            sys.exit(2)
        except CputraceError as exc:
            err.print(f"[red]error:[/red] {escape(str(exc))}", markup=True)
            sys.exit(1)
        except Exception as exc:
            duckdb = sys.modules.get("duckdb")  # only a command that imported DuckDB can raise its errors
            if duckdb is None or not isinstance(exc, duckdb.Error):
                raise
            err.print(f"[red]error:[/red] SQL: {escape(str(exc))}", markup=True)
            sys.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cputrace")
def cli() -> None:
    """Read processor instruction traces into one queryable execution history."""


def plain(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def json_value(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else value


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


