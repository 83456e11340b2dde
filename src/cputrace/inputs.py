"""Reading inputs: transparent decompression, hashing while reading, and line-aligned chunks.

No input is read whole: decoders see bounded chunks, and the hash of the raw file is computed
from the same reads, so fingerprinting costs no extra pass.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import mmap
import os
import queue
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import xxhash

from .errors import CputraceError, TraceFormatError

CHUNK_BYTES = 16 << 20
MAX_LINE_BYTES = 4 << 20
"""The longest line a line-based decoder accepts. Memory stays bounded whatever the input: a
line that runs on past this without a newline is cut to its first MAX_LINE_BYTES + 1 bytes
(the rest is read and dropped), so the decoder sees it is too long and rejects it."""
SKIP_BYTES = 1 << 20

T = TypeVar("T")

_MAGICS: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bz2"),
)


def compression_of(head: bytes) -> str | None:
    for magic, name in _MAGICS:
        if head.startswith(magic):
            return name
    return None


@dataclass(frozen=True)
class Fingerprint:
    """What identifies an input's content for cache reuse."""

    path: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> Fingerprint:
        st = os.stat(path)
        return cls(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


class _Tally:
    """The hash of the raw bytes read so far, and progress reports of their count."""

    def __init__(self, on_read: Callable[[int], None] | None) -> None:
        self.hash = xxhash.xxh3_128()
        self._on_read = on_read

    def update(self, data: memoryview) -> None:
        self.hash.update(data)
        if self._on_read:
            self._on_read(len(data))


class _HashingReader(io.RawIOBase):
    """Raw file reader that tallies every byte it hands out."""

    def __init__(self, raw: BinaryIO, tally: _Tally) -> None:
        self._raw = raw
        self._tally = tally

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        n = self._raw.readinto(buffer)
        if n:
            self._tally.update(memoryview(buffer)[:n])
        return n or 0


class InputFile:
    """One input file, opened for streaming reads of its (decompressed) content."""

    def __init__(
        self, path: str | os.PathLike[str], on_read: Callable[[int], None] | None = None
    ) -> None:
        self.path = str(path)
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise CputraceError(
                f"{path}: not a regular file (a pipe, a device or a folder): an input is read more "
                "than once (the format is sniffed, then decoded), so save it to a file first "
                "(gzip, zstd, xz and bzip2 files are read as they are)"
            )
        self.fingerprint = Fingerprint.of(path)
        with open(path, "rb") as f:
            self.head_raw = f.read(8)
        self.compression = compression_of(self.head_raw)
        self.max_line = MAX_LINE_BYTES
        self._on_read = on_read
        self._tally: _Tally | None = None

    @property
    def size(self) -> int:
        return self.fingerprint.size

    def open(self, report: bool = True) -> BinaryIO:
        """A fresh stream of the decompressed content; hashing (and progress) restart with it."""
        raw = open(self.path, "rb")  # noqa: SIM115 - owned by the returned stream
        self._tally = _Tally(self._on_read if report else None)
        buffered = io.BufferedReader(_HashingReader(raw, self._tally), buffer_size=1 << 20)
        if self.compression == "gzip":
            return gzip.GzipFile(fileobj=buffered)  # type: ignore[return-value]
        if self.compression == "zstd":
            import zstandard  # here: most inputs and every image are not zstd

            return zstandard.ZstdDecompressor().stream_reader(buffered)  # type: ignore[return-value]
        if self.compression == "xz":
            return lzma.LZMAFile(buffered)  # type: ignore[return-value]
        if self.compression == "bz2":
            return bz2.BZ2File(buffered)  # type: ignore[return-value]
        return buffered  # type: ignore[return-value]

    def head(self, n: int = 64 << 10) -> bytes:
        """The first n bytes of the decompressed content, for sniffing."""
        stream = self.open(report=False)
        try:
            return read_exactly(stream, n, self.path)
        finally:
            stream.close()

    def line_chunks(
        self, chunk_bytes: int | None = None, byte_range: tuple[int, int] | None = None
    ) -> Iterator[memoryview]:
        """The content in chunks of whole lines (the last may lack its newline).

        An uncompressed file is mapped a chunk at a time (no copy, no fresh memory to fault
        in); a compressed one is decompressed into a buffer per chunk. A line that runs on
        past `max_line` bytes is cut (see MAX_LINE_BYTES). `byte_range` (start, stop), both
        at the start of a line, reads only those bytes of an uncompressed file (a part of a
        split input); `content_hash` is then theirs.
        """
        if byte_range is not None and self.compression is not None:
            raise ValueError(f"{self.path}: a compressed input is read whole, not in byte ranges")
        if self.compression is not None:
            stream = self.open()
            try:
                yield from line_chunks(stream, self.path, chunk_bytes, self.max_line)
            finally:
                stream.close()
            return
        self._tally = _Tally(self._on_read)
        with open(self.path, "rb") as file:
            start, stop = byte_range or (0, os.fstat(file.fileno()).st_size)
            yield from _mapped_line_chunks(
                file.fileno(), chunk_bytes or CHUNK_BYTES, self.max_line, self._tally, start, stop
            )

    def content_hash(self) -> str | None:
        """XXH3-128 of the raw file, once it has been read to its end."""
        return self._tally.hash.hexdigest() if self._tally else None


def read_exactly(stream: BinaryIO, n: int, path: str) -> bytes:
    """Read up to n bytes, turning decompression failures into input errors."""
    parts = []
    remaining = n
    with _input_errors(path):
        while remaining > 0:
            block = stream.read(remaining)
            if not block:
                break
            parts.append(block)
            remaining -= len(block)
    return b"".join(parts)


def read_into(stream: BinaryIO, buffer: memoryview, path: str) -> int:
    """Fill `buffer` from `stream` (less only at its end); decompression failures are input errors."""
    filled = 0
    with _input_errors(path):
        while filled < len(buffer):
            got = stream.readinto(buffer[filled:])  # type: ignore[attr-defined]
            if not got:
                break
            filled += got
    return filled


@contextlib.contextmanager
def _input_errors(path: str) -> Iterator[None]:
    """Decompression failures (a corrupt or truncated compressed input) as input errors."""
    try:
        yield
    except (OSError, EOFError, lzma.LZMAError, *_zstd_errors()) as exc:
        raise TraceFormatError(path, "0", "a readable compressed stream", str(exc)) from exc


def _zstd_errors() -> tuple[type[Exception], ...]:
    """zstandard's error, once a zstd input has imported the module (only then can it be raised)."""
    zstandard = sys.modules.get("zstandard")
    return (zstandard.ZstdError,) if zstandard is not None else ()


def line_chunks(
    stream: BinaryIO, path: str, chunk_bytes: int | None = None, max_line: int | None = None
) -> Iterator[memoryview]:
    """Split a stream into chunks of whole lines (the last may lack its newline).

    Each chunk is read straight into its own buffer: only the partial line at its end is
    copied, to the start of the next. A line longer than a chunk grows the buffer, up to
    `max_line` bytes (MAX_LINE_BYTES): a line that runs on past that is cut.
    """
    size = chunk_bytes or CHUNK_BYTES
    cap = MAX_LINE_BYTES if max_line is None else max_line
    carry = b""  # the start of a line (never a newline in it)
    while True:
        if len(carry) > cap:  # a line over the cap, its newline not read yet
            rest = _after_newline(stream, path)
            yield memoryview(carry[: cap + 1] + (b"" if rest is None else b"\n"))
            if rest is None:
                return
            cut = rest.rfind(b"\n") + 1
            if cut:
                yield memoryview(rest)[:cut]
            carry = rest[cut:]
            continue
        chunk = bytearray(max(size, 2 * len(carry)))
        chunk[: len(carry)] = carry
        end = len(carry) + read_into(stream, memoryview(chunk)[len(carry) :], path)
        if end < len(chunk):  # the end of the input
            if end:
                yield memoryview(chunk)[:end]
            return
        cut = chunk.rfind(b"\n") + 1
        carry = bytes(memoryview(chunk)[cut:])  # all of it when a single line fills the buffer
        if cut:
            yield memoryview(chunk)[:cut]


def _after_newline(stream: BinaryIO, path: str) -> bytes | None:
    """Read on to the next newline: what came after it in the last block, or None at the end."""
    block = bytearray(SKIP_BYTES)
    while True:
        got = read_into(stream, memoryview(block), path)
        at = block.find(b"\n", 0, got)
        if at >= 0:
            return bytes(block[at + 1 : got])
        if got < len(block):
            return None


_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)  # populate: one call, not a fault a page


