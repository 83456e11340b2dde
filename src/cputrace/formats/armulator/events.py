"""The kinds and names of ARMulator Tracer events (`E` lines) by number (decoder.py's docstring
says which numbers are which kind)."""

from __future__ import annotations

EVENTS: dict[int, tuple[str, str]] = {
    0x1: ("exception", "Reset"),
    0x2: ("exception", "UndefinedInstr"),
    0x3: ("exception", "SWI"),
    0x4: ("exception", "PrefetchAbort"),
    0x5: ("exception", "DataAbort"),
    0x6: ("exception", "AddrExceptn"),
    0x7: ("exception", "IRQ"),
    0x8: ("exception", "FIQ"),
    0x9: ("exception", "Breakpoint"),
    0xA: ("debug", "Watchpoint"),
    0x17: ("signal", "IRQSpotted"),
    0x18: ("signal", "FIQSpotted"),
    0x19: ("mode_change", "ModeChange"),
    0x20: ("signal", "Dependency"),
    0x10001: ("cache", "DLineFetch"),
    0x10002: ("cache", "ILineFetch"),
    0x10003: ("cache", "WBStall"),
    0x10004: ("ttw", "DTLBWalk"),
    0x10005: ("ttw", "ITLBWalk"),
    0x10006: ("cache", "LineWB"),
    0x10007: ("cache", "DCacheStall"),
    0x10008: ("cache", "ICacheStall"),
    0x20001: ("signal", "Full"),
    0x20002: ("signal", "Mispredict"),
    0x20003: ("signal", "Empty"),
    0x20004: ("signal", "Dependency"),
    0x50001: ("sysop", "AllLoaded"),
    0x50002: ("sysop", "Reset"),
    0x50003: ("sysop", "VectorsLoaded"),
    0x50005: ("sysop", "EndiannessChanged"),
    0x50006: ("sysop", "AboutToClose"),
    0x50007: ("sysop", "RouteLinks"),
    0x50008: ("sysop", "HighVecChanged"),
    0x60001: ("debug", "TraceLine"),
}
EVENT_RANGES = {0x1: "cache", 0x4: "debug", 0x5: "sysop", 0x6: "debug"}
"""The kinds of the numbers not in EVENTS, by number >> 16 (other numbers: `signal`)."""


def event_kind(number: int) -> tuple[str, str | None]:
    """The kind of event `number`, and its name when the Tracer's numbers give it one."""
    return EVENTS.get(number, (EVENT_RANGES.get(number >> 16, "signal"), None))
