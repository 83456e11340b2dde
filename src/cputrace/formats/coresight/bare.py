"""The registers of a buffer that comes without a snapshot, and where they come from.

A snapshot's device files give its sources' registers; a bare buffer needs them from the user,
either as options (`etmcr`, `etmidr`, `etmccer`, `source`, `buffer_format` in DecodeContext.options,
`--etmcr` ... on the command line) or in a small file named by `etm_config` (`--etm-config`):

    [etm]                   ; or the [regs] section of a snapshot device file
    etmcr = 0x10001860      ; required
    etmidr = 0x410CF250     ; default 0x4100F250: ETMv3.5, original branch encoding
    etmccer = 0x344008F2    ; default 0x10000000: 48-bit natural-binary timestamps
    trace_id = 0x10         ; the source to decode in a formatted buffer (default: all)
    format = coresight      ; coresight | dstream_coresight | source_data (default: sniffed)
    core = Cortex-A7        ; Cortex-M cores number exceptions the v7-M way

A JSON object with the same keys works too. Options given alongside a file override it.
A snapshot device file of an ETMv4 trace unit (`type=ETM4...`, [regs] TRCCONFIGR, TRCIDR0...)
makes the buffer an ETMv4 one (`etmv4.config.Etmv4Config`); `source` and `buffer_format` still
apply, the ETMv3 register options do not.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...coresight.ini import read_ini_sections
from ...coresight.registers import MAX_REGISTER, REGISTER
from ...coresight.snapshot import read_device
from ...coresight.sniff import LAYOUTS
from ...errors import CputraceError, TraceFormatError, UsageError
from ..base import Option, parse_int
from ..etmv3.config import DEFAULT_ETMCCER, DEFAULT_ETMIDR, ETMV3_MAJOR, EtmConfig, is_etmv3
from ..etmv4.config import PROTOCOLS as ETMV4_PROTOCOLS
from ..etmv4.config import Etmv4Config
from ..ptm.config import PTM_MAJOR, PtmConfig, is_ptm
from .options import BUFFER_FORMAT, ETM_CONFIG, ETMCCER, ETMCR, ETMIDR, SOURCE, TRACE_IDS

_REGISTER_KEYS = ("etmcr", "etmidr", "etmccer")
_FILE_KEYS = frozenset({*_REGISTER_KEYS, "trace_id", "etmtraceidr", "format", "core"})

BARE_ID = f"an ETMv3 or PTM ETMIDR (major version field, bits 11:8, {ETMV3_MAJOR} or {PTM_MAJOR})"
"""What a bare buffer's ETMIDR must be, as error messages say it."""


@dataclass(frozen=True)
class BareBufferSettings:
    """How to read a buffer that comes without a snapshot: registers, source and layout."""

    config: EtmConfig | PtmConfig | Etmv4Config  # by the ETMIDR's major version, or the device file
    layout: str | None  # None: sniff it
    config_file: str | None = None  # the file `etm_config` named, if any (for messages)


