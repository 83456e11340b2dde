"""Property tests: no input makes the Tarmac decoder crash.

Lenient mode never raises on any bytes except a broken compressed stream (a documented input
error); strict mode raises only TraceFormatError. Inputs are
built from real tokens of the grammar, mutated, so the scanner and parser meet near-misses.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cputrace.errors import TraceFormatError
from cputrace.formats.base import DecodeContext
from cputrace.formats.tarmac.decoder import TarmacDecoder
from cputrace.inputs import InputFile, compression_of

TOKENS = [
    "0", "12", "clk", "ns", "ps", "us", "1.5us", "cpu0", "cpu1", "IT", "IS", "ES", "IF", "(1)",
    "(00008000:e3a00001)", "00008000", "0000800a:00000000800a_NS", "e3a00001", "4770", "--------",
    "A", "T", "O", "X", "T16", "svc_s", ":", "el3h_s:", "MOV", "r0,#1", "CCFAIL", "R", "r0", "X0",
    "V0<127:64>", "Q0", "(USR)", "00000001", "0123_4567", "xxxxxxxx", "MR4", "MW8", "MR16",
    "MU4_ADD", "MNR4O__I", "R08", "W04", "(ABORTED)", "LD", "ST", "........", "....00##", "S:00",
    "E", "EXC", "[0x00]", "Reset", "CoreEvent_RESET", "BR", "(00000020)", "CACHE", "LINE", "TTW",
    "TLB", "FILL", "DC", "CISW", "TRANSFER", "\xa0", "\t", "é", "\x00",
]  # fmt: skip

line = st.lists(st.sampled_from(TOKENS), min_size=0, max_size=12).map(" ".join)
mutated = st.tuples(line, st.integers(0, 80), st.sampled_from(["", "_", ":", "(", ")", "-", "0"])).map(
    lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :]
)
traces = st.lists(st.one_of(line, mutated), max_size=30).map(lambda ls: "\n".join(ls).encode())


def decode(path: Path, strict: bool) -> int:
    rows = 0
    for batch in TarmacDecoder().decode(InputFile(path), DecodeContext(strict=strict)):
        rows += sum(t.num_rows for t in batch.values())
    return rows


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(traces, st.binary(max_size=400)))
def test_lenient_never_raises(tmp_path: Path, data: bytes) -> None:
    """Lenient mode keeps every record; only a broken compressed stream is an input error."""
    path = tmp_path / "f.tarmac"
    path.write_bytes(data)
    if compression_of(data) is None:
        decode(path, strict=False)
        return
    try:
        decode(path, strict=False)
    except TraceFormatError as exc:
        assert "f.tarmac:0: expected a readable compressed stream" in str(exc)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=traces)
def test_strict_raises_only_format_errors(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "f.tarmac"
    path.write_bytes(data)
    try:
        decode(path, strict=True)
    except TraceFormatError as exc:
        assert "f.tarmac:" in str(exc)
