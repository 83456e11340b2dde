"""The compiled part of the calling-context sums (contexts.py): a trie folded from detection's log.

Each core keeps a trie of calling contexts: a node is (parent node, edge = function and call
site), with the calls, inclusive instructions and time, and first entry of the frames that
ran in that context.

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

from typing import NamedTuple

import numba
import numpy as np

from ...kernels import pairtable
from .log import DIED, OPENED

NODE = np.dtype(
    [
        ("parent", "<i8"),  # -1 for the root, -2 once freed
        ("edge", "<i8"),  # EDGE row: function and call site
        ("marker", "<i8"),  # an undecided potential call
        ("child", "<i8"),  # first child, -1 none; children are linked through next and prev
        ("next", "<i8"),  # also the free list
        ("prev", "<i8"),
        ("calls", "<i8"),
        ("insns", "<i8"),
        ("time", "<i8"),
        ("first", "<i8"),  # the first frame's entry index
        ("own", "<i8"),  # a marker's first ACC row, -1 none
    ]
)
"""One calling context (or marker) of the trie."""

EDGE = np.dtype([("function", "<i8"), ("site", "<i8")])
"""A function entered from a call site (-1: the outermost frame)."""

OPEN_CALL = np.dtype([("node", "<i8"), ("cut", "<i8"), ("cut_time", "<i8")])
"""Per CALL row: its node (-1 once decided), and where it was cut (-1: not cut)."""

ACC = np.dtype([("node", "<i8"), ("pc", "<i8"), ("count", "<i8"), ("time", "<i8"), ("next", "<i8")])
"""Self costs of instructions run while a marker was innermost; `next` links a marker's rows
(and the free list)."""

OWN = np.dtype([("count", "<i8"), ("time", "<i8")])
"""Self costs of one (function, pc)."""

MERGE = np.dtype([("source", "<i8"), ("target", "<i8")])
"""A pair of nodes still to merge."""

COUNTERS = np.dtype(
    [
        ("nodes", "<i8"),  # NODE rows used
        ("free", "<i8"),  # first freed NODE row, -1 none
        ("edges", "<i8"),
        ("depth", "<i8"),  # entries of the chain of open calls
        ("acc", "<i8"),
        ("acc_free", "<i8"),
        ("own", "<i8"),
        ("root", "<i8"),  # the outermost frame's node, -1 before the first log
        ("prev_node", "<i8"),  # the previous instruction, charged when its time is known (-1 none)
        ("prev_pc", "<i8"),
        ("prev_time", "<i8"),
        ("prev_timed", "<i8"),
        ("event", "<i8"),  # events of the log folded so far
        ("live_nodes", "<i8"),
        ("live_acc", "<i8"),
        ("pos", "<i8"),  # instructions of the chunk passed so far
    ]
)
"""One core's trie state between logs."""

NO_SITE = -1
SPARE = 256
_NEVER = np.iinfo(np.int64).max


class Fold(NamedTuple):
    """One log to fold, with its chunk's instructions (none when not charging self costs)."""

    events: np.ndarray  # EVENT
    calls: np.ndarray  # CALL
    ends: np.ndarray  # END
    pc: np.ndarray  # int64
    time: np.ndarray
    timed: bool
    start: int  # the chunk's first instruction index
    stop: int  # events at this index or later wait
    root_pc: int  # the core's first instruction: the outermost frame's function
    by_registers: bool


class Trie(NamedTuple):
    nodes: np.ndarray  # NODE
    children: np.ndarray  # pairtable: (parent node, edge) -> child node (not markers)
    child_counts: np.ndarray
    edges: np.ndarray  # pairtable: (function, site) -> EDGE row
    edge_counts: np.ndarray
    edge_rows: np.ndarray  # EDGE
    work: np.ndarray  # MERGE: room for every live node


class Charges(NamedTuple):
    acc: np.ndarray  # ACC
    acc_table: np.ndarray  # pairtable: (marker node, pc) -> ACC row
    acc_counts: np.ndarray
    own: np.ndarray  # pairtable: (function, pc) -> OWN row
    own_counts: np.ndarray
    own_sums: np.ndarray  # OWN


