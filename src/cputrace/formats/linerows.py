"""Arrow helpers shared by the line decoders with a compiled fast path (formats/tarmac,
formats/armulator): strings out of a scanner's buffers, and its rows merged with those the
full grammar made of the other lines."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..regnames import canonical_register


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
