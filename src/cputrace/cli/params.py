"""Parameters that several commands share: numbers, --image, decoder options as flags.

Light: the image loaders (ELF, DWARF, capstone) are imported only when an image is given, the
decoders not at all, so a command pays only for what it uses."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..formats.base import Option
    from ..image import Image


def address(text: str) -> int:
    """A non-negative integer in Python syntax (hex as 0x...), or click.BadParameter."""
    try:
        value = int(text, 0)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a number (write hex as 0x...)") from None
    if value < 0:
        raise click.BadParameter(f"{text!r} is negative")
    return value


class Number(click.ParamType):
    """An integer in Python syntax, so addresses can be given in hex."""

    name = "NUMBER"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return address(value)
        except click.BadParameter as exc:
            self.fail(exc.message, param, ctx)


NUMBER = Number()


class OutputFile(click.Path):
    """A file a command writes: no folder, and never the empty name, which names no file (as a
    path it is the current folder): a report given as '' was left unwritten in silence, and a
    plot written as the hidden file '.png'. Nor `-`, which a user means as the standard
    output: an output is a file written whole and renamed into place, and `-` wrote a file of
    that name (with a listing beside it called `-.lst`)."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value == "":
            self.fail("'': an empty name names no file", param, ctx)
        if value == "-":
            self.fail("'-': the output is a file, written whole, not the standard output; name a file "
                      "(./- for one called '-')", param, ctx)  # fmt: skip
        return super().convert(value, param, ctx)


OUTPUT_FILE = OutputFile()


def image_option(
    help: str = "Program image (ELF: symbols and DWARF lines); repeatable.", *, required: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--image PATH[@ADDR], repeatable, passed on as `images` (the specs; `load_images` loads
    them); `help` says what the command does with it."""
    return click.option(
        "--image", "images", multiple=True, required=required, metavar="PATH[@ADDR]", help=help
    )  # fmt: skip


def load_images(specs: Sequence[str]) -> Image | None:
    """The program image(s) given with --image, merged; None when there are none."""
    if not specs:
        return None
    from ..image import load_image_specs  # ELF, DWARF and capstone: only when asked for

    return load_image_specs(specs)


def image_files(specs: Sequence[str]) -> tuple[Path, ...]:
    """The files --image names (without their @ADDR): inputs that no output may replace."""
    from ..image.spec import parse_image_spec

    return tuple(parse_image_spec(spec)[0] for spec in specs)


def cluster_options(
    command: Callable[..., Any],
    workers_help: str = "Run on a local cluster of N worker processes (default: one per core).",
) -> Callable[..., Any]:
    """Where the work runs: --workers N (a local cluster of N processes; the default, with this
    machine's cores), --scheduler ADDRESS or --scheduler-file FILE (a running Dask cluster);
    the command gets them as `cluster`, the keywords of `batch.cluster.connect`."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        cluster = {name: kwargs.pop(name) for name in ("workers", "scheduler", "scheduler_file")}
        if sum(value is not None for value in cluster.values()) > 1:
            raise click.UsageError("give one of --workers, --scheduler and --scheduler-file")
        return command(*args, cluster=cluster, **kwargs)

    options = (
        click.option("--workers", type=click.IntRange(min=1), metavar="N", help=workers_help),
        click.option("--scheduler", metavar="ADDRESS",
                     help="Run on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786)."),
        click.option("--scheduler-file", type=click.Path(exists=True, dir_okay=False),
                     help="Run on the Dask cluster that this scheduler file (dask scheduler "
                     "--scheduler-file) describes."),
    )  # fmt: skip
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def option_flags(*options: Option) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decoder options as flags of their own (`--etmcr X` for `--option etmcr=X`), with the
    options' help; the command gets the ones given as `flagged`, values by option name (the
    decoder's `Option` checks them further)."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            flagged = {o.name: value for o in options if (value := kwargs.pop(o.name)) is not None}
            return command(*args, flagged=flagged, **kwargs)

        for option in reversed(options):
            flag = f"--{option.name.replace('_', '-')}"
            said = option.help if option.default is None else f"{option.help} Default: {option.default}."
            wrapper = click.option(flag, option.name, type=_click_type(option), help=said)(wrapper)
        return wrapper

    return decorate


def _click_type(option: Option) -> click.ParamType:
    if option.kind == "choice":
        return click.Choice(option.choices)
    if option.kind == "file":
        return click.Path(exists=True, dir_okay=False)
    return NUMBER if option.kind == "number" else click.BOOL