class Opened(NamedTuple):
    chain: np.ndarray  # CALL rows in the order opened (decided ones dropped lazily)
    info: np.ndarray  # OPEN_CALL per CALL row


@numba.njit(cache=True, nogil=True, inline="always")
def _edge(trie, cs, function, site):
    """The EDGE row of (function, call site), numbered on first sight."""
    row = pairtable.find(trie.edges, function, site)
    if row >= 0:
        return trie.edges[row, 2]
    e = cs.edges
    cs.edges = e + 1
    trie.edge_rows[e].function = function
    trie.edge_rows[e].site = site
    pairtable.put(trie.edges, trie.edge_counts, function, site, e)
    return e


@numba.njit(cache=True, nogil=True)
def _link(nodes, node, parent):
    nodes[node].parent = parent
    nodes[node].prev = -1
    head = nodes[parent].child
    nodes[node].next = head
    if head >= 0:
        nodes[head].prev = node
    nodes[parent].child = node


@numba.njit(cache=True, nogil=True)
def _unlink(nodes, node):
    before, after = nodes[node].prev, nodes[node].next
    if before >= 0:
        nodes[before].next = after
    else:
        nodes[nodes[node].parent].child = after
    if after >= 0:
        nodes[after].prev = before


@numba.njit(cache=True, nogil=True, inline="always")
def _take_row(table, free, used):
    """A row of `table`: the head of its free list (`free`, linked through the rows' `next`), else
    row `used`, the first never used. Returns (row, new free head, new rows used)."""
    if free >= 0:
        return free, table[free].next, used
    return used, free, used + 1


@numba.njit(cache=True, nogil=True)
def _new_node(nodes, cs, parent, edge, marker):
    node, cs.free, cs.nodes = _take_row(nodes, cs.free, cs.nodes)
    cs.live_nodes += 1
    n = nodes[node]
    n.edge = edge
    n.marker = marker
    n.child = -1
    n.calls = 0
    n.insns = 0
    n.time = 0
    n.first = _NEVER
    n.own = -1
    if parent >= 0:
        _link(nodes, node, parent)
    else:
        n.parent = -1
        n.next = -1
        n.prev = -1
    return node


@numba.njit(cache=True, nogil=True)
def _free_node(nodes, cs, node):
    nodes[node].next = cs.free
    nodes[node].parent = -2
    cs.free = node
    cs.live_nodes -= 1


@numba.njit(cache=True, nogil=True, inline="always")
def _context(trie, cs, parent, edge):
    """The (real) child context of `parent` for `edge`, made on first use."""
    row = pairtable.find(trie.children, parent, edge)
    if row >= 0:
        return trie.children[row, 2]
    node = _new_node(trie.nodes, cs, parent, edge, 0)
    pairtable.put(trie.children, trie.child_counts, parent, edge, node)
    return node


@numba.njit(cache=True, nogil=True)
def _merge(trie, cs, source, target):
    """Move the sums and subtree of `source` (already unlinked) into `target`, freeing it and
    every node of its subtree that has a namesake under `target`."""
    nodes, children, counts, work = trie.nodes, trie.children, trie.child_counts, trie.work
    work[0].source = source
    work[0].target = target
    top = 1
    while top > 0:
        top -= 1
        src, dst = work[top].source, work[top].target
        into, come = nodes[dst], nodes[src]
        into.calls += come.calls
        into.insns += come.insns
        into.time += come.time
        into.first = min(into.first, come.first)
        child = come.child
        while child >= 0:
            following = nodes[child].next
            if nodes[child].marker:
                _link(nodes, child, dst)
            else:
                edge = nodes[child].edge
                pairtable.remove(children, counts, pairtable.find(children, src, edge))
                row = pairtable.find(children, dst, edge)
                if row >= 0:
                    work[top].source = child
                    work[top].target = children[row, 2]
                    top += 1
                else:
                    pairtable.put(children, counts, dst, edge, child)
                    _link(nodes, child, dst)
            child = following
        _free_node(nodes, cs, src)


