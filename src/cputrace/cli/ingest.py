"""The ingest command: inputs decoded into a store."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from ..batch.tasks import PART_BYTES, SHARED_STORAGE
from ..coresight.sniff import SNAPSHOT_INI
from ..formats import ALIASES, FORMATS
from ..formats.coresight.options import OPTIONS as CORESIGHT_OPTIONS
from ..formats.tarmac.options import DEFAULT_ISA
from ..ingest import IngestResult, ingest
from ..inputs import Fingerprint
from .common import cli, err, progress
from .compiling import explain_compiling
from .params import cluster_options, image_option, option_flags


class FormatName(click.Choice):
    """--format: a format's name, or a former name of one (`ALIASES`), taken for its name now so
    that scripts written with it go on working; the help lists the names now."""

    def __init__(self) -> None:
        super().__init__(sorted(FORMATS))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(ALIASES.get(value, value), param, ctx)


def decoder_params(command: Callable[..., Any]) -> Callable[..., Any]:
    """How inputs are decoded, as `ingest` and `batch ingest` take it: --format, --strict, --image,
    --option KEY=VALUE and the options with flags of their own; the command gets `fmt`,
    `strict`, `images` and `options` (by name)."""

    @wraps(command)
    def wrapper(
        *args: Any, decoder_options: tuple[str, ...], flagged: dict[str, object], **kwargs: Any
    ) -> Any:
        options = dict(flagged)
        for item in decoder_options:
            key, equals, value = item.partition("=")
            if not equals or not key.strip():
                raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--option")
            options[key.strip()] = value.strip()
        return command(*args, options=options, **kwargs)

    decorators = (
        click.option(
            "--format", "fmt", type=FormatName(), help="Input format (default: sniffed)."
        ),
        click.option("--strict", is_flag=True, help="Stop at the first record that does not parse."),
        image_option(
            "Program image (ELF, Intel HEX, S-record, raw binary at ADDR) to recover the instructions "
            "a flow-only trace leaves out; repeatable."
        ),
        click.option(
            "--option", "decoder_options", multiple=True, metavar="KEY=VALUE",
            help="A decoder option (`cputrace formats` lists them), e.g. high_vectors=true, "
            "vector_base=0x8000, xscale_pc=0x8040; repeatable.",
        ),
        option_flags(DEFAULT_ISA, *CORESIGHT_OPTIONS),
    )  # fmt: skip
    for decorate in reversed(decorators):
        wrapper = decorate(wrapper)
    return wrapper


def _split_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--workers, --scheduler, --scheduler-file and --part-size: one input split across a
    cluster; the command gets `cluster` (None when none of the first three is given)."""

    @wraps(command)
    def wrapper(*args: Any, cluster: dict[str, Any], **kwargs: Any) -> Any:
        given = any(value is not None for value in cluster.values())
        return command(*args, cluster=cluster if given else None, **kwargs)

    wrapper = cluster_options(
        wrapper, "Split the input into parts decoded side by side on a local cluster of N worker "
        "processes, into a partitioned store (default: one process, no cluster).",
    )  # fmt: skip
    return click.option(
        "--part-size", type=ByteSize(), default=f"{PART_BYTES >> 20}M", show_default=True, metavar="SIZE",
        help="Input bytes per part when the input is split across a cluster (K, M, G: KiB, MiB, GiB).",
    )(wrapper)  # fmt: skip