def _mapped(fd: int, start: int, end: int) -> tuple[mmap.mmap, int]:
    """A read-only mapping of the file from `start` to `end`, and where `start` is in it."""
    base = start - start % mmap.ALLOCATIONGRANULARITY
    window = mmap.mmap(fd, end - base, flags=_MAP_FLAGS, prot=mmap.PROT_READ, offset=base)
    return window, start - base


def _mapped_line_chunks(
    fd: int, chunk_bytes: int, max_line: int, tally: _Tally, start: int, total: int
) -> Iterator[memoryview]:
    """Whole-line chunks of a plain file from `start` to `total`, each a view of its own
    mapping (unmapped when dropped)."""
    while start < total:
        want = chunk_bytes
        while True:
            end = min(total, start + want)
            window, at = _mapped(fd, start, end)
            cut = end - start if end == total else window.rfind(b"\n", at) + 1 - at
            if cut > 0 or end - start > max_line:
                break
            window.close()
            want *= 2  # a single line longer than the window: map more of it
        if cut > 0:
            chunk = memoryview(window)[at : at + cut]
            tally.update(chunk)
            yield chunk
            start += cut
            continue
        head = window[at : at + max_line + 1]  # a line over the cap: its start, copied
        window.close()
        start, newline = _skip_mapped_line(fd, start, total, chunk_bytes, tally)
        yield memoryview(head + b"\n" if newline else head)


def _skip_mapped_line(fd: int, start: int, total: int, window_bytes: int, tally: _Tally) -> tuple[int, bool]:
    """Tally the rest of the line at `start`: (where the next line starts, whether a newline ended it)."""
    while start < total:
        window, at = _mapped(fd, start, min(total, start + window_bytes))
        newline = window.find(b"\n", at)
        stop = len(window) if newline < 0 else newline + 1
        with memoryview(window) as view:
            tally.update(view[at:stop])
        window.close()
        start += stop - at
        if newline >= 0:
            return start, True
    return start, False


def prefetched(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Run `items` in a background thread, `depth` items ahead of the consumer.

    Reading, decompressing and hashing then overlap with decoding. Exceptions raised while
    producing an item are re-raised in the consumer at that item.
    """
    slots: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                slots.put((True, item))
            slots.put((False, None))
        except BaseException as exc:
            slots.put((False, exc))

    worker = threading.Thread(target=produce, daemon=True)
    worker.start()
    try:
        while True:
            ok, item = slots.get()
            if not ok:
                if item is not None:
                    raise item
                return
            yield item
    finally:
        stop.set()
        while worker.is_alive():
            with contextlib.suppress(queue.Empty):
                slots.get(timeout=0.05)
