"""The record command: run a bare-metal program under unicorn and write its Tarmac trace."""

from __future__ import annotations

import sys

import click

from ..record import CPU_MODELS, DEFAULT_MAX_INSNS, CpuChoiceError, StopReason, record
from .common import cli, err
from .params import OUTPUT_FILE


def _console(stream: int, data: bytes) -> None:
    """The program's output goes to ours, unbuffered, so it interleaves as it would on a target."""
    text = sys.stdout if stream == 1 else sys.stderr
    text.flush()
    text.buffer.write(data)
    text.buffer.flush()


def _ram(_ctx: click.Context, _param: click.Parameter, specs: tuple[str, ...]) -> list[tuple[int, int]]:
    areas = []
    for spec in specs:
        address, _, size = spec.partition(":")
        try:
            start, length = int(address, 0), int(size, 0)
        except ValueError:
            raise click.BadParameter(f"{spec!r}: expected ADDRESS:SIZE, e.g. 0x0:0x100000") from None
        if start < 0 or length <= 0:
            raise click.BadParameter(f"{spec!r}: expected a non-negative address and a positive size")
        areas.append((start, length))
    return areas


@cli.command("record")
@click.argument("program", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=OUTPUT_FILE, help="Trace to write (default PROGRAM.tarmac).")
@click.option(
    "--max-insns",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_INSNS,
    show_default=True,
    help="Stop after this many instructions (exit status 0).",
)
@click.option(
    "--flow-only", is_flag=True, help="Write only program flow: FD/FI for taken branches, E for exceptions."
)
@click.option(
    "--cpu",
    type=click.Choice(list(CPU_MODELS)),
    help="CPU model (default cortex-a15 for 32-bit ARM, cortex-a72 for AArch64).",
)
@click.option(
    "--ram",
    multiple=True,
    callback=_ram,
    metavar="ADDRESS:SIZE",
    help="Also map zero-filled memory here (repeatable), for programs that expect RAM at fixed addresses.",
)
@click.pass_context
def record_cmd(
    ctx: click.Context,
    program: str,
    output: str | None,
    max_insns: int,
    flow_only: bool,
    cpu: str | None,
    ram: list[tuple[int, int]],
) -> None:
    """Run a bare-metal ARM or AArch64 ELF and write a Fast-Models-style Tarmac trace.

    The program starts at its ELF entry point and talks to the host through Arm semihosting
    (SYS_WRITE0/WRITEC/WRITE print here; SYS_EXIT ends the run and its status becomes
    this command's exit status).
    """
    try:
        result = record(
            program, output, max_insns=max_insns, flow_only=flow_only, cpu=cpu, console=_console, ram=ram
        )
    except CpuChoiceError as exc:
        raise click.BadParameter(str(exc), param_hint="--cpu") from None
    how = "program flow" if flow_only else "trace"
    err.print(
        f"{program}: {result.instructions:,} instructions on {result.cpu}, {how} in {result.trace}",
        markup=False,
    )
    if result.reason is StopReason.LIMIT:
        err.print(f"stopped after {max_insns:,} instructions (--max-insns)", markup=False)
        return
    status = result.exit.status & 0xFF
    err.print(f"program exited with status {status}", markup=False)
    ctx.exit(status)