@numba.njit(cache=True, nogil=True)
def charge(trie, charges, cs, node, pc, count, time):
    """Self cost of instructions run with `node` innermost: to its function if it is a call, to
    the marker's own rows while it is undecided."""
    nodes = trie.nodes
    if not nodes[node].marker:
        function = trie.edge_rows[nodes[node].edge].function
        row = pairtable.find(charges.own, function, pc)
        if row < 0:
            slot = cs.own
            cs.own = slot + 1
            pairtable.put(charges.own, charges.own_counts, function, pc, slot)
        else:
            slot = charges.own[row, 2]
        charges.own_sums[slot].count += count
        charges.own_sums[slot].time += time
        return
    acc = charges.acc
    row = pairtable.find(charges.acc_table, node, pc)
    if row >= 0:
        slot = charges.acc_table[row, 2]
    else:
        slot, cs.acc_free, cs.acc = _take_row(acc, cs.acc_free, cs.acc)
        cs.live_acc += 1
        acc[slot].node = node
        acc[slot].pc = pc
        acc[slot].count = 0
        acc[slot].time = 0
        acc[slot].next = nodes[node].own
        nodes[node].own = slot
        pairtable.put(charges.acc_table, charges.acc_counts, node, pc, slot)
    acc[slot].count += count
    acc[slot].time += time


@numba.njit(cache=True, nogil=True)
def _hand_on(trie, charges, cs, marker, target):
    """Charge a decided marker's self costs to `target` (its node if a call, its parent if not)."""
    acc = charges.acc
    slot = trie.nodes[marker].own
    while slot >= 0:
        following = acc[slot].next
        pc = acc[slot].pc
        pairtable.remove(charges.acc_table, charges.acc_counts, pairtable.find(charges.acc_table, marker, pc))
        charge(trie, charges, cs, target, pc, acc[slot].count, acc[slot].time)
        acc[slot].next = cs.acc_free
        cs.acc_free = slot
        cs.live_acc -= 1
        slot = following
    trie.nodes[marker].own = -1


@numba.njit(cache=True, nogil=True, inline="always")
def _top(opened, cs):
    """The innermost open node: the latest open call that is still undecided, or the root."""
    chain, info = opened.chain, opened.info
    depth = cs.depth
    while depth > 0 and info[chain[depth - 1]].node < 0:
        depth -= 1
    cs.depth = depth
    return info[chain[depth - 1]].node if depth > 0 else cs.root


@numba.njit(cache=True, nogil=True)
def _fits(table, counts, more):
    """Whether a hash table takes `more` entries, its tombstones dropped in place if that helps."""
    if 2 * (counts[0] + counts[1] + more) <= len(table):
        return True
    if 2 * (counts[0] + more) > len(table) // 2:  # mostly live: let it grow instead
        return False
    pairtable.purge(table, counts)
    return True


@numba.njit(cache=True, nogil=True, inline="always")
def _room(trie, charges, opened, cs, spare):
    """Whether every array has room for one more event, merges included, or `spare` instructions."""
    live = cs.live_nodes + 2
    if cs.nodes + 2 >= len(trie.nodes) or live >= len(trie.work) or cs.edges + 2 >= len(trie.edge_rows):
        return False
    if cs.depth + 2 >= len(opened.chain) or not _fits(trie.children, trie.child_counts, live):
        return False
    accs = cs.live_acc + spare
    if (
        not _fits(trie.edges, trie.edge_counts, 2)
        or cs.acc + spare >= len(charges.acc)
        or not _fits(charges.acc_table, charges.acc_counts, accs)
    ):
        return False
    return cs.own + accs < len(charges.own_sums) and _fits(charges.own, charges.own_counts, accs)


