"""The browse command: the interactive trace browser, in this terminal or served to a web browser.

Textual is the `browse` extra: without it the command says what to install (exit 2). With
`--serve`, textual-serve runs this same command (without `--serve`) once per browser
connection; the trace is opened (ingested if it is raw) and indexed here first, so each
connection finds its store and indexes ready. Searches always run SQL in the library's
untrusted mode (the session's), so a browser can only read the trace.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shlex
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from ..errors import MissingExtra
from ..export.output import check_output_file, output_path
from .common import cli, err, open_trace_arg
from .params import OUTPUT_FILE, image_files, image_option, load_images

if importlib.util.find_spec("textual") is None:
    raise MissingExtra("the trace browser", "textual", "browse")


@cli.command("browse")
@click.argument("trace")
@image_option("Program image: symbols in the trace and in expressions, source lines, memory bytes.")
@click.option("--cpu", type=click.IntRange(min=0), help="Start on this core (default: the first one).")
@click.option("--at", "seq", type=click.IntRange(min=0), help="Start after instruction SEQ.")
@click.option("--time", type=int, help="Start after the last instruction at or before time T.")
@click.option("--diff", "other", help="A second trace, shown beside, aligned as by `cputrace diff`.")
@click.option(
    "--source-dir", "source_dirs", multiple=True, type=click.Path(exists=True, file_okay=False),
    help="Where to look for the source files the image's line tables name (repeatable).",
)  # fmt: skip
@click.option("--serve", is_flag=True, help="Serve the browser to web browsers instead of this terminal.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="With --serve: the address to listen on."
)
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8000, show_default=True,
    help="With --serve: the port to listen on.",
)  # fmt: skip
@click.option(
    "--screenshot", type=OUTPUT_FILE, metavar="SVG",
    help="Write the first screen as SVG to this file and exit, without a terminal.",
)  # fmt: skip
def browse_cmd(
    trace: str,
    images: tuple[str, ...],
    cpu: int | None,
    seq: int | None,
    time: int | None,
    other: str | None,
    source_dirs: tuple[str, ...],
    serve: bool,
    host: str,
    port: int,
    screenshot: str | None,
) -> None:
    """Browse a trace: step through it with registers, memory and calls following the cursor.

    TRACE is a store or a raw input (ingested on first use). Press F1 or ? in the browser for
    its keys. With --serve, open the URL it prints in a web browser.
    """
    if seq is not None and time is not None:
        raise click.UsageError("give at most one of --at SEQ and --time T")
    if serve and screenshot:
        raise click.UsageError("--screenshot writes one screen here; it cannot go with --serve")
    if serve:
        _check_host(host, port)
    from ..browse.session import Session

    opened = open_trace_arg(trace)
    compared = open_trace_arg(other) if other is not None else None
    image = load_images(images)
    sources = [*opened.input_paths, *(compared.input_paths if compared else ()), *image_files(images)]
    if screenshot is not None:  # before the indexes are built: they take a while on a long trace
        check_output_file(screenshot, sources)
    with _index_bar() as hook:  # the indexes are built here once, before any app or server starts
        session = Session.open(opened, image, cpu, hook, source_dirs)
        diff = None
        if compared is not None:
            from ..browse.diffview import DiffView

            other_session = Session.open(compared, image, cpu, hook, source_dirs)
            diff = DiffView.open(session, other_session, progress=hook)
    if serve:
        session.close()
        if diff is not None:
            diff.b.close()
        served = (opened.path, compared.path if compared else None)
        _serve(*served, images, cpu, seq, time, source_dirs, host, port)
        return
    from ..browse.app import BrowseApp, Start

    # a screenshot waits for the branch targets; a person sees the trace before they are named
    interactive = screenshot is None
    app = BrowseApp(
        session, Start(cpu=cpu, seq=seq, time=time), diff, targets_later=interactive, freeze_heap=interactive
    )
    try:
        if screenshot is None:
            app.run()
            if app.failure is not None:
                raise app.failure
            return
        with output_path(screenshot, sources) as staged:  # whole or not at all, never an input
            app.screenshot(staged)
        err.print(f"wrote {screenshot}")
    finally:
        session.close()
        if diff is not None:
            diff.b.close()


@contextlib.contextmanager
def _index_bar() -> Iterator[Callable[[str, float], None] | None]:
    """A progress bar of an index build (what it does, the fraction done), on a terminal;
    nothing when stderr is piped or the indexes are there already (no bar appears)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, Progress, TimeRemainingColumn

    columns = ("{task.description}", BarColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("indexing", total=1.0)
        yield lambda what, done: bar.update(task, description=what, completed=done)


def _serve(
    store: Path,
    other: Path | None,
    images: tuple[str, ...],
    cpu: int | None,
    seq: int | None,
    time: int | None,
    source_dirs: tuple[str, ...],
    host: str,
    port: int,
) -> None:
    """Serve `cputrace browse` to web browsers until interrupted."""
    if importlib.util.find_spec("textual_serve") is None:
        raise MissingExtra("serving the trace browser", "textual-serve", "browse")
    from textual_serve.server import Server

    command = [sys.executable, "-m", "cputrace", "browse", str(store.resolve())]
    for spec in images:
        command += ["--image", _absolute_image(spec)]
    for name, value in (("--cpu", cpu), ("--at", seq), ("--time", time)):
        if value is not None:
            command += [name, str(value)]
    if other is not None:
        command += ["--diff", str(other.resolve())]
    for directory in source_dirs:
        command += ["--source-dir", str(Path(directory).resolve())]
    server = Server(shlex.join(command), host=host, port=port, title=f"cputrace browse {store.name}")
    server.serve()


def _check_host(host: str, port: int) -> None:
    """Bad usage for a --host that names no address, said before the indexes are built (the
    server's own error, 'Name or service not known', names no host)."""
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise click.BadParameter(f"{host!r}: {exc.strerror}", param_hint="--host") from None
    except UnicodeError:  # a label empty or past 63 characters
        raise click.BadParameter(f"{host!r} is not a host name", param_hint="--host") from None


def _absolute_image(spec: str) -> str:
    """An --image spec with its path made absolute (the served app may run elsewhere)."""
    from ..image.spec import parse_image_spec

    path, address = parse_image_spec(spec)
    return str(path.resolve()) + ("" if address is None else f"@{address:#x}")
