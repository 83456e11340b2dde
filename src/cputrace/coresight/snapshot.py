"""CoreSight trace snapshots: the directory format of Arm debuggers and the OpenCSD test data.

- `snapshot.ini`: `[device_list]` names one .ini file per device, `[trace] metadata=` names
  the trace description (usually trace.ini).
- device files: `[device]` name, class (`core`, `trace_source`, ...), type (`Cortex-A7`,
  `ETM3.5`, `PTM1.1`, `ITM`...); `[regs]` as `NAME(0xOFFSET)=value`; cores add `[dump]`
  memory sections, which `cputrace.image` loads.
- trace.ini: `[trace_buffers] buffers=` lists buffer sections (name, file, format);
  `[source_buffers]` maps trace sources to buffers, `[core_trace_sources]` cores to sources.

Names are matched without regard to case, as the ini reader lower-cases keys. What a decode
needs is checked when it is asked for (`core_of`, `buffer_of`), so a snapshot whose other
devices or buffers are unusable can still be decoded; every problem is an error naming the
file, the line where there is one, and what was expected.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ..errors import CputraceError, TraceFormatError
from ..image import Image
from ..image.files import names_a_file
from .dumps import DumpEntry, dump_entries, load_snapshot_dumps, present_dumps
from .ini import Section, read_ini_sections
from .sniff import LAYOUTS, SNAPSHOT_INI

MAX_REGISTER = (1 << 64) - 1  # registers are 64 bits at most (AArch64 cores); a trace unit's are 32

Sections = list[tuple[str, int, dict[str, tuple[int, str]]]]


@dataclass(frozen=True)
class Device:
    """One device file: a core, a trace source, a funnel..."""

    name: str
    kind: str  # the [device] class
    type: str
    path: Path
    registers: dict[str, int]  # upper-case names without the (0xOFFSET) suffix
    dump_sections: tuple[Section, ...] = field(default=(), repr=False)  # its [dump...] sections, as read

    @cached_property
    def dumps(self) -> list[DumpEntry]:
        """The memory dumps its file lists, checked when first asked for (a core no source
        traces needs none)."""
        return dump_entries(self.path, self.dump_sections)

    @cached_property
    def dumped(self) -> tuple[tuple[str, int, int | None, int], ...]:
        """What identifies the memory its dumps give: each dump's file (resolved), address,
        length and offset; the same for cores whose dumps are the same (an SMP snapshot's cores
        usually dump one kernel image)."""
        folder = self.path.parent
        return tuple((str((folder / d.file).resolve()), d.address, d.length, d.offset) for d in self.dumps)

    @property
    def protocol(self) -> str:
        """The type without its minor version: ETM3, ETM4, PTM1, ITM, STM..."""
        return self.type.split(".")[0].upper()


@dataclass(frozen=True)
class TraceBuffer:
    name: str
    path: Path
    format: str  # coresight, dstream_coresight or source_data (checked by Snapshot.buffer_of)
    ini: str = ""  # the trace.ini that lists it, and the lines of its format= and file= (messages)
    format_line: int = 0
    file_line: int = 0


@dataclass(frozen=True)
class Snapshot:
    path: Path  # the snapshot.ini
    devices: tuple[Device, ...]  # in [device_list] order
    buffers: tuple[TraceBuffer, ...]
    source_buffers: dict[str, str]  # source name -> buffer name (lower case)
    core_sources: dict[str, str]  # core name -> source name (lower case)
    # each core's memory once loaded (`memory`), with its dumps whose files are not there
    _memories: dict[Path, tuple[Image, list[DumpEntry]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def cores(self) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.kind.lower() == "core")

    @property
    def sources(self) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.kind.lower() == "trace_source")

    def device(self, name: str) -> Device | None:
        return next((d for d in self.devices if d.name.lower() == name.lower()), None)

    def core_of(self, source: Device) -> Device | None:
        """The core a trace source traces ([core_trace_sources]); None when none is named, or
        the core named is not among the devices. A device named that is not a core (an
        empty device file, a trace source) is an error."""
        for core, traced in self.core_sources.items():
            if traced == source.name.lower():
                device = self.device(core)
                if device is not None and device.kind.lower() != "core":
                    named = f"[core_trace_sources] names {device.name} the core of {source.name}"
                    got = f"class={device.kind}" if device.kind else "no class= (an empty or partial file)"
                    raise TraceFormatError(str(device.path), "[device]", f"class=core ({named})", got)
                return device
        return None

    def cpu_of(self, core: Device) -> int:
        """The core's number: its position among the snapshot's cores."""
        for i, c in enumerate(self.cores):
            if c.name.lower() == core.name.lower():
                return i
        raise CputraceError(f"{core.path}: {core.name} is not one of {self.path.name}'s core devices")

    def buffer_of(self, source: Device) -> TraceBuffer | None:
        """The buffer holding a source's trace, its format and file checked: the one
        [source_buffers] lists for it; for a source it does not list, the only buffer when no
        other source is listed for that one (a DS-5 snapshot lists the sources that traced and
        leaves the others' device files in); None otherwise."""
        name = self.source_buffers.get(source.name.lower())
        only = self.buffers[0] if len(self.buffers) == 1 else None
        if name is None and only is not None and only.name.lower() not in self.source_buffers.values():
            buffer: TraceBuffer | None = only
        else:
            buffer = next((b for b in self.buffers if b.name.lower() == (name or "").lower()), None)
        if buffer is not None:
            if buffer.format not in LAYOUTS:
                expected = f"format= {', '.join(LAYOUTS[:-1])} or {LAYOUTS[-1]}"
                raise TraceFormatError(buffer.ini, str(buffer.format_line), expected, buffer.format)
            if not names_a_file(buffer.path):
                expected = f"file= naming the buffer's file ({buffer.path} is not a file)"
                raise TraceFormatError(buffer.ini, str(buffer.file_line), expected, buffer.path.name)
        return buffer

    def memory(self, core: Device, missing: Callable[[DumpEntry], None] | None = None) -> Image:
        """The memory the core's device file dumps. A dump whose file is not there is an error;
        given `missing`, it is handed to it (each time) and left out, and the files are read
        once however often the memory is asked for."""
        if missing is None:
            return load_snapshot_dumps(core.path, core.dumps)
        if core.path not in self._memories:
            present, absent = present_dumps(core.path, core.dumps)
            self._memories[core.path] = (load_snapshot_dumps(core.path, present), absent)
        image, absent = self._memories[core.path]
        for entry in absent:
            missing(entry)
        return image


def _section(ini: Path, sections: Sections, name: str) -> dict[str, str]:
    """The keys of the section called `name` (values only)."""
    return {key: value for key, (_, value) in _numbered_section(ini, sections, name)[1].items()}


def _numbered_section(ini: Path, sections: Sections, name: str) -> tuple[int, dict[str, tuple[int, str]]]:
    """The line and the keys (with their lines) of the section called `name`; 0 and none when
    there is no such section, an error naming the second when there are two (which one is
    meant cannot be told)."""
    found = [(number, keys) for section, number, keys in sections if section == name]
    if len(found) > 1:
        raise TraceFormatError(str(ini), str(found[1][0]), f"[{name}] once (line {found[0][0]} has it)")
    return found[0] if found else (0, {})


def _register_value(path: Path, number: int, key: str, text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise TraceFormatError(str(path), str(number), f"{key}= a number", text) from None
    if not 0 <= value <= MAX_REGISTER:
        expected = f"{key}= a register value from 0 to 0x{MAX_REGISTER:X}"
        raise TraceFormatError(str(path), str(number), expected, text)
    return value


def read_device(path: Path) -> Device:
    sections = read_ini_sections(path)
    device = _section(path, sections, "device")
    registers = {}
    for name, _, keys in sections:
        if name == "regs":
            for key, (number, value) in keys.items():
                register = key.split("(")[0].strip().upper()
                if register in registers:  # `ETMCR(id:0x0)=` and `ETMCR=`, or two [regs] sections
                    raise TraceFormatError(str(path), str(number), f"{register} once in [regs]", key)
                registers[register] = _register_value(path, number, key, value)
    dumps = tuple(section for section in sections if section[0].startswith("dump"))
    return Device(
        device.get("name", path.stem), device.get("class", ""), device.get("type", ""), path, registers, dumps
    )


def _listed_file(ini: Path, key: str, line: int, name: str) -> Path:
    """The file `key=name` on `line` of `ini` names, beside it; an error naming the line when
    there is no such file."""
    path = ini.parent / name
    if not names_a_file(path):
        raise TraceFormatError(str(ini), str(line), f"{key}= naming a file in {ini.parent}", name)
    return path


def _need(path: Path, keys: dict[str, str], key: str, section: str) -> str:
    if key not in keys:
        raise CputraceError(f"{path}: [{section}] has no {key}=")
    return keys[key]


def read_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read `snapshot.ini` (or the directory holding it), its device files and trace metadata."""
    path = Path(path)
    if path.is_dir():
        path = path / SNAPSHOT_INI
    if not path.is_file():
        raise CputraceError(f"{path}: no snapshot.ini here")
    sections = read_ini_sections(path)
    folder = path.parent
    listed = _numbered_section(path, sections, "device_list")[1]
    devices = tuple(read_device(_listed_file(path, key, line, file)) for key, (line, file) in listed.items())
    metadata = _numbered_section(path, sections, "trace")[1].get("metadata")
    if metadata is None:
        return Snapshot(path, devices, (), {}, {})
    trace_ini = _listed_file(path, "metadata", *metadata)
    trace = read_ini_sections(trace_ini)
    listed = _need(trace_ini, _section(trace_ini, trace, "trace_buffers"), "buffers", "trace_buffers")
    buffers = []
    for section in (name.strip().lower() for name in listed.split(",") if name.strip()):
        line, numbered = _numbered_section(trace_ini, trace, section)
        keys = {key: value for key, (_, value) in numbered.items()}
        buffers.append(
            TraceBuffer(
                keys.get("name", section),
                folder / _need(trace_ini, keys, "file", section),
                keys.get("format", "coresight").lower(),
                str(trace_ini),
                numbered.get("format", (line, ""))[0],
                numbered["file"][0],
            )
        )
    return Snapshot(
        path,
        devices,
        tuple(buffers),
        _source_buffers(trace_ini, trace, buffers),
        {k: v.lower() for k, v in _section(trace_ini, trace, "core_trace_sources").items()},
    )


def _source_buffers(trace_ini: Path, trace: Sections, buffers: list[TraceBuffer]) -> dict[str, str]:
    """[source_buffers], each naming one of the buffers: a source whose buffer is not there
    would be taken for one the snapshot does not list, and given the only buffer."""
    names = {buffer.name.lower() for buffer in buffers}
    mapped = {}
    for source, (line, name) in _numbered_section(trace_ini, trace, "source_buffers")[1].items():
        if name.lower() not in names:
            listed = ", ".join(buffer.name for buffer in buffers)
            expected = f"{source}= one of the buffers [trace_buffers] lists ({listed})"
            raise TraceFormatError(str(trace_ini), str(line), expected, name)
        mapped[source] = name.lower()
    return mapped
