"""The exporters `cputrace export --to NAME` knows: name -> the function writing the file.

Writers are imported only when used, so listing them costs nothing. To add one, write a
function `write_x(request: ExportRequest) -> None` that streams to `request.output`, and add
an `Exporter` entry to EXPORTERS below. `Exporter.write` runs it on a temporary file that
replaces the target only once it is complete (`output.output_path`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..analysis.calls.log import Method
from ..image import Image
from ..plugins import Plugin, registry
from ..store.trace import Trace
from ..store.window import WHOLE_TRACE, Window
from .output import output_path


@dataclass(frozen=True)
class ExportRequest:
    """What a writer is asked to do: which trace, which part of it, where to."""

    trace: Trace
    output: Path
    window: Window = WHOLE_TRACE
    image: Image | None = None
    table: str | None = None  # csv/parquet: which table
    clock: str | None = None  # call-based exports: "time" or "insns" (None: time when the trace has it)
    method: Method = Method.AUTO  # call detection
    target: Path | None = None  # the file `output` becomes, when that is a temporary file
    inputs: tuple[Path, ...] = ()  # files read besides the trace (the images): never replaced

    @property
    def sources(self) -> list[Path]:
        """Every file the export is made from (the trace's inputs and `inputs`), which its
        output files must not replace (`output.check_output_file`)."""
        return [*self.trace.input_paths, *self.inputs]

    @property
    def destination(self) -> Path:
        """The file the export ends up in: what names the files written beside it."""
        return self.target or self.output


@dataclass(frozen=True, slots=True)
class Exporter(Plugin):
    """An export format; its code is the function writing it."""

    suffix: str  # of the files it writes

    def load(self) -> Callable[[ExportRequest], None]:
        """The writer, its module imported on first use."""
        return Plugin.load(self)

    def write(self, request: ExportRequest) -> None:
        """The export of `request`, whole or not at all: an existing file is replaced only on success."""
        with output_path(request.output, request.sources) as staged:
            self.load()(dataclasses.replace(request, output=staged, target=request.output))


EXPORTERS: dict[str, Exporter] = registry(
    Exporter("tarmac", "Fast-Models-style Tarmac text, from any input format",
             "cputrace.export.tables:write_tarmac_file", ".tarmac"),
    Exporter("csv", "one table (--table) as CSV with a header row",
             "cputrace.export.tables:write_csv", ".csv"),
    Exporter("parquet", "one table (--table) as Parquet",
             "cputrace.export.tables:write_parquet", ".parquet"),
    Exporter("folded", "folded call stacks with self weights (flamegraph.pl, inferno)",
             "cputrace.export.stacks:write_folded", ".folded"),
    Exporter("speedscope", "speedscope JSON: an evented profile per core",
             "cputrace.export.stacks:write_speedscope", ".speedscope.json"),
    Exporter("chrome", "Chrome trace-event JSON: call slices per core (chrome://tracing, Perfetto UI)",
             "cputrace.export.timeline:write_chrome", ".json"),
    Exporter("perfetto", "Perfetto protobuf trace: call slices per core, instruction counters",
             "cputrace.export.perfetto:write_perfetto", ".perfetto-trace"),
    Exporter("callgrind", "Callgrind profile for KCachegrind: costs per instruction/line, calls",
             "cputrace.export.callgrind:write_callgrind", ".callgrind"),
    Exporter("vcd", "VCD waveform: pc, function (--image), registers, memory bus per core",
             "cputrace.export.vcd:write_vcd", ".vcd"),
    Exporter("lcov", "lcov tracefile of instruction/line/function/branch coverage (needs --image)",
             "cputrace.export.lcov:write_lcov_file", ".info"),
    Exporter("cobertura", "Cobertura XML coverage report (needs --image)",
             "cputrace.export.cobertura:write_cobertura_file", ".xml"),
)  # fmt: skip
