"""The ingest command: inputs decoded into a store."""

from __future__ import annotations

import click

from ..formats import FORMATS
from ..ingest import ingest
from ..inputs import Fingerprint
from .common import cli, err, progress
from .compiling import explain_compiling
from .etmoptions import etm_input_options, etm_options


@cli.command("ingest")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(), help="Store directory (default INPUT.ctrace).")
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), help="Input format (default: sniffed).")
@click.option("--strict", is_flag=True, help="Stop at the first record that does not parse.")
@click.option(
    "--default-isa",
    type=click.Choice(["A32", "T32", "A64", "SPARC"]),
    help="ISA of Tarmac instructions that do not name one (default T32, as on Cortex-M; SPARC for "
    "LEON traces exported as Tarmac).",
)
@click.option(
    "--image", "images", multiple=True, metavar="PATH[@ADDR]",
    help="Program image (ELF, Intel HEX, S-record, raw binary at ADDR) to recover the instructions "
    "a flow-only trace leaves out; repeatable.",
)  # fmt: skip
@click.option(
    "--option", "decoder_options", multiple=True, metavar="KEY=VALUE",
    help="A decoder option (docs/formats.md), e.g. high_vectors=true, vector_base=0x8000, xscale_pc=0x8040; "
    "repeatable.",
)  # fmt: skip
@etm_input_options
def ingest_cmd(
    inputs: tuple[str, ...], output: str | None, fmt: str | None, strict: bool, default_isa: str | None,
    images: tuple[str, ...], decoder_options: tuple[str, ...], **etm: object,
) -> None:  # fmt: skip
    """Decode INPUT... into a store (Parquet tables + manifest.json)."""
    options: dict[str, object] = {"default_isa": default_isa} if default_isa else {}
    if images:
        options["images"] = list(images)
    options.update(etm_options(etm))
    for item in decoder_options:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--option")
        options[key.strip()] = value.strip()
    total = sum(Fingerprint.of(p).size for p in inputs)
    explain_compiling()  # the decoders are about to import numba

    def said_format(path: str, name: str) -> None:
        how = "given" if fmt else "sniffed"
        err.print(f"{path}: format {name} ({how})", markup=False)

    with progress(total, "ingesting") as hook:
        result = ingest(
            inputs, output, format=fmt, strict=strict, options=options, progress=hook,
            on_format=said_format,
        )  # fmt: skip
    m = result.manifest
    counts = m["counts"]
    click.echo(
        f"{result.store}: {counts['instructions']:,} instructions, {counts['registers']:,} "
        f"register writes, {counts['memory']:,} memory accesses, {counts['events']:,} events "
        f"in {m['ingest_seconds']:.2f} s"
    )
    warnings = m["warnings"]
    if warnings["count"]:
        count = warnings["count"]
        err.print(f"{count:,} warning{'s' if count > 1 else ''}, e.g.:", markup=False)
        for sample in warnings["samples"][:5]:
            err.print(f"  {sample}", markup=False)
