"""Call costs summed per calling context while detection runs, so memory follows the distinct
contexts and the undecided potential calls, never the number of calls.

The sums are those of the call tree (calltree.py) without its frames. Each core keeps a trie
of calling contexts: a node is (parent node, function, call site), with the calls, inclusive
instructions and time, and first entry of the frames that ran in that context. A frame's
self cost is its inclusive cost less its children's, so per context
`self = inclusive - inclusive of the child contexts`, computed at the end.

With the lr/sp rule a potential call is known to be a call only when it returns, so each
undecided potential call is a marker node of its own in the trie, the frames inside it
counted under it. When it returns it becomes a call: the marker merges into its context's
node (frames inside it that are still undecided are cut at its end, as the call tree cuts
them). When it dies (never returns), the marker is spliced out: its subtree merges into its
parent. Either way the trie stays as if the decision had been known from the start, and each
node is merged away at most once. Under ISA semantics calls are known at their entry: no
markers.

Self costs per instruction (callgrind) charge each instruction to the innermost open frame:
a real node's function directly, or the marker's own sums of (pc -> count, time), handed on
to its function or its parent when it is decided.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa

from ..image import Image
from ..kernels import pairtable
from ..kernels.growth import grown
from ..store.chunks import Instructions, read_steps
from ..store.trace import Trace
from ..store.window import WHOLE_TRACE, Window
from .calls import (
    E_INDEX,
    E_KIND,
    E_REF,
    EV_DEATH,
    EV_OPEN,
    P_END_IDX,
    P_EXIT,
    P_RESUME,
    P_SLOT,
    PC,
    S_CALL,
    S_ENTRY,
    S_ENTRY_IDX,
    SEQ,
    ST_EVENTS,
    ST_FIRST,
    ST_N,
    ST_PREV,
    ST_SLOTS,
    TIME,
    CallDetector,
    CoreDetector,
    Method,
)
from .calltree import context_stacks, distinct_names, function_names, function_rows, function_table, sum_by

# trie node columns
N_PARENT, N_EDGE, N_MARKER, N_CHILD, N_NEXT, N_PREV, N_CALLS, N_INSNS, N_TIME, N_FIRST, N_OWN = range(11)
NODE_WIDTH = 11
# per slot (potential call or open ISA frame): its node, and where it was cut (-1: not cut)
I_NODE, I_CUT, I_CUT_TIME = 0, 1, 2
SLOT_INFO_WIDTH = 3
# rows of self costs of instructions run while a marker was innermost: marker, pc, sums, next row
A_NODE, A_PC, A_COUNT, A_TIME, A_NEXT = range(5)
ACC_WIDTH = 5
# scalar state
(
    C_NODES, C_FREE, C_EDGES, C_DEPTH, C_ACC, C_ACC_FREE, C_OWN, C_ROOT, C_PREV_NODE, C_PREV_PC,
    C_PREV_TIME, C_PREV_TIMED, C_EVENT, C_LIVE_NODES, C_LIVE_ACC, C_POS,
) = range(16)  # fmt: skip
COUNTERS_WIDTH = 16

_NO_SITE = -1
_SPARE = 256
_NEVER = np.iinfo(np.int64).max


@numba.njit(cache=True, nogil=True)
def _edge(edges, edge_counts, edge_rows, cs, function, site):
    """The number of (function, call site), numbered on first sight."""
    row = pairtable.find(edges, function, site)
    if row >= 0:
        return edges[row, 2]
    e = cs[C_EDGES]
    cs[C_EDGES] = e + 1
    edge_rows[e, 0] = function
    edge_rows[e, 1] = site
    pairtable.put(edges, edge_counts, function, site, e)
    return e


@numba.njit(cache=True, nogil=True)
def _link(nodes, node, parent):
    nodes[node, N_PARENT] = parent
    nodes[node, N_PREV] = -1
    head = nodes[parent, N_CHILD]
    nodes[node, N_NEXT] = head
    if head >= 0:
        nodes[head, N_PREV] = node
    nodes[parent, N_CHILD] = node


@numba.njit(cache=True, nogil=True)
def _unlink(nodes, node):
    before, after = nodes[node, N_PREV], nodes[node, N_NEXT]
    if before >= 0:
        nodes[before, N_NEXT] = after
    else:
        nodes[nodes[node, N_PARENT], N_CHILD] = after
    if after >= 0:
        nodes[after, N_PREV] = before


@numba.njit(cache=True, nogil=True, inline="always")
def _take_slot(cs, free, count, table, next_column):
    """A row of `table` from its free list (linked through `next_column`), else the next unused."""
    slot = cs[free]
    if slot >= 0:
        cs[free] = table[slot, next_column]
    else:
        slot = cs[count]
        cs[count] = slot + 1
    return slot


@numba.njit(cache=True, nogil=True)
def _new_node(nodes, cs, parent, edge, marker):
    node = _take_slot(cs, C_FREE, C_NODES, nodes, N_NEXT)
    cs[C_LIVE_NODES] += 1
    nodes[node, :] = 0
    nodes[node, N_EDGE] = edge
    nodes[node, N_MARKER] = marker
    nodes[node, N_CHILD] = -1
    nodes[node, N_FIRST] = _NEVER
    nodes[node, N_OWN] = -1
    if parent >= 0:
        _link(nodes, node, parent)
    else:
        nodes[node, N_PARENT] = -1
        nodes[node, N_NEXT] = -1
        nodes[node, N_PREV] = -1
    return node


@numba.njit(cache=True, nogil=True)
def _free_node(nodes, cs, node):
    nodes[node, N_NEXT] = cs[C_FREE]
    nodes[node, N_PARENT] = -2
    cs[C_FREE] = node
    cs[C_LIVE_NODES] -= 1


@numba.njit(cache=True, nogil=True)
def _context(nodes, children, child_counts, cs, parent, edge):
    """The (real) child context of `parent` for `edge`, made on first use."""
    row = pairtable.find(children, parent, edge)
    if row >= 0:
        return children[row, 2]
    node = _new_node(nodes, cs, parent, edge, 0)
    pairtable.put(children, child_counts, parent, edge, node)
    return node


@numba.njit(cache=True, nogil=True)
def _add_frame(nodes, node, insns, time, entry):
    nodes[node, N_CALLS] += 1
    nodes[node, N_INSNS] += insns
    nodes[node, N_TIME] += time
    nodes[node, N_FIRST] = min(nodes[node, N_FIRST], entry)


@numba.njit(cache=True, nogil=True)
def _merge(nodes, children, child_counts, cs, source, target, work):
    """Move the sums and subtree of `source` (already unlinked) into `target`, freeing it and
    every node of its subtree that has a namesake under `target`."""
    work[0, 0] = source
    work[0, 1] = target
    top = 1
    while top > 0:
        top -= 1
        src, dst = work[top, 0], work[top, 1]
        for column in (N_CALLS, N_INSNS, N_TIME):
            nodes[dst, column] += nodes[src, column]
        nodes[dst, N_FIRST] = min(nodes[dst, N_FIRST], nodes[src, N_FIRST])
        child = nodes[src, N_CHILD]
        while child >= 0:
            following = nodes[child, N_NEXT]
            if nodes[child, N_MARKER]:
                _link(nodes, child, dst)
            else:
                edge = nodes[child, N_EDGE]
                pairtable.remove(children, child_counts, pairtable.find(children, src, edge))
                row = pairtable.find(children, dst, edge)
                if row >= 0:
                    work[top, 0] = child
                    work[top, 1] = children[row, 2]
                    top += 1
                else:
                    pairtable.put(children, child_counts, dst, edge, child)
                    _link(nodes, child, dst)
            child = following
        _free_node(nodes, cs, src)


@numba.njit(cache=True, nogil=True)
def _charge(
    nodes, edge_rows, acc, acc_table, acc_counts, own, own_counts, own_sums, cs, node, pc, count, time
):
    """Self cost of instructions run with `node` innermost: to its function if it is a call, to
    the marker's own rows while it is undecided."""
    if not nodes[node, N_MARKER]:
        function = edge_rows[nodes[node, N_EDGE], 0]
        row = pairtable.find(own, function, pc)
        if row < 0:
            slot = cs[C_OWN]
            cs[C_OWN] = slot + 1
            pairtable.put(own, own_counts, function, pc, slot)
        else:
            slot = own[row, 2]
        own_sums[slot, 0] += count
        own_sums[slot, 1] += time
        return
    row = pairtable.find(acc_table, node, pc)
    if row >= 0:
        slot = acc_table[row, 2]
    else:
        slot = _take_slot(cs, C_ACC_FREE, C_ACC, acc, A_NEXT)
        cs[C_LIVE_ACC] += 1
        acc[slot, A_NODE] = node
        acc[slot, A_PC] = pc
        acc[slot, A_COUNT] = 0
        acc[slot, A_TIME] = 0
        acc[slot, A_NEXT] = nodes[node, N_OWN]
        nodes[node, N_OWN] = slot
        pairtable.put(acc_table, acc_counts, node, pc, slot)
    acc[slot, A_COUNT] += count
    acc[slot, A_TIME] += time