class ByteSize(click.ParamType):
    """A number of bytes, with an optional K, M or G suffix (binary multiples): 64M, 1G, 512K."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip().upper().removesuffix("B").removesuffix("I")
        digits, suffix = (text[:-1], text[-1]) if text[-1:] in ("K", "M", "G") else (text, "")
        if not digits.isdigit() or int(digits) < 1:
            self.fail(f"expected a size such as 64M, 1G or 65536, got {value!r}", param, ctx)
        return int(digits) * _SIZE_SUFFIXES[suffix]


_SIZE_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _snapshot_folders(
    _ctx: click.Context, param: click.Parameter, inputs: tuple[str, ...]
) -> tuple[str, ...]:
    """INPUTs as ingest reads them: a CoreSight snapshot's folder stands for its snapshot.ini (as
    `etm packets` takes it); any other folder is bad usage."""
    read = []
    for path in inputs:
        if os.path.isdir(path):
            ini = os.path.join(path, SNAPSHOT_INI)
            if not os.path.isfile(ini):
                raise click.BadParameter(f"{path} is a folder without a {SNAPSHOT_INI}", param=param)
            path = ini
        read.append(path)
    return tuple(read)


@cli.command(
    "ingest",
    epilog="`cputrace formats` lists the formats and the options of each. With --workers, --scheduler "
    f"or --scheduler-file, the store is written by the workers: {SHARED_STORAGE}.",
)
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True), callback=_snapshot_folders)
@click.option("-o", "--output", type=click.Path(), help="Store directory (default INPUT.ctrace).")
@decoder_params
@_split_options
def ingest_cmd(
    inputs: tuple[str, ...], output: str | None, fmt: str | None, strict: bool, images: tuple[str, ...],
    options: dict[str, object], cluster: dict[str, Any] | None, part_size: int,
) -> None:  # fmt: skip
    """Decode INPUT... into a store (Parquet tables + manifest.json).

    With --workers N, --scheduler ADDRESS or --scheduler-file FILE, one INPUT is split at record
    boundaries and its parts decoded side by side on a Dask cluster, into a partitioned store
    equal row for row to the one a single process writes (Tarmac without --image, ARMulator,
    and raw ETMv3 and PTM streams, at their A-syncs; other inputs are ingested whole by one
    worker).
    """
    total = sum(Fingerprint.of(p).size for p in inputs)
    explain_compiling()  # the decoders are about to import numba

    def said_format(path: str, name: str) -> None:
        how = "given" if fmt else "sniffed"
        err.print(f"{path}: format {name} ({how})", markup=False)

    if cluster is not None:
        if len(inputs) > 1:
            raise click.UsageError("give one INPUT to split across a cluster (`batch ingest` ingests many)")
        source = inputs[0]
        result = _ingest_split(source, output, fmt, strict, images, options, cluster, part_size, said_format)
    else:
        with progress(total, "ingesting") as hook:
            result = ingest(
                inputs, output, format=fmt, strict=strict, options=options, images=images, progress=hook,
                on_format=said_format,
            )  # fmt: skip
    say_ingested(result.store, result.manifest)


def _ingest_split(
    source: str, output: str | None, fmt: str | None, strict: bool, images: tuple[str, ...],
    options: dict[str, object], cluster: dict[str, Any], part_bytes: int,
    said_format: Callable[[str, str], None],
) -> IngestResult:  # fmt: skip
    """`ingest --workers`: the input split across the cluster (batch/partition.py)."""
    from ..batch.cluster import connect
    from ..batch.partition import ingest_split

    def dashboard(link: str) -> None:
        err.print(f"dashboard: {link}", markup=False)

    def note(text: str) -> None:
        err.print(text, markup=False)

    read_twice = 2 * Fingerprint.of(source).size  # a scan, then the decoding
    with connect(**cluster, on_dashboard=dashboard) as client, progress(read_twice, "ingesting") as hook:
        return ingest_split(
            client, source, output, format=fmt, strict=strict, options=options, images=images,
            part_bytes=part_bytes, on_format=said_format, on_note=note, progress=hook,
        )  # fmt: skip


def say_ingested(store: object, manifest: dict[str, Any]) -> None:
    """The line saying what a store holds and how long its ingest took, and its warnings."""
    counts = manifest["counts"]
    click.echo(
        f"{store}: {counts['instructions']:,} instructions, {counts['registers']:,} "
        f"register writes, {counts['memory']:,} memory accesses, {counts['events']:,} events "
        f"in {manifest['ingest_seconds']:.2f} s"
    )
    warnings = manifest["warnings"]
    if warnings["count"]:
        count = warnings["count"]
        err.print(f"{count:,} warning{'s' if count > 1 else ''}, e.g.:", markup=False)
        for sample in warnings["samples"][:5]:
            err.print(f"  {sample}", markup=False)


@cli.command("formats")
def formats_cmd() -> None:
    """List the input formats and the decoder options each takes (--option NAME=VALUE)."""
    for name, entry in FORMATS.items():
        how = "sniffed" if entry.sniff else f"--format {name}"
        how += "".join(f", alias {alias}" for alias in entry.aliases)
        click.echo(f"{name} ({how}): {entry.description}")
        width = max((len(option.name) for option in entry.options), default=0)
        for option in entry.options:
            default = "" if option.default is None else f" (default {_shown(option.default)})"
            click.echo(f"  {option.name:<{width}}  {option.values}{default}")
            click.echo(f"  {'':<{width}}  {option.help}")
        if not entry.options:
            click.echo("  (no options)")


def _shown(value: object) -> str:
    """A default as --option takes it: flags as true or false."""
    return str(value).lower() if isinstance(value, bool) else str(value)
