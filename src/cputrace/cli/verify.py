"""The verify command: a store's files checked against the checksums written with them."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import StoreError
from ..model import TABLES
from ..store.checksums import store_problems
from ..store.folder import pin
from ..store.manifest import recorded_files, table_files
from .common import cli


@cli.command("verify")
@click.argument("store", type=click.Path(exists=True, file_okay=False))
def verify_cmd(store: str) -> None:
    """Check every byte of STORE's tables against the checksums in its manifest.

    Exit 0 when the store is whole, 1 naming each damaged file. A store written before
    checksums were recorded has every page of its tables read instead.
    """
    held = pin(Path(store))
    try:
        problems = store_problems(held.data, held.manifest)
    finally:
        held.release()
    if problems:
        raise StoreError("damaged store: " + "\n  ".join(problems))
    files = recorded_files(held.manifest)
    how = "checksums match" if files else "no checksums recorded, every page read"
    names = [name for files in table_files(held.manifest).values() for name in files]
    size = sum((held.data / name).stat().st_size for name in names)
    click.echo(f"{store}: OK, {len(TABLES)} tables, {size:,} bytes, {how}")