@numba.njit(cache=True, nogil=True)
def _hand_on(nodes, edge_rows, acc, acc_table, acc_counts, own, own_counts, own_sums, cs, marker, target):
    """Charge a decided marker's self costs to `target` (its node if a call, its parent if not)."""
    slot = nodes[marker, N_OWN]
    while slot >= 0:
        following = acc[slot, A_NEXT]
        pc = acc[slot, A_PC]
        pairtable.remove(acc_table, acc_counts, pairtable.find(acc_table, marker, pc))
        _charge(nodes, edge_rows, acc, acc_table, acc_counts, own, own_counts, own_sums, cs, target, pc,
                acc[slot, A_COUNT], acc[slot, A_TIME])  # fmt: skip
        acc[slot, A_NEXT] = cs[C_ACC_FREE]
        cs[C_ACC_FREE] = slot
        cs[C_LIVE_ACC] -= 1
        slot = following
    nodes[marker, N_OWN] = -1


@numba.njit(cache=True, nogil=True)
def _top(chain, info, cs):
    """The innermost open node: the latest open slot that is still undecided, or the root."""
    depth = cs[C_DEPTH]
    while depth > 0 and info[chain[depth - 1], I_NODE] < 0:
        depth -= 1
    cs[C_DEPTH] = depth
    return info[chain[depth - 1], I_NODE] if depth > 0 else cs[C_ROOT]


