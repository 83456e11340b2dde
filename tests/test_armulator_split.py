"""The ARMulator split's scan step (formats/armulator/split.py) against a regular expression of
what the line parser takes for the start of an instruction record.

The regular expression is written here from the parser's reading of a line (`str.strip`, then
`T <hex>` and the first word split off at whitespace, a raw or UTF-8 no-break space being a
space): the compiled count must find exactly its lines, whatever bytes surround them.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_armulator_scan import _TRACE
from test_partitioned import armulator_trace

from cputrace import inputs
from cputrace.formats.armulator.split import count_range, instruction_line_starts
from cputrace.formats.base import DecodeContext
from cputrace.inputs import InputFile

SEED = Path(__file__).parent / "data" / "armulator" / "seed_example.trc"

_SPACE = rb"(?:[ \t\v\f\r\xa0]|\xc2\xa0)"
INSTRUCTION_LINE = re.compile(rb"^%s*(?:T%s+[0-9A-Fa-f]+%s+)?I[TS]%s" % ((_SPACE,) * 4), re.MULTILINE)


def assert_counted_as_the_regex_does(path: Path, data: bytes, chunk_bytes: int) -> None:
    """The scan step's counts over the whole file and over two ranges split at a line start,
    and the starts it finds, against the regular expression's."""
    path.write_bytes(data)
    starts, newlines = instruction_line_starts(data)
    assert starts.tolist() == [match.start() for match in INSTRUCTION_LINE.finditer(data)]
    assert newlines == data.count(b"\n")
    middle = data.find(b"\n", len(data) // 2) + 1 or len(data)
    with mock.patch.object(inputs, "CHUNK_BYTES", chunk_bytes):
        for first, stop in ((0, len(data)), (0, middle), (middle, len(data))):
            count = count_range(InputFile(path), DecodeContext(), (first, stop))
            part = data[first:stop]
            assert count.lines == part.count(b"\n")
            assert count.instructions == len(INSTRUCTION_LINE.findall(part))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One file reused by every example (function-scoped tmp_path does not mix with @given)."""
    return tmp_path_factory.mktemp("split") / "trace.trc"


def _mutants(data: bytes, count: int, seed: int) -> list[bytes]:
    """`data` with a few bytes at line starts replaced, inserted or deleted: whitespace the
    parser takes and whitespace it does not, time prefixes, broken words."""
    rng = random.Random(seed)
    pieces = [
        b" ", b"\t", b"\r", b"\x0b", b"\x0c", b"\xa0", b"\xc2\xa0", b"\xc2", b"\x1c", b"\x85", b"T 10 ",
        b"T\xa0", b"T  ", b"T 1G ", b"I", b"IT", b"IS", b"IT\n", b"\n", b"", b"IX ",
    ]  # fmt: skip
    lines = [0] + [m.end() for m in re.finditer(rb"\n", data)]
    mutants = []
    for _ in range(count):
        mutant = bytearray(data)
        for at in sorted(rng.sample(lines, min(8, len(lines))), reverse=True):
            at = min(at + rng.randrange(4), len(mutant))
            mutant[at : at + rng.randrange(3)] = rng.choice(pieces)
        mutants.append(bytes(mutant))
    return mutants


@pytest.mark.parametrize("chunk_bytes", [64, 1 << 20])
def test_the_count_of_real_and_generated_traces_and_their_mutants_is_the_regexs(
    tmp_path: Path, chunk_bytes: int
) -> None:
    seed = SEED.read_bytes()
    generated = armulator_trace(600)
    assert len(INSTRUCTION_LINE.findall(generated)) > 550  # the oracle finds what it should
    for index, data in enumerate([seed, generated, *_mutants(seed, 40, 1), *_mutants(generated, 10, 2)]):
        assert_counted_as_the_regex_does(tmp_path / f"{index}.trc", data, chunk_bytes)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TRACE, st.sampled_from([1, 16, 1 << 20]))
def test_the_count_of_any_lines_is_the_regexs(scratch: Path, data: bytes, chunk_bytes: int) -> None:
    scratch.write_bytes(data)
    assume(InputFile(scratch).compression is None)  # a compressed input is decoded whole
    assert_counted_as_the_regex_does(scratch, data, chunk_bytes)


@pytest.mark.parametrize(
    "line",
    [
        b"IT 8000 e1a00000", b"  IS\t8000", b"\xc2\xa0IT\xa08000", b"\x0b\x0cIT\r8000", b"T 1A IT 8000",
        b"T\xc2\xa0ff\x0bIS 1", b"IT", b"IT\n", b"ITX 8000", b"T IT 8000", b"T1 IT 8000", b"T 1IT 8000",
        b"T 1 1 IT 8000", b"\x1cIT 8000", b"\xc2IT 8000", b"IT\xc2 8000", b"IT\xc2", b"t 1 IT 8000",
    ],
)  # fmt: skip
def test_line_starts_at_the_edges(tmp_path: Path, line: bytes) -> None:
    """Whitespace the parser takes (VT, FF, no-break spaces) and does not (a file separator, a
    lone UTF-8 lead byte), the time prefix's shapes, a word at the line's end."""
    for data in (line, line + b"\n", b"MI\n" + line + b"\nIT 1 0000\n"):
        assert_counted_as_the_regex_does(tmp_path / "t.trc", data, 1 << 20)
