"""Containers and helpers for the compiled (numba) kernels: hash tables, growing arrays, hashing.

How kernels are written here:
- A kernel is a `numba.njit(cache=True, nogil=True)` function over NumPy arrays; state that
  must survive a return to Python (a full output buffer, a block to decode) lives in arrays
  the caller keeps, so the kernel can stop anywhere and be called again to go on.
- Records and state have structured dtypes with named fields (`rec.address`, `state.rows`),
  one record array in place of a wall of parallel columns, so that a kernel takes a few
  bundles rather than dozens of arrays. A kernel's scalar state is a one-row record array
  (`state[0]` is a view the kernel writes through).
- Containers are plain arrays, never numba typed dicts or lists, so that the code using them
  loads from numba's cache: `pairtable` maps pairs of int64 keys to int64 values; `grown`
  makes room in an array outside the kernel, which returns to ask for it.
- Record arrays are copied and joined as opaque bytes (`records`), and the distinct tuples of
  key columns found by one sort (`distinct`), in the NumPy code around the kernels.
"""