@numba.njit(cache=True, nogil=True)
def _fits(table, counts, more):
    """Whether a hash table takes `more` entries, its tombstones dropped in place if that helps."""
    if 2 * (counts[0] + counts[1] + more) <= len(table):
        return True
    if 2 * (counts[0] + more) > len(table) // 2:  # mostly live: let it grow instead
        return False
    pairtable.purge(table, counts)
    return True


@numba.njit(cache=True, nogil=True)
def _room(
    nodes, children, child_counts, edges, edge_counts, edge_rows, chain, acc, acc_table, acc_counts, own,
    own_counts, own_sums, cs, work, spare,
):  # fmt: skip
    """Whether every array has room for one more event, merges included, or `spare` instructions."""
    live = cs[C_LIVE_NODES] + 2
    if cs[C_NODES] + 2 >= len(nodes) or live >= len(work) or cs[C_EDGES] + 2 >= len(edge_rows):
        return False
    if cs[C_DEPTH] + 2 >= len(chain) or not _fits(children, child_counts, live):
        return False
    accs = cs[C_LIVE_ACC] + spare
    if (
        not _fits(edges, edge_counts, 2)
        or cs[C_ACC] + spare >= len(acc)
        or not _fits(acc_table, acc_counts, accs)
    ):
        return False
    return cs[C_OWN] + accs < len(own_sums) and _fits(own, own_counts, accs)


