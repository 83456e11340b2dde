"""Call sums per calling context, folded while detection runs, against the call tree built from
every frame: the same flat profile, stacks, call edges and self costs, whatever the chunking."""

from __future__ import annotations

import pytest
import test_calls
from calltree_oracle import CallTree
from hypothesis import given, settings
from hypothesis import strategies as st
from test_calls import CALCULATORS, IMAGES, TTU, build

from cputrace.analysis.calls.contexts import CallSums, CallSumsCollector
from cputrace.analysis.calls.log import Method
from cputrace.image import load_elf

stores = test_calls.stores  # the session fixture of ingested shared traces


def _stacks(result: CallTree | CallSums, weight: str) -> list[tuple]:
    return sorted((cpu, tuple(path), total) for cpu, path, total in result.stacks(weight))


def _expected_edges(tree: CallTree) -> list[tuple]:
    """(cpu, caller, site, callee, calls, insns, time) per call edge, in the order edges first appear."""
    frames = tree.frames.to_pylist()
    by_id = {f["id"]: f for f in frames}
    edges: dict[tuple, list[int]] = {}
    for frame in frames:
        if frame["parent"] is None:
            continue
        key = (frame["cpu"], by_id[frame["parent"]]["function"], frame["call_pc"], frame["function"])
        sums = edges.setdefault(key, [0, 0, 0])
        sums[0] += 1
        sums[1] += frame["insns"]
        sums[2] += frame["time"] or 0
    return [(*key, *sums) for key, sums in edges.items()]


def _expected_self_costs(tree: CallTree, pcs: list[int], times: list[int]) -> dict[tuple, tuple[int, int]]:
    """(function, pc) -> (count, time) charging each instruction to the innermost frame holding it."""
    frames = tree.frames.to_pylist()
    costs: dict[tuple, list[int]] = {}
    for index, pc in enumerate(pcs):
        inside = [f for f in frames if f["index"] <= index < f["index"] + f["insns"]]
        innermost = max(inside, key=lambda f: f["depth"])
        sums = costs.setdefault((innermost["function"], pc), [0, 0])
        sums[0] += 1
        sums[1] += times[index + 1] - times[index] if index + 1 < len(times) else 0
    return {key: tuple(value) for key, value in costs.items()}


def _crossing_stream(draw) -> tuple[list[int], list[tuple[int, int, int]]]:
    """pcs and (seq, lr-or-sp, value) writes of a random execution where calls keep sp (callees may
    push) and a return may go to any outstanding frame, leaving the ones above it to return
    later (crossing call/return pairs when they kept the same sp) or never."""
    pcs: list[int] = []
    writes: list[tuple[int, int, int]] = []
    frames: list[tuple[int, int]] = []  # (return address, sp at the call)
    pc, sp = 0x1000, 0x8000
    for _ in range(draw(st.integers(20, 300))):
        action = draw(st.sampled_from(["step", "step", "call", "call", "push", "return", "return", "jump"]))
        seq = len(pcs)
        pcs.append(pc)
        if action == "call" and len(frames) < 20:
            frames.append((pc + 4, sp))
            writes.append((seq, 0, pc + 4))
            pc = draw(st.sampled_from([0x2000, 0x3000, 0x4000]))
        elif action == "push":
            sp -= 16
            writes.append((seq, 1, sp))
            pc += 4
        elif action == "return" and frames:
            chosen = draw(st.integers(0, len(frames) - 1)) if draw(st.booleans()) else len(frames) - 1
            pc, returned_sp = frames.pop(chosen)
            if returned_sp != sp:
                sp = returned_sp
                writes.append((seq, 1, sp))
        elif action == "jump":
            pc = draw(st.integers(0x1000, 0x5000)) & ~3
        else:
            pc += 4
    return pcs, writes


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_sums_are_the_call_trees_whatever_the_chunks(data):
    pcs, writes = _crossing_stream(data.draw)
    cuts = data.draw(st.lists(st.integers(0, 400), max_size=6))
    tree = test_calls.fed(pcs, writes, [], Method.REGISTERS).tree()
    collector = CallSumsCollector(self_costs=True)
    test_calls.fed(pcs, writes, cuts, Method.REGISTERS, collector)
    sums = collector.finish(None)
    assert sums.functions() == tree.functions()
    assert _stacks(sums, "insns") == _stacks(tree, "insns")
    assert _stacks(sums, "time") == _stacks(tree, "time")
    edges = sums.call_edges()
    assert [tuple(row.values()) for row in edges.to_pylist()] == _expected_edges(tree)
    costs = {(r["function"], r["pc"]): (r["count"], r["time"]) for r in sums.self_costs().to_pylist()}
    assert costs == _expected_self_costs(tree, pcs, [10 * i for i in range(len(pcs))])


@pytest.mark.parametrize("method", [Method.AUTO, Method.ISA])
@pytest.mark.parametrize("name", sorted(CALCULATORS))
def test_sums_of_real_traces(stores, name, method):
    trace = stores(*TTU, "samples", f"{name}.tarmac")
    tree = build(trace, CALCULATORS[name], method)
    image = load_elf(IMAGES / CALCULATORS[name])
    sums = CallSums.for_trace(trace, method=method, image=image, self_costs=True)
    assert sums.methods == tree.methods
    functions = tree.functions()
    assert sums.functions() == functions
    costs = sums.self_costs().group_by("function").aggregate([("count", "sum")])
    charged = dict(zip(*costs.select(["function", "count_sum"]).to_pydict().values(), strict=True))
    own = dict(zip(*functions.select(["address", "insns_self"]).to_pydict().values(), strict=True))
    assert charged == own  # every instruction charged once, to the function whose self cost it is
    assert _stacks(sums, "insns") == _stacks(tree, "insns")
    assert _stacks(sums, "time") == _stacks(tree, "time")
    edges = sums.call_edges()
    assert [tuple(row.values()) for row in edges.to_pylist()] == _expected_edges(tree)
