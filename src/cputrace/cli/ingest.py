"""The ingest command: inputs decoded into a store."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from ..formats import FORMATS
from ..formats.etmv3.options import OPTIONS as ETMV3_OPTIONS
from ..formats.tarmac.options import DEFAULT_ISA
from ..ingest import ingest
from ..inputs import Fingerprint
from .common import cli, err, progress
from .compiling import explain_compiling
from .params import image_option, option_flags


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
            "--format", "fmt", type=click.Choice(sorted(FORMATS)), help="Input format (default: sniffed)."
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
        option_flags(DEFAULT_ISA, *ETMV3_OPTIONS),
    )  # fmt: skip
    for decorate in reversed(decorators):
        wrapper = decorate(wrapper)
    return wrapper


@cli.command("ingest", epilog="`cputrace formats` lists the formats and the options of each.")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(), help="Store directory (default INPUT.ctrace).")
@decoder_params
def ingest_cmd(
    inputs: tuple[str, ...], output: str | None, fmt: str | None, strict: bool, images: tuple[str, ...],
    options: dict[str, object],
) -> None:  # fmt: skip
    """Decode INPUT... into a store (Parquet tables + manifest.json)."""
    total = sum(Fingerprint.of(p).size for p in inputs)
    explain_compiling()  # the decoders are about to import numba

    def said_format(path: str, name: str) -> None:
        how = "given" if fmt else "sniffed"
        err.print(f"{path}: format {name} ({how})", markup=False)

    with progress(total, "ingesting") as hook:
        result = ingest(
            inputs, output, format=fmt, strict=strict, options=options, images=images, progress=hook,
            on_format=said_format,
        )  # fmt: skip
    say_ingested(result.store, result.manifest)


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