@numba.njit(cache=True, nogil=True)
def _fold_events(
    events, n_events, stop, slots, pairs, pc, time, timed, first_index, charging, root_pc,
    nodes, children, child_counts, edges, edge_counts, edge_rows, chain, info,
    acc, acc_table, acc_counts, own, own_counts, own_sums, cs, work, by_registers,
):  # fmt: skip
    """Fold the decision log up to (not including) the events at instruction index `stop` into
    the trie and, if `charging`, the chunk's instructions into the self costs. Returns False
    when an array must grow first; called again, it resumes where it stopped."""
    if cs[C_ROOT] < 0:
        cs[C_ROOT] = _new_node(nodes, cs, -1, _edge(edges, edge_counts, edge_rows, cs, root_pc, _NO_SITE), 0)
    positions = len(pc) if charging else 0
    budget = 0  # steps that can be taken before the arrays are checked again
    while True:
        if budget <= 2:  # an event needs 2 rows to spare besides its merges
            if not _room(
                nodes, children, child_counts, edges, edge_counts, edge_rows, chain, acc, acc_table,
                acc_counts, own, own_counts, own_sums, cs, work, _SPARE,
            ):  # fmt: skip
                return False
            budget = _SPARE
        budget -= 1
        position = cs[C_POS]
        index = first_index + position if position < positions else stop
        if cs[C_PREV_NODE] >= 0 and position < positions:  # the previous instruction, now its time is known
            spent = time[position] - cs[C_PREV_TIME] if timed and cs[C_PREV_TIMED] else 0
            _charge(nodes, edge_rows, acc, acc_table, acc_counts, own, own_counts, own_sums, cs,
                    cs[C_PREV_NODE], cs[C_PREV_PC], 1, spent)  # fmt: skip
            cs[C_PREV_NODE] = -1
            continue
        e = cs[C_EVENT]
        if e < n_events and events[e, E_INDEX] <= index and events[e, E_INDEX] < stop:
            _event(events[e, E_KIND], events[e, E_REF], slots, pairs, nodes, children, child_counts, edges,
                   edge_counts, edge_rows, chain, info, acc, acc_table, acc_counts, own, own_counts,
                   own_sums, cs, work, by_registers)  # fmt: skip
            cs[C_EVENT] = e + 1
            budget = 0  # an event may take any room: check before the next step
            continue
        if position >= positions:
            cs[C_POS] = 0
            return True
        cs[C_PREV_NODE] = _top(chain, info, cs)
        cs[C_PREV_PC] = pc[position]
        cs[C_PREV_TIME] = time[position]
        cs[C_PREV_TIMED] = timed
        cs[C_POS] = position + 1


@numba.njit(cache=True, nogil=True)
def _event(kind, ref, slots, pairs, nodes, children, child_counts, edges, edge_counts, edge_rows, chain, info,
           acc, acc_table, acc_counts, own, own_counts, own_sums, cs, work, by_registers):  # fmt: skip
    if kind == EV_OPEN:
        edge = _edge(edges, edge_counts, edge_rows, cs, slots[ref, S_ENTRY + PC], slots[ref, S_CALL + PC])
        parent = _top(chain, info, cs)
        if by_registers:
            node = _new_node(nodes, cs, parent, edge, 1)
        else:
            node = _context(nodes, children, child_counts, cs, parent, edge)
        info[ref, I_NODE] = node
        info[ref, I_CUT] = -1
        chain[cs[C_DEPTH]] = ref
        cs[C_DEPTH] += 1
        return
    if kind == EV_DEATH:
        node = info[ref, I_NODE]
        parent = nodes[node, N_PARENT]
        _unlink(nodes, node)
        _hand_on(nodes, edge_rows, acc, acc_table, acc_counts, own, own_counts, own_sums, cs, node, parent)
        _merge(nodes, children, child_counts, cs, node, parent, work)
        info[ref, I_NODE] = -1
        return
    slot = pairs[ref, P_SLOT]
    node = info[slot, I_NODE]
    end = pairs[ref, P_END_IDX]
    end_time = pairs[ref, P_RESUME + TIME] if pairs[ref, P_RESUME + SEQ] >= 0 else pairs[ref, P_EXIT + TIME]
    if info[slot, I_CUT] >= 0:  # its parent ended first: the call tree cuts it there
        end = info[slot, I_CUT]
        end_time = info[slot, I_CUT_TIME]
    else:  # still open: what opened inside it and is still undecided is cut at its end
        depth = cs[C_DEPTH]
        while chain[depth - 1] != slot:
            inner = chain[depth - 1]
            if info[inner, I_NODE] >= 0:
                info[inner, I_CUT] = end
                info[inner, I_CUT_TIME] = end_time
            depth -= 1
        cs[C_DEPTH] = depth - 1
    entry = slots[slot, S_ENTRY_IDX]
    insns = end - entry
    spent = end_time - slots[slot, S_ENTRY + TIME]
    if nodes[node, N_MARKER]:
        parent = nodes[node, N_PARENT]
        _unlink(nodes, node)
        target = _context(nodes, children, child_counts, cs, parent, nodes[node, N_EDGE])
        _hand_on(nodes, edge_rows, acc, acc_table, acc_counts, own, own_counts, own_sums, cs, node, target)
        _merge(nodes, children, child_counts, cs, node, target, work)
        node = target
    _add_frame(nodes, node, insns, spent, entry)
    info[slot, I_NODE] = -1


