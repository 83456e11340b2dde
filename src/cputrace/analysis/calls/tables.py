"""The Arrow shapes of calls: frames, the flat call profile, callgrind's self costs and call edges,
and the frame spill; with the builders of their columns."""

from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

SITES = ("call", "entry", "exit", "resume")
SITE_FIELDS = ("seq", "time", "pc", "src")

FRAME_SCHEMA = pa.schema(
    [
        ("cpu", pa.uint16()),
        ("id", pa.int64()),
        ("parent", pa.int64()),
        ("depth", pa.int32()),
        ("function", pa.uint64()),
        ("name", pa.string()),
        *[
            (f"{site}_{name}", pa.uint64() if name == "pc" else pa.int64())
            for site in SITES
            for name in SITE_FIELDS
        ],
        ("index", pa.int64()),
        ("insns", pa.int64()),
        ("insns_self", pa.int64()),
        ("time", pa.int64()),
        ("time_self", pa.int64()),
        ("recursive", pa.bool_()),
    ]
)
"""One row per frame, in tree order (each frame before the frames it called), cores one after another.

A frame is one execution of a function: the outermost function of each core's trace is one
frame (one call), and every detected call another. `index` counts the core's instructions
before the frame's entry (in the window); `insns` runs from the entry up to (not including)
the resume site, or to the end of the trace for a frame that never returned; `time` likewise
in trace time (to the last instruction for a frame that never returned; null without time).
The `_self` costs leave out the frames it called."""

FUNCTION_SCHEMA = pa.schema(
    [
        ("cpu", pa.uint16()),
        ("address", pa.uint64()),
        ("name", pa.string()),
        ("calls", pa.int64()),
        ("insns_self", pa.int64()),
        ("insns", pa.int64()),
        ("time_self", pa.int64()),
        ("time", pa.int64()),
    ]
)
"""One row per (core, function entry address): the flat call profile. `calls` counts frames;
the inclusive costs count a recursive function's outer frames only, so no instruction is
counted twice."""

COST_SCHEMA = pa.schema(
    [
        ("cpu", pa.uint16()),
        ("function", pa.uint64()),
        ("pc", pa.uint64()),
        ("count", pa.int64()),
        ("time", pa.int64()),
    ]
)
"""Self costs per (core, function, instruction address): each instruction charged to the function
of the innermost frame it ran in."""

EDGE_SCHEMA = pa.schema(
    [("cpu", pa.uint16()), ("caller", pa.uint64()), ("site", pa.uint64()), ("callee", pa.uint64()),
     ("calls", pa.int64()), ("insns", pa.int64()), ("time", pa.int64())]
)  # fmt: skip
"""Calls per (core, caller, call site, callee) with their inclusive costs."""

SPILL_SCHEMA = pa.schema(
    [("cpu", pa.int64()), ("entry_idx", pa.int64()), ("end_idx", pa.int64())]
    + [(f"{site}_{name}", pa.int64()) for site in SITES for name in SITE_FIELDS]
)
"""A frame as detection ended it (frames.py spills these to disk): instruction indexes of its
entry and end, and its four sites."""


@numba.njit(cache=True, nogil=True)
def sum_by(keys, n_keys, values):
    """values summed per key (0 <= key < n_keys), as int64."""
    sums = np.zeros(n_keys, np.int64)
    for i in range(len(keys)):
        sums[keys[i]] += values[i]
    return sums


def function_rows(
    cpu: int, function: np.ndarray, addresses: np.ndarray, names: list[str], calls: np.ndarray,
    insns: np.ndarray, insns_self: np.ndarray, time: np.ndarray, time_self: np.ndarray, recursive: np.ndarray,
) -> pa.Table:  # fmt: skip
    """One core's FUNCTION_SCHEMA rows from rows of frames (or of contexts, `calls` frames each)
    numbered by `function` (into `addresses`); a recursive row's inclusive costs count in its
    outer namesake's."""
    n = len(addresses)
    outer = ~recursive
    counts = sum_by(function, n, calls)
    called = np.flatnonzero(counts)
    sums = {
        "insns_self": insns_self,
        "insns": np.where(outer, insns, 0),
        "time_self": time_self,
        "time": np.where(outer, time, 0),
    }
    columns = {
        "cpu": np.full(len(called), cpu, np.uint16),
        "address": addresses[called],
        "name": pa.array(names, pa.string()).take(called),
        "calls": counts[called],
        **{name: sum_by(function, n, values)[called] for name, values in sums.items()},
    }
    return pa.table(columns, schema=FUNCTION_SCHEMA)


def function_table(parts: list[pa.Table], has_time: bool) -> pa.Table:
    """The cores' function rows together, most inclusive instructions first (time null without time)."""
    if not parts:
        return FUNCTION_SCHEMA.empty_table()
    result = pa.concat_tables(parts)
    if not has_time:
        nulls = pa.nulls(result.num_rows, pa.int64())
        result = result.set_column(6, "time_self", nulls).set_column(7, "time", nulls)
    return result.sort_by([("cpu", "ascending"), ("insns", "descending"), ("address", "ascending")])


def frame_columns(
    cpu: int, ids: np.ndarray, parent: np.ndarray, depth: np.ndarray, function: np.ndarray, names: pa.Array,
    sites: dict[str, np.ndarray], index: np.ndarray, insns: np.ndarray, insns_self: np.ndarray,
    time: np.ndarray, time_self: np.ndarray, recursive: np.ndarray, has_time: bool,
) -> dict[str, pa.Array]:  # fmt: skip
    """FRAME_SCHEMA columns of frames: `parent` ids (-1: none), `function` entry addresses, `sites`
    (log.SITE records) per site name, seq -1 where a frame has none."""
    n = len(ids)
    no_time = np.full(n, not has_time)
    columns: dict[str, pa.Array] = {
        "cpu": pa.array(np.full(n, cpu, np.uint16)),
        "id": pa.array(ids.astype(np.int64)),
        "parent": pa.array(parent.astype(np.int64), pa.int64(), mask=parent < 0),
        "depth": pa.array(depth.astype(np.int32)),
        "function": pa.array(function.astype(np.uint64)),
        "name": names,
    }
    for site in SITES:
        values = sites[site]
        missing = values["seq"] < 0
        for name in SITE_FIELDS:
            type_ = pa.uint64() if name == "pc" else pa.int64()
            data = np.ascontiguousarray(values[name])
            data = data.view(np.uint64) if name == "pc" else data
            gone = missing | (no_time if name == "time" else False) | (name == "src") & (values[name] < 0)
            columns[f"{site}_{name}"] = pa.array(data, type_, mask=gone)
    columns["index"] = pa.array(index.astype(np.int64))
    columns["insns"] = pa.array(insns.astype(np.int64))
    columns["insns_self"] = pa.array(insns_self.astype(np.int64))
    columns["time"] = pa.array(time, pa.int64(), mask=no_time)
    columns["time_self"] = pa.array(time_self, pa.int64(), mask=no_time)
    columns["recursive"] = pa.array(recursive)
    return columns
