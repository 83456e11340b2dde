"""Line-aligned chunks: no byte lost or moved, and decoders give the same rows whatever the chunk size."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import xxhash
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from paths import DATA, shared

from cputrace import inputs
from cputrace.ingest import ingest
from cputrace.inputs import InputFile, compression_of, line_chunks
from cputrace.model import TABLES
from cputrace.store.manifest import table_path


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=40),
    last_newline=st.booleans(),
    chunk_bytes=st.integers(1, 64),
)
def test_chunks_are_whole_lines_and_lose_nothing(
    lines: list[bytes], last_newline: bool, chunk_bytes: int
) -> None:
    data = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    chunks = [bytes(c) for c in line_chunks(io.BytesIO(data), "mem", chunk_bytes)]
    assert b"".join(chunks) == data
    assert all(chunk.endswith(b"\n") for chunk in chunks[:-1])
    assert all(chunks)


@settings(max_examples=100, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=9000).map(lambda b: b.replace(b"\n", b"")), max_size=12),
    last_newline=st.booleans(),
    chunk_bytes=st.sampled_from([1, 4096, 5000, 20000]),
)
def test_mapped_chunks_are_whole_lines_and_hash_the_file(
    tmp_path_factory, lines: list[bytes], last_newline: bool, chunk_bytes: int
) -> None:
    """Plain files are mapped a window at a time (page-aligned, grown for long lines)."""
    data = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    assume(compression_of(data) is None)  # a plain file
    path = tmp_path_factory.mktemp("mapped") / "lines.txt"
    path.write_bytes(data)
    source = InputFile(path)
    chunks = [bytes(c) for c in source.line_chunks(chunk_bytes)]
    assert b"".join(chunks) == data
    assert all(chunk.endswith(b"\n") for chunk in chunks[:-1])
    assert source.content_hash() == xxhash.xxh3_128(data).hexdigest()


def _tables(store: Path) -> dict[str, list[dict]]:
    return {name: pq.read_table(table_path(store, name)).to_pylist() for name in TABLES}


@pytest.mark.parametrize(
    "trace",
    [
        DATA / "tarmac" / "parsertest.txt",
        "tarmac-trace-utilities/samples/calculator-aarch64-es-ld-st-style.tarmac",
        "tarmac-trace-utilities/samples/calculator-aarch32-fastmodel.tarmac",
    ],
)
def test_tarmac_rows_do_not_depend_on_chunk_size(tmp_path: Path, monkeypatch, trace) -> None:
    """Line numbers, continuation lines, times and seqs carry across chunk boundaries."""
    path = trace if isinstance(trace, Path) else shared(*trace.split("/"))
    whole = ingest([path], tmp_path / "whole.ctrace", format="tarmac").store
    monkeypatch.setattr(inputs, "CHUNK_BYTES", 4096)
    small = ingest([path], tmp_path / "small.ctrace", format="tarmac").store
    assert path.stat().st_size > 3 * 4096
    assert _tables(small) == _tables(whole)


def test_armulator_line_numbers_do_not_depend_on_chunk_size(tmp_path: Path, monkeypatch) -> None:
    path = DATA / "armulator" / "seed_example.trc"
    whole = ingest([path], tmp_path / "whole.ctrace", format="armulator").store
    monkeypatch.setattr(inputs, "CHUNK_BYTES", 64)
    small = ingest([path], tmp_path / "small.ctrace", format="armulator").store
    assert _tables(small) == _tables(whole)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")), max_size=30),
    last_newline=st.booleans(),
    chunk_bytes=st.integers(1, 64),
    cap=st.integers(1, 80),
)
def test_lines_past_the_cap_may_be_cut_never_lost(
    tmp_path_factory, lines: list[bytes], last_newline: bool, chunk_bytes: int, cap: int
) -> None:
    """Every line comes through in order, whole or (past the cap) cut to cap + 1 bytes; the
    mapped file's hash still covers every byte."""
    data = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    assume(compression_of(data) is None)
    path = tmp_path_factory.mktemp("capped") / "lines.txt"
    path.write_bytes(data)
    source = InputFile(path)
    source.max_line = cap
    expected = data.split(b"\n")
    for chunks in (
        [bytes(c) for c in line_chunks(io.BytesIO(data), "mem", chunk_bytes, cap)],
        [bytes(c) for c in source.line_chunks(chunk_bytes)],
    ):
        assert all(chunk.endswith(b"\n") for chunk in chunks[:-1])
        got = b"".join(chunks).split(b"\n")
        assert len(got) == len(expected)
        for line, original in zip(got, expected, strict=True):
            assert line == original or (len(original) > cap and line == original[: cap + 1])
    assert source.content_hash() == xxhash.xxh3_128(data).hexdigest()


class _Zeros(io.RawIOBase):
    """`size` zero bytes then `tail`, made as they are read (never held whole)."""

    def __init__(self, size: int, tail: bytes) -> None:
        self.left, self.tail = size, tail

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        if self.left:
            n = min(self.left, len(view))
            view[:n] = bytes(n)
            self.left -= n
            return n
        n = min(len(self.tail), len(view))
        view[:n] = self.tail[:n]
        self.tail = self.tail[n:]
        return n


def test_a_line_without_end_is_read_in_bounded_buffers() -> None:
    """A 64 MiB line (a compressed input with no newline) never grows the buffer past twice
    the cap: the line is cut and the rest read and dropped; the lines after it come whole."""
    cap, chunk = 1 << 20, 1 << 18
    stream = io.BufferedReader(_Zeros(64 << 20, b"\nnext line\nlast"), buffer_size=1 << 16)
    chunks = [bytes(c) for c in line_chunks(stream, "mem", chunk, cap)]
    assert max(len(c) for c in chunks) <= 2 * cap + 1
    assert b"".join(chunks) == bytes(cap + 1) + b"\nnext line\nlast"
