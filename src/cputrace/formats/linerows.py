"""Arrow helpers shared by the line decoders with a compiled fast path (formats/tarmac,
formats/armulator): strings out of a scanner's buffers, and its rows merged with those the
full grammar made of the other lines."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..inputs import prefetched
from ..regnames import canonical_register

T = TypeVar("T")
SCANS_AHEAD = 2
"""Chunks scanned on worker threads ahead of the one being assembled (the scanners release the
GIL: the machine's two cores both scan)."""


def scanned_ahead(
    chunks: Iterator[memoryview], scan: Callable[[memoryview], T]
) -> Iterator[tuple[memoryview, T]]:
    """Each chunk with what `scan` made of it, in input order, `scan` running on worker threads
    `SCANS_AHEAD` chunks ahead of the caller (chunks read ahead too, inputs.prefetched)."""
    with ThreadPoolExecutor(max_workers=SCANS_AHEAD) as pool:
        pending: deque[tuple[memoryview, Future[T]]] = deque()
        for chunk in prefetched(chunks):
            pending.append((chunk, pool.submit(scan, chunk)))
            if len(pending) > SCANS_AHEAD:
                done, scanned = pending.popleft()
                yield done, scanned.result()
        while pending:
            done, scanned = pending.popleft()
            yield done, scanned.result()


def numbered(table: pa.Table, first: int) -> pa.Table:
    """`table` with `src` as line numbers in the input, for a chunk whose first line is `first`
    (a scan numbers a chunk's lines from 0: it does not know where the chunk starts)."""
    at = table.schema.get_field_index("src")
    return table.set_column(at, "src", pc.add(table.column(at), pa.scalar(first, pa.int64())))


def strings(offsets: np.ndarray, buf: np.ndarray) -> pa.Array:
    """The strings a scanner wrote into `buf`, the i-th from offsets[i] to offsets[i + 1]."""
    n = len(offsets) - 1
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(buf))


def nonempty(values: pa.Array) -> pa.Array:
    """`values` with empty strings null."""
    return pc.if_else(pc.equal(pc.utf8_length(values), 0), pa.scalar(None, pa.string()), values)


def merged(fast: pa.Table, slow: pa.Table) -> pa.Table:
    """Fast-path and slow-path rows of one chunk, back in line order (`src`); the rows of one
    line stay in their order."""
    if slow.num_rows == 0:
        return fast
    if fast.num_rows == 0:
        return slow
    table = pa.concat_tables([fast, slow]).combine_chunks()
    src = table.column("src").to_numpy()
    if bool(np.all(src[1:] >= src[:-1])):
        return table
    return table.take(pa.array(np.argsort(src, kind="stable")))


def canonical_names(names: pa.DictionaryArray, nbytes: np.ndarray) -> pa.DictionaryArray:
    """Map printed register names to canonical ones (some depend on the value's width)."""
    printed = names.dictionary.to_pylist()
    variants = [canonical_register(p, 4) for p in printed] + [canonical_register(p, 8) for p in printed]
    unique, inverse = np.unique(np.array(variants, dtype=object), return_inverse=True)
    indices = names.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    chosen = inverse[indices + len(printed) * (nbytes > 4)]
    return pa.DictionaryArray.from_arrays(
        pa.array(chosen.astype(np.int32)), pa.array(unique.tolist(), pa.string())
    )
