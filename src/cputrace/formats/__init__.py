"""Input formats: what each is called, how it is recognised, the options its decoder takes,
and where that decoder lives.

Sniffers are small and load with this module; a decoder (and the compiled code, capstone or
image readers it needs) loads only when an input of its format is decoded, so starting a
command does not pay for every format.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import TraceFormatError, UsageError
from ..plugins import Plugin, registry
from .armulator import sniff as armulator_sniff
from .base import Batch, DecodeContext, Decoder, Option
from .coresight import options as coresight_options
from .coresight import sniff as coresight_sniff
from .leon import buffers as leon_buffers
from .leon import options as leon_options
from .tarmac import options as tarmac_options
from .tarmac import sniff as tarmac_sniff
from .xscale import options as xscale_options
from .xscale import sniff as xscale_sniff


@dataclass(frozen=True, slots=True)
class Format(Plugin):
    """An input format; its code is its decoder class."""

    sniff: Callable[[bytes], int] | None = None  # how sure (0-100); None: never sniffed, name it
    options: tuple[Option, ...] = ()  # what `--option NAME=VALUE` may give its decoder
    aliases: tuple[str, ...] = ()  # former names, still taken: scripts and old stores give them


FORMATS: dict[str, Format] = registry(
    Format(
        "tarmac", "Arm Tarmac text traces (Fast Models, RTL, cycle models, gem5)",
        "cputrace.formats.tarmac.decoder:TarmacDecoder", tarmac_sniff.sniff, tarmac_options.OPTIONS,
    ),
    Format(
        "armulator", "ARMulator Tracer output (ARM ADS/SDT): I, M/B, R and E lines",
        "cputrace.formats.armulator.decoder:ArmulatorDecoder", armulator_sniff.sniff,
    ),
    Format(
        "coresight", "Arm CoreSight ETMv3, PTM and ETMv4 trace: snapshots (snapshot.ini) and trace buffers",
        "cputrace.formats.coresight.decoder:CoresightDecoder", coresight_sniff.sniff,
        coresight_options.OPTIONS, aliases=("etmv3",),
    ),
    Format(
        "xscale", "Intel XScale trace buffers (raw, text, OpenOCD xscale dump_trace); needs --image",
        "cputrace.formats.xscale.decoder:XscaleDecoder", xscale_sniff.sniff, xscale_options.OPTIONS,
    ),
    Format(
        "leon-itb", "LEON3/4 (GR740) instruction trace buffer, raw 16-byte lines (DUMP.json)",
        "cputrace.formats.leon.decoder:LeonItbDecoder", None, leon_options.OPTIONS,
    ),
    Format(
        "leon-ahb", "GR740 AHB trace buffer, raw 16-byte lines (settings in DUMP.json)",
        "cputrace.formats.leon.decoder:LeonAhbDecoder", None, leon_options.OPTIONS,
    ),
    Format(
        "leon-text", "LEON/GR740 trace buffer lines as four hex words, with # leon-trace headers",
        "cputrace.formats.leon.decoder:LeonTextDecoder", leon_buffers.text_score, leon_options.OPTIONS,
    ),
)  # fmt: skip

ALIASES: dict[str, str] = {alias: entry.name for entry in FORMATS.values() for alias in entry.aliases}
"""Each former name of a format, and the format's name now."""

SNIFF_THRESHOLD = 30

_loaded: dict[str, Decoder] = {}


def format_name(name: str) -> str:
    """The name of the format `name` names, a former name taken for the name now (UsageError
    for a name no format has: the caller's to change)."""
    name = ALIASES.get(name, name)
    if name not in FORMATS:
        known = ", ".join(sorted(FORMATS))
        raise UsageError(f"unknown format {name!r} (known: {known})")
    return name


def get_decoder(name: str) -> Decoder:
    """The decoder of the format called `name` (or a former name of it), imported on first use
    (UsageError for a name no format has)."""
    name = format_name(name)
    if name not in _loaded:
        _loaded[name] = FORMATS[name].load()()
    return _loaded[name]


def sniff(head: bytes, path: str) -> Decoder:
    """The decoder of the format most confident about `head`; a clear error when none is."""
    if not head.strip():
        raise TraceFormatError(path, "0", "a trace", "an empty input")
    scores = sorted(((f.sniff(head), f.name) for f in FORMATS.values() if f.sniff), reverse=True)
    best_score, best = scores[0]
    if best_score < SNIFF_THRESHOLD:
        known = ", ".join(sorted(FORMATS))
        raise TraceFormatError(
            path, "0", f"a recognisable trace format ({known}); name one with --format",
            head[:60].decode("latin-1"),
        )
    return get_decoder(best)


def check_options(options: Mapping[str, Any], formats: Collection[str]) -> dict[str, Any]:
    """`options` as the decoders of `formats` take them, each value read by its `Option` (None:
    not given). A key none of these formats takes, or a value its option cannot take, is bad
    usage (UsageError) naming what is allowed: checked before anything is decoded."""
    formats = list(dict.fromkeys(format_name(name) for name in formats))
    declared = {option.name: option for name in formats for option in FORMATS[name].options}
    checked = {}
    for key, value in options.items():
        if key not in declared:
            raise UsageError(_unknown_option(key, formats, declared))
        if value is not None:
            checked[key] = declared[key].parse(value)
    return checked


def _unknown_option(key: str, formats: Collection[str], declared: Mapping[str, Option]) -> str:
    which = f"format{'s' if len(formats) > 1 else ''} {', '.join(sorted(formats))}"
    takes = f"options {', '.join(declared)} (`cputrace formats` describes them)" if declared else "no options"
    said = f"{which} take{'' if len(formats) > 1 else 's'} {takes}"
    if key == "images":
        said += "; a program image is given with --image PATH (in Python: ingest(..., images=[PATH]))"
    return f"unknown option {key!r}: {said}"


__all__ = [
    "ALIASES", "FORMATS", "Batch", "DecodeContext", "Decoder", "Format", "Option",
    "check_options", "format_name", "get_decoder", "sniff",
]  # fmt: skip
