"""Ingest says when the image a trace is walked through cannot be the program that ran: a walk
that is mostly gaps, or an image of another architecture (a counted warning; an error with
--strict). Checked on flow-only Tarmac and XScale buffers with the right and wrong images;
the number of losses the warning gives is counted again from the store."""

from __future__ import annotations

from pathlib import Path

import pytest
from paths import DATA

import cputrace
from cputrace.errors import CputraceError
from cputrace.ingest import ingest
from cputrace.record import record

CORPUS = Path(__file__).parent / "corpus"
WALK_LOSSES = "('no_code', 'undefined', 'mismatch', 'no_target', 'vector')"  # the walker's gap names


@pytest.fixture(scope="module")
def flow_a32(tmp_path_factory) -> Path:
    """calls-a32.elf's run as a flow-only Tarmac trace: FD/FI records to walk through an image."""
    out = tmp_path_factory.mktemp("flow") / "a32.tarmac"
    return record(CORPUS / "calls-a32.elf", out, flow_only=True).trace


def _ingest(trace: Path, image: str, out: Path, **options) -> cputrace.Trace:
    return cputrace.open(ingest([trace], out, images=[CORPUS / image], **options).store)


def _losses(trace: cputrace.Trace) -> int:
    query = f"SELECT count(*) AS n FROM events WHERE kind = 'trace_gap' AND name IN {WALK_LOSSES}"
    return trace.sql(query).column("n")[0].as_py()


def test_the_right_image_gives_no_warning(flow_a32, tmp_path):
    trace = _ingest(flow_a32, "calls-a32.elf", tmp_path / "right.ctrace", strict=True)
    assert trace.manifest["warnings"]["count"] == 0 and _losses(trace) == 0
    assert trace.manifest["counts"]["instructions"] > 20_000


@pytest.mark.parametrize(
    ("image", "says"),
    [
        ("calls-t32.elf", "the trace contradicts the program image"),  # same architecture, other program
        ("calls-a64.elf", "the image holds AArch64 code, not A32"),
    ],
)
def test_a_walk_that_is_mostly_gaps_is_a_warning(flow_a32, tmp_path, image, says):
    trace = _ingest(flow_a32, image, tmp_path / "wrong.ctrace")
    lost, instructions = _losses(trace), trace.manifest["counts"]["instructions"]
    assert lost > 10 * instructions
    warnings = trace.manifest["warnings"]
    assert warnings["count"] == 1
    (sample,) = warnings["samples"]
    assert sample.startswith(f"{flow_a32}:walk: the walk through the program image lost its place {lost:,} ")
    assert says in sample and "is --image the program that ran" in sample


def test_with_strict_a_wrong_image_is_an_error_and_no_store_is_left(flow_a32, tmp_path):
    store = tmp_path / "strict.ctrace"
    with pytest.raises(CputraceError, match="lost its place"):
        _ingest(flow_a32, "calls-t32.elf", store, strict=True)
    assert not store.exists()


def test_an_xscale_buffer_walked_through_an_aarch64_image(tmp_path):
    sample = DATA / "xscale" / "calls-armv5te-wrap.txt"
    right = _ingest(sample, "calls-armv5te.elf", tmp_path / "right.ctrace")
    assert right.manifest["warnings"]["count"] == 0 and right.manifest["counts"]["instructions"] > 2_000
    wrong = _ingest(sample, "calls-a64.elf", tmp_path / "wrong.ctrace")
    (warning,) = wrong.manifest["warnings"]["samples"]
    assert f"lost its place {_losses(wrong)} times in 0 instructions" in warning
    assert "the image holds AArch64 code, not A32" in warning


def test_an_image_of_another_architecture_beside_a_full_trace(tmp_path):
    """A full trace does not need the image, but one of another architecture is still wrong."""
    run = record(CORPUS / "calls-a64.elf", tmp_path / "a64.tarmac", max_insns=500).trace
    trace = _ingest(run, "calls-a32.elf", tmp_path / "a64.ctrace")
    assert trace.manifest["isas"] == ["A64"]
    assert trace.manifest["warnings"]["samples"] == [
        f"{run}:image: the image holds 32-bit Arm code (A32/T32) but the trace ran A64: "
        "is --image the program that ran?"
    ]