@numba.njit(cache=True, nogil=True)
def fold_log(fold, trie, charges, opened, counters):
    """Fold the log's events before instruction index `fold.stop` into the trie and the chunk's
    instructions (if any) into the self costs. Returns False when an array must grow first;
    called again, it resumes where it stopped."""
    cs = counters[0]
    if cs.root < 0:
        cs.root = _new_node(trie.nodes, cs, -1, _edge(trie, cs, fold.root_pc, NO_SITE), 0)
    positions = len(fold.pc)
    budget = 0  # steps that can be taken before the arrays are checked again
    while True:
        if budget <= 2:  # an event needs 2 rows to spare besides its merges
            if not _room(trie, charges, opened, cs, SPARE):
                return False
            budget = SPARE
        budget -= 1
        position = cs.pos
        index = fold.start + position if position < positions else fold.stop
        if cs.prev_node >= 0 and position < positions:  # the previous instruction, now its time is known
            spent = fold.time[position] - cs.prev_time if fold.timed and cs.prev_timed else 0
            charge(trie, charges, cs, cs.prev_node, cs.prev_pc, 1, spent)
            cs.prev_node = -1
            continue
        e = cs.event
        if e < len(fold.events) and fold.events[e].index <= index and fold.events[e].index < fold.stop:
            _event(fold, fold.events[e].kind, fold.events[e].ref, trie, charges, opened, cs)
            cs.event = e + 1
            budget = 0  # an event may take any room: check before the next step
            continue
        if position >= positions:
            cs.pos = 0
            return True
        cs.prev_node = _top(opened, cs)
        cs.prev_pc = fold.pc[position]
        cs.prev_time = fold.time[position]
        cs.prev_timed = fold.timed
        cs.pos = position + 1


@numba.njit(cache=True, nogil=True, inline="always")
def _event(fold, kind, ref, trie, charges, opened, cs):
    nodes, chain, info = trie.nodes, opened.chain, opened.info
    if kind == OPENED:
        call = fold.calls[ref]
        edge = _edge(trie, cs, call.entry.pc, call.call.pc)
        parent = _top(opened, cs)
        if fold.by_registers:
            node = _new_node(nodes, cs, parent, edge, 1)
        else:
            node = _context(trie, cs, parent, edge)
        info[ref].node = node
        info[ref].cut = -1
        chain[cs.depth] = ref
        cs.depth += 1
        return
    if kind == DIED:
        node = info[ref].node
        parent = nodes[node].parent
        _unlink(nodes, node)
        _hand_on(trie, charges, cs, node, parent)
        _merge(trie, cs, node, parent)
        info[ref].node = -1
        return
    end = fold.ends[ref]
    row = end.call
    node = info[row].node
    end_index = end.end_index
    end_time = end.resume.time if end.resume.seq >= 0 else end.exit.time
    if info[row].cut >= 0:  # its parent ended first: the call tree cuts it there
        end_index = info[row].cut
        end_time = info[row].cut_time
    else:  # still open: what opened inside it and is still undecided is cut at its end
        depth = cs.depth
        while chain[depth - 1] != row:
            inner = chain[depth - 1]
            if info[inner].node >= 0:
                info[inner].cut = end_index
                info[inner].cut_time = end_time
            depth -= 1
        cs.depth = depth - 1
    call = fold.calls[row]
    entry = call.entry_index
    if nodes[node].marker:
        parent = nodes[node].parent
        _unlink(nodes, node)
        target = _context(trie, cs, parent, nodes[node].edge)
        _hand_on(trie, charges, cs, node, target)
        _merge(trie, cs, node, target)
        node = target
    n = nodes[node]
    n.calls += 1
    n.insns += end_index - entry
    n.time += end_time - call.entry.time
    n.first = min(n.first, entry)
    info[row].node = -1


@numba.njit(cache=True, nogil=True)
def preorder(nodes, root, function, n_functions):
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
        above = nodes[node].parent
        parent[count] = position[above] if above >= 0 else -1
        recursive[count] = open_calls[function[node]] > 0
        count += 1
        open_calls[function[node]] += 1
        if nodes[node].child >= 0:
            node = nodes[node].child
            continue
        while node >= 0:
            open_calls[function[node]] -= 1
            if node != root and nodes[node].next >= 0:
                node = nodes[node].next
                break
            node = nodes[node].parent if node != root else -1
    return order[:count], parent[:count], recursive[:count]
