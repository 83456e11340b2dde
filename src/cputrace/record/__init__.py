"""Recording Tarmac traces of bare-metal programs run under unicorn: real programs as ground truth.

`record("prog.elf", "run.tarmac")` runs an ARM (A32/T32) or AArch64 ELF from its entry point
and writes a Fast-Models-style Tarmac trace: every instruction with its memory accesses and
the registers it changed, or with `flow_only=True` only the taken branches (`FD`/`FI`). Both
describe the same run. Programs print and stop through Arm semihosting.

unicorn comes with the `record` extra (`pip install 'cputrace[record]'`); without it,
importing this package raises `MissingExtra`, which says so.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import CputraceError, MissingExtra
from ..export.output import output_path

try:
    import unicorn  # noqa: F401  (checked first, so that its absence is said plainly)
except ModuleNotFoundError:
    raise MissingExtra("recording", "unicorn", "record") from None

from .cpus import CPU_MODELS, DEFAULT_CPUS, CpuChoiceError, CpuModel, choose_cpu
from .emulator import Recorder, StopReason
from .program import Program, load_program
from .semihosting import Exit

DEFAULT_MAX_INSNS = 10_000_000
"""Instructions after which a run stops unless told otherwise, so a runaway program ends."""


@dataclass(frozen=True, slots=True)
class RecordResult:
    """How a recorded run went. `stdout`/`stderr` hold the program's output unless a
    `console` callback received it."""

    trace: Path
    cpu: str
    instructions: int
    reason: StopReason  # EXIT (semihosting) or LIMIT (max_insns reached)
    exit: Exit | None
    stdout: bytes
    stderr: bytes


def record(
    program: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    max_insns: int = DEFAULT_MAX_INSNS,
    flow_only: bool = False,
    cpu: str | None = None,
    console: Callable[[int, bytes], None] | None = None,
    ram: Sequence[tuple[int, int]] = (),
) -> RecordResult:
    """Run `program` and write its Tarmac trace to `output` (default: PROGRAM with `.tarmac`).

    `cpu` names a model of `CPU_MODELS` (default: cortex-a15 for ARM, cortex-a72 for AArch64).
    `console(stream, data)` receives what the program writes (stream 1 stdout, 2 stderr).
    `ram` lists (address, size) of zero-filled memory to map besides the program's segments
    (with .bss) and the stack the recorder puts above them, for programs that expect RAM at
    fixed addresses.
    An output that is the program itself, or a file inside a store, is refused (UsageError).
    A fault (unmapped access, unsupported exception or semihosting call) raises
    CputraceError after the trace up to it has been written.
    """
    if max_insns < 1:
        raise ValueError("max_insns must be at least 1")
    loaded = load_program(program)
    model = choose_cpu(loaded.arch, cpu)
    trace = Path(output) if output is not None else Path(program).with_suffix(".tarmac")
    streams = {1: io.BytesIO(), 2: io.BytesIO()}
    sink = console or (lambda stream, data: streams[stream].write(data))
    fault = None
    with output_path(trace, [program]) as staged, open(staged, "w", buffering=1 << 20) as out:
        recorder = Recorder(
            loaded, model, out, flow_only=flow_only, max_insns=max_insns, console=sink, ram=ram
        )
        try:
            run = recorder.run()
        except CputraceError as exc:  # the trace up to the fault is written all the same
            fault = exc
    if fault is not None:
        raise fault
    return RecordResult(
        trace,
        model.name,
        run.instructions,
        run.reason,
        run.exit,
        streams[1].getvalue(),
        streams[2].getvalue(),
    )


__all__ = [
    "CPU_MODELS",
    "DEFAULT_CPUS",
    "DEFAULT_MAX_INSNS",
    "CpuChoiceError",
    "CpuModel",
    "Exit",
    "Program",
    "RecordResult",
    "StopReason",
    "choose_cpu",
    "load_program",
    "record",
]