@numba.njit(cache=True, nogil=True)
def _preorder(nodes, root, function, n_functions):
    """The live nodes parents first, each node's parent as a position in that order, and whether
    its function is also one of its ancestors' (a recursive call)."""
    order = np.empty(len(nodes), np.int64)
    parent = np.empty(len(nodes), np.int64)
    recursive = np.zeros(len(nodes), np.bool_)
    position = np.empty(len(nodes), np.int64)
    open_calls = np.zeros(n_functions, np.int64)
    count = 0
    node = root
    while node >= 0:  # depth first along the child links, without a stack
        position[node] = count
        order[count] = node
        above = nodes[node, N_PARENT]
        parent[count] = position[above] if above >= 0 else -1
        recursive[count] = open_calls[function[node]] > 0
        count += 1
        open_calls[function[node]] += 1
        if nodes[node, N_CHILD] >= 0:
            node = nodes[node, N_CHILD]
            continue
        while node >= 0:
            open_calls[function[node]] -= 1
            if node != root and nodes[node, N_NEXT] >= 0:
                node = nodes[node, N_NEXT]
                break
            node = nodes[node, N_PARENT] if node != root else -1
    return order[:count], parent[:count], recursive[:count]


class _CoreSums:
    """One core's trie, slot states and self costs, fed after each chunk of its detection."""

    def __init__(self, charging: bool) -> None:
        self.charging = charging
        rows = 1 << 10
        self.nodes = np.zeros((rows, NODE_WIDTH), np.int64)
        self.work = np.zeros((rows, 2), np.int64)
        self.children, self.child_counts = pairtable.new_table()
        self.edges, self.edge_counts = pairtable.new_table()
        self.edge_rows = np.zeros((rows, 2), np.int64)
        self.chain = np.zeros(rows, np.int64)
        self.info = np.zeros((rows, SLOT_INFO_WIDTH), np.int64)
        self.acc = np.zeros((rows, ACC_WIDTH), np.int64)
        self.acc_table, self.acc_counts = pairtable.new_table()
        self.own, self.own_counts = pairtable.new_table()
        self.own_sums = np.zeros((rows, 2), np.int64)
        self.cs = np.zeros(COUNTERS_WIDTH, np.int64)
        for counter in (C_FREE, C_ACC_FREE, C_ROOT, C_PREV_NODE):
            self.cs[counter] = -1

    def follow(self, detector: CoreDetector, chunk: Instructions) -> None:
        st = detector.state
        first_index = int(st[ST_N]) - len(chunk)
        pc = chunk.pc.view(np.int64) if self.charging else np.zeros(0, np.int64)
        self._fold(detector, int(st[ST_N]), pc, chunk.time, chunk.has_time, first_index)
        self._recycle(detector)

    def _fold(self, detector: CoreDetector, stop: int, pc: np.ndarray, time: np.ndarray, timed: bool,
              first_index: int) -> None:  # fmt: skip
        st = detector.state
        self.info = grown(self.info, int(st[ST_SLOTS]) - 1)
        by_registers = detector.method is Method.REGISTERS
        while not _fold_events(
            detector.events, int(st[ST_EVENTS]), stop, detector.slots, detector.pairs, pc, time, timed,
            first_index, self.charging, int(st[ST_FIRST + PC]), self.nodes, self.children,
            self.child_counts, self.edges, self.edge_counts, self.edge_rows, self.chain, self.info,
            self.acc, self.acc_table, self.acc_counts, self.own, self.own_counts, self.own_sums,
            self.cs, self.work, by_registers,
        ):  # fmt: skip
            self._make_room()

    def _make_room(self) -> None:
        cs = self.cs
        live = int(cs[C_LIVE_NODES]) + 2
        self.nodes = grown(self.nodes, int(cs[C_NODES]) + 2)
        if live >= len(self.work) or len(self.work) < len(self.nodes):
            self.work = np.zeros((len(self.nodes), 2), np.int64)
        self.edge_rows = grown(self.edge_rows, int(cs[C_EDGES]) + 2)
        self.chain = grown(self.chain, int(cs[C_DEPTH]) + 2)
        self.acc = grown(self.acc, int(cs[C_ACC]) + _SPARE)
        accs = int(cs[C_LIVE_ACC]) + _SPARE
        self.own_sums = grown(self.own_sums, int(cs[C_OWN]) + accs)
        self.children, self.child_counts = pairtable.rehashed(self.children, self.child_counts, live)
        self.edges, self.edge_counts = pairtable.rehashed(self.edges, self.edge_counts, 2)
        self.acc_table, self.acc_counts = pairtable.rehashed(self.acc_table, self.acc_counts, accs)
        self.own, self.own_counts = pairtable.rehashed(self.own, self.own_counts, accs)

    def _recycle(self, detector: CoreDetector) -> None:
        """Drop the folded events and let the detector reuse the rows of decided slots."""
        st = detector.state
        done = int(self.cs[C_EVENT])
        left = detector.events[done : st[ST_EVENTS]].copy()  # deaths after the chunk's last instruction
        depth = int(self.cs[C_DEPTH])
        chain = self.chain[:depth][self.info[self.chain[:depth], I_NODE] >= 0]
        kept = detector.recycle(left[:, E_REF])
        renumber = np.full(max(len(self.info), 1), -1, np.int64)
        renumber[kept] = np.arange(len(kept))
        self.info[: len(kept)] = self.info[kept]
        self.chain[: len(chain)] = renumber[chain]
        self.cs[C_DEPTH] = len(chain)
        left[:, E_REF] = renumber[left[:, E_REF]]
        detector.events[: len(left)] = left
        st[ST_EVENTS] = len(left)
        self.cs[C_EVENT] = 0

    def finish(self, detector: CoreDetector) -> None:
        """End of the trace: the last instruction's self cost, what is still open, the root frame."""
        st = detector.state
        detector.close()
        cs = self.cs
        if cs[C_PREV_NODE] >= 0:  # the core's last instruction takes no time
            _charge(self.nodes, self.edge_rows, self.acc, self.acc_table, self.acc_counts, self.own,
                    self.own_counts, self.own_sums, cs, cs[C_PREV_NODE], cs[C_PREV_PC], 1, 0)  # fmt: skip
            cs[C_PREV_NODE] = -1
        no_instructions = np.zeros(0, np.int64)
        end = int(st[ST_N]) + 1
        self._fold(detector, end, no_instructions, no_instructions, False, 0)
        self._recycle(detector)
        open_slots = np.flatnonzero(self.info[: st[ST_SLOTS], I_NODE] >= 0)[::-1]
        if len(open_slots):  # potential calls that never returned: not calls
            detector.events = grown(detector.events, len(open_slots) - 1)
            detector.events[: len(open_slots)] = np.column_stack(
                [np.full(len(open_slots), EV_DEATH), open_slots, np.full(len(open_slots), st[ST_N])]
            )
            st[ST_EVENTS] = len(open_slots)
            self._fold(detector, end, no_instructions, no_instructions, False, 0)
        root = cs[C_ROOT]
        self.nodes[root, N_CALLS] += 1
        self.nodes[root, N_INSNS] += st[ST_N]
        self.nodes[root, N_TIME] += st[ST_PREV + TIME] - st[ST_FIRST + TIME]
        self.nodes[root, N_FIRST] = 0

    def contexts(self) -> Contexts:
        """The calling contexts, parents first."""
        nodes = self.nodes[: self.cs[C_NODES]]
        live = nodes[:, N_PARENT] != -2
        address = np.zeros(len(nodes), np.int64)
        address[live] = self.edge_rows[nodes[live, N_EDGE], 0]
        distinct, function = np.unique(address, return_inverse=True)
        order, parent, recursive = _preorder(nodes, int(self.cs[C_ROOT]), function.ravel(), len(distinct))
        taken = nodes[order]
        return Contexts(
            parent=parent,
            address=address[order].view(np.uint64),
            site=self.edge_rows[taken[:, N_EDGE], 1].view(np.uint64),
            calls=taken[:, N_CALLS],
            insns=taken[:, N_INSNS],
            time=taken[:, N_TIME],
            first=taken[:, N_FIRST],
            recursive=recursive,
        )

    def self_costs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(function, pc, [count, time]) of each instruction address run, per function it ran in."""
        live = self.own[self.own[:, 2] >= 0]
        return live[:, 0].view(np.uint64), live[:, 1].view(np.uint64), self.own_sums[live[:, 2]]


@dataclass
class Contexts:
    """One core's calling contexts (parents first): where each was called from and its frames' sums."""

    parent: np.ndarray  # position of the parent context, -1 for the outermost frame's
    address: np.ndarray  # uint64: the function's entry address
    site: np.ndarray  # uint64: the call site (all ones for the outermost frame)
    calls: np.ndarray
    insns: np.ndarray  # inclusive, and time below
    time: np.ndarray
    first: np.ndarray  # the first frame's entry index: the order frames first appear in the call tree
    recursive: np.ndarray  # the function is also an ancestor's: its inclusive costs are counted there

    def children_sum(self, values: np.ndarray) -> np.ndarray:
        return sum_by(np.maximum(self.parent, 0), len(values), np.where(self.parent >= 0, values, 0))


@dataclass
class CallSums:
    """Per-context call sums of every core: what the flat profile, folded stacks and callgrind need.

    `addresses` are the distinct function entry addresses (sorted) and `names` their names,
    as in CallTree.
    """

    cores: dict[int, Contexts]
    own: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]  # self costs per (function, pc), if charged
    timed: dict[int, bool]
    methods: dict[int, Method]
    addresses: np.ndarray
    names: list[str]
    has_time: bool

    @classmethod
    def for_trace(
        cls,
        trace: Trace,
        window: Window = WHOLE_TRACE,
        method: Method = Method.AUTO,
        image: Image | None = None,
        cpus: list[int] | None = None,
        self_costs: bool = False,
    ) -> CallSums:
        """Detect the calls of the window and sum them, in one pass; `self_costs` also charges each
        instruction to the function it ran in."""
        collector = CallSumsCollector(self_costs)
        detector = CallDetector.for_trace(trace, window, method, image, cpus, follow=collector.follow)
        for step in read_steps(trace, window, registers=detector.needs_registers):
            detector.feed(step)
        return collector.finish(detector, image)

    def functions(self) -> pa.Table:
        """The flat call profile, as CallTree.functions gives it."""
        parts = []
        for cpu, contexts in self.cores.items():
            function = np.searchsorted(self.addresses, contexts.address)
            time_self = contexts.time - contexts.children_sum(contexts.time)
            insns_self = contexts.insns - contexts.children_sum(contexts.insns)
            parts.append(function_rows(
                cpu, function, self.addresses, self.names, contexts.calls, contexts.insns, insns_self,
                contexts.time, time_self, contexts.recursive,
            ))  # fmt: skip
        return function_table(parts, self.has_time)

    def stacks(self, weight: str = "insns") -> Iterator[tuple[int, list[str], int]]:
        """(cpu, function names from the outermost down, self weight) per distinct call stack, as
        CallTree.stacks gives them."""
        distinct, name_ids = distinct_names(self.names)
        for cpu, contexts in self.cores.items():
            if weight == "insns":
                values = contexts.insns
            elif self.timed[cpu]:
                values = contexts.time
            else:
                continue
            weights = values - contexts.children_sum(values)
            names = name_ids[np.searchsorted(self.addresses, contexts.address)]
            for path, total in context_stacks(contexts.parent, names, weights, distinct):
                yield cpu, path, total


class CallSumsCollector:
    """Follows a CallDetector (its `follow`) and sums its calls per core."""

    def __init__(self, self_costs: bool = False) -> None:
        self.charging = self_costs
        self.cores: dict[int, _CoreSums] = {}

    def follow(self, detector: CoreDetector, chunk: Instructions) -> None:
        core = self.cores.get(detector.cpu)
        if core is None:
            core = self.cores[detector.cpu] = _CoreSums(self.charging)
        core.follow(detector, chunk)

    def finish(self, detector: CallDetector, image: Image | None) -> CallSums:
        contexts, own, timed = {}, {}, {}
        for cpu in sorted(detector.detectors):
            core_detector = detector.detectors[cpu]
            if not core_detector.state[ST_N]:
                continue
            core = self.cores[cpu]
            core.finish(core_detector)
            contexts[cpu] = core.contexts()
            own[cpu] = core.self_costs()
            timed[cpu] = core_detector.has_time
        methods = {cpu: d.method for cpu, d in detector.detectors.items()}
        if not contexts:
            return CallSums({}, {}, {}, methods, np.zeros(0, np.uint64), [], False)
        addresses = np.unique(np.concatenate([c.address for c in contexts.values()]))
        symbols = image.symbols if image is not None else None
        return CallSums(contexts, own, timed, methods, addresses, function_names(addresses, symbols),
                        all(timed.values()))  # fmt: skip