def _file_number(path: Path, key: str, value: Any, allowed: range, expected: str) -> int:
    """A number from a configuration file (an int, or text in any base Python reads), within
    `allowed`: else an error naming the file and the key."""
    number = parse_int(value)
    if number is None or number not in allowed:
        raise TraceFormatError(str(path), key, expected, str(value))
    return number


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The keys of an ETM configuration file: ini ([etm], or a snapshot device's [regs]) or JSON."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CputraceError(f"{path}: cannot read the ETM configuration: {exc}") from exc
    if text.lstrip().startswith("{"):
        try:
            loaded = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            line = getattr(exc, "lineno", 1)
            raise CputraceError(f"{path}:{line}: not valid JSON: {getattr(exc, 'msg', exc)}") from None
        if not isinstance(loaded, dict):
            raise CputraceError(f"{path}: expected a JSON object of ETM settings")
        found = {str(k).lower(): v for k, v in loaded.items()}
    else:
        found = {}
        for name, _, keys in read_ini_sections(path):
            for key, (_, value) in keys.items():
                key = key.split("(")[0].strip()
                value = value.split(";")[0].split("#")[0].strip()
                if name == "etm" or (name == "regs" and key in _FILE_KEYS):  # [regs]: a device file
                    found[key] = value
    unknown = sorted(set(found) - _FILE_KEYS)
    if unknown:
        known = ", ".join(sorted(_FILE_KEYS))
        raise CputraceError(f"{path}: unknown ETM settings {', '.join(unknown)} (known: {known})")
    return found


def bare_buffer_settings(buffer: str | os.PathLike[str], options: Mapping[str, Any]) -> BareBufferSettings:
    """Registers, source and layout for the bare buffer `buffer` from ingest options: the file
    `etm_config` names, overridden by the options given with it.

    Each value is checked as it is read and an error names it as the user wrote it: a bad
    option is bad usage (UsageError, naming the option), a bad file value bad input (naming
    the file and the key)."""
    config_file = ETM_CONFIG.read(options)
    if config_file is not None and (etmv4 := _etmv4_settings(config_file, options)) is not None:
        return etmv4
    from_file = read_config_file(config_file) if config_file else {}

    def register(option: Option, default: int | None) -> int | None:
        key = option.name
        if options.get(key) is not None:
            return option.read(options)
        if config_file is not None and from_file.get(key) is not None:
            return _file_number(config_file, key, from_file[key], range(MAX_REGISTER + 1), REGISTER)
        return default

    etmcr = register(ETMCR, None)
    if etmcr is None:
        raise CputraceError(
            f"{buffer}: a bare ETMv3 buffer needs the ETM's registers: give --etmcr (and --etmidr, "
            "--etmccer) or --etm-config FILE, or ingest the snapshot.ini that describes it"
        )
    etmidr = register(ETMIDR, DEFAULT_ETMIDR)
    if not is_etmv3(etmidr) and not is_ptm(etmidr):
        if options.get("etmidr") is not None:
            raise ETMIDR.error(options["etmidr"], BARE_ID)
        raise TraceFormatError(str(config_file), "etmidr", BARE_ID, str(from_file["etmidr"]))
    layout = BUFFER_FORMAT.read(options)
    if layout is None and config_file is not None and from_file.get("format") is not None:
        layout = str(from_file["format"]).strip().lower()
        if layout not in LAYOUTS:
            raise TraceFormatError(str(config_file), "format", f"one of {', '.join(LAYOUTS)}", layout)
    kind = PtmConfig if is_ptm(etmidr) else EtmConfig
    config = kind(
        etmcr, etmidr, register(ETMCCER, DEFAULT_ETMCCER), _trace_id(options, config_file, from_file),
        None if from_file.get("core") is None else str(from_file["core"]),
    )  # fmt: skip
    return BareBufferSettings(config, layout, None if config_file is None else str(config_file))


def _etmv4_settings(config_file: Path, options: Mapping[str, Any]) -> BareBufferSettings | None:
    """The settings of a bare ETMv4 buffer whose `etm_config` is an ETMv4 trace unit's snapshot
    device file; None when the file is not one."""
    try:
        with open(config_file, "rb") as f:
            head = f.read(64)
    except OSError as exc:
        raise CputraceError(f"{config_file}: cannot read the ETM configuration: {exc}") from exc
    if head.lstrip().startswith(b"{"):  # JSON: ETMv3 or PTM settings
        return None
    device = read_device(config_file)
    if device.protocol not in ETMV4_PROTOCOLS:
        return None
    given = [name for name in _REGISTER_KEYS if options.get(name) is not None]
    if given:
        raise UsageError(
            f"{config_file}: an ETMv4 device file gives the trace unit's registers; "
            f"{', '.join(f'option {name}' for name in given)}: ETMv3 and PTM only"
        )
    config = Etmv4Config.from_device(device)
    trace_id = SOURCE.read(options)
    if trace_id is not None:
        config = dataclasses.replace(config, trace_id=trace_id)
    return BareBufferSettings(config, BUFFER_FORMAT.read(options), str(config_file))


def _trace_id(options: Mapping[str, Any], config_file: Path | None, from_file: dict[str, Any]) -> int | None:
    """The trace ID to decode: the `source` option, else the file's trace_id (or the ID field,
    bits 6:0, of its ETMTRACEIDR register); None: every source."""
    trace_id = SOURCE.read(options)
    if trace_id is not None or config_file is None:
        return trace_id
    if from_file.get("trace_id") is not None:
        return _file_number(config_file, "trace_id", from_file["trace_id"], TRACE_IDS, SOURCE.values)
    if from_file.get("etmtraceidr") is not None:
        register = _file_number(config_file, "etmtraceidr", from_file["etmtraceidr"], range(MAX_REGISTER + 1),
                                REGISTER)  # fmt: skip
        return register & 0x7F
    return None
