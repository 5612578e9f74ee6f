"""Dependency cycles between committed transactions (Adya's G0 and G1c, as Jepsen's Kafka
workload names them), from a `History` alone: no I/O, so unit tests hand it histories.

Nodes: the committed transactions - told committed, or not certainly aborted with a record in
the final read_committed read. Edges:

- wr  T1 -> T2   T2 consumed a record T1 wrote (T2 depends on what T1 wrote).
- ww  T1 -> T2   on a partition, T1's records come before T2's in the final read_committed read,
                 and T1's commit was answered before T2 began. Kafka orders the writes of
                 *concurrent* transactions in no particular way (two open transactions' records
                 interleave on a partition, in one order here and the other there, and that
                 cycle is allowed), so only the order of transactions apart in time is a
                 dependency the log must respect.

Every cycle is an anomaly: G0 (a write cycle) when all its edges are ww, G1c (circular
information flow) when one is wr. Tarjan's algorithm finds the strongly connected components; a
component of more than one transaction holds a cycle, reported with an example (a shortest one
through the component's first transaction).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass

from cluster.verify.history import COMMITTED, History, Txn

WW, WR = "ww", "wr"
_LOOKBACK = 32  # ww: each transaction's predecessors on a partition looked at, in log order


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    kind: str  # WW or WR
    why: str


Graph = dict[str, list[Edge]]


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph`` (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> Iterable[Edge]:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        return iter(graph.get(v, ()))

    for root in graph:
        if root in index:
            continue
        work = [(root, visit(root))]
        while work:
            v, edges = work[-1]
            for e in edges:
                if e.dst not in index:
                    work.append((e.dst, visit(e.dst)))
                    break
                if e.dst in on_stack:
                    low[v] = min(low[v], index[e.dst])
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    out.append(component)
    return out


def example_cycle(graph: Graph, component: list[str]) -> list[Edge]:
    """A shortest cycle through the component's first transaction (breadth first, inside it)."""
    members = set(component)
    start = min(component)
    came: dict[str, Edge] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for e in graph.get(v, ()):
            if e.dst not in members:
                continue
            if e.dst == start:
                path = [e]
                while path[0].src != start:
                    path.insert(0, came[path[0].src])
                return path
            if e.dst not in came:
                came[e.dst] = e
                queue.append(e.dst)
    raise ValueError(f"no cycle through {start}: not a strongly connected component")


def committed(history: History, final: str) -> dict[str, Txn]:
    """The graph's transactions: told committed, or not certainly aborted and seen by
    ``final``."""
    seen = {rd.value.decode("latin-1") for rd in history.reads if rd.consumer == final and rd.value}
    return {
        t.id: t
        for t in history.txns.values()
        if t.intent != "abort"
        and t.outcome != "abort"
        and (t.outcome == COMMITTED or any(w in seen for w in t.writes))
    }


def _apart(a: Txn, b: Txn) -> bool:
    """Whether ``a``'s commit was answered before ``b`` began (so its records were all
    appended before any of ``b``'s)."""
    return a.outcome == COMMITTED and a.t_end is not None and a.t_end < b.t_begin


def _sequences(history: History, final: str, writer: dict[str, str]) -> dict[int, list]:
    """Per partition, the committed transactions in the order of their records in the final
    read: (first offset, transaction), consecutive transactions distinct."""
    order: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for rd in history.reads:
        if rd.consumer == final and rd.value is not None:
            w = writer.get(rd.value.decode("latin-1"))
            if w is not None:
                order[rd.partition].append((rd.offset, w))
    sequences: dict[int, list[tuple[int, str]]] = {}
    for p, records in order.items():
        sequence = sequences.setdefault(p, [])
        for o, w in sorted(records):
            if not sequence or sequence[-1][1] != w:
                sequence.append((o, w))
    return sequences


def dependency_graph(history: History, final: str) -> Graph:
    """The ww and wr edges between the committed transactions (see the module docstring);
    ``final`` names the final read_committed read."""
    txns = committed(history, final)
    writer = {w: t.id for t in txns.values() for w in t.writes}
    edges: dict[tuple[str, str, str], Edge] = {}

    def add(src: str, dst: str, kind: str, why: str) -> None:
        edges.setdefault((src, dst, kind), Edge(src, dst, kind, why))

    for t in txns.values():
        for p, o, value in t.reads:
            w = writer.get(value)
            if w is not None and w != t.id:
                add(w, t.id, WR, f"{t.id} read {value!r} at {p}/{o}")
    for p, sequence in _sequences(history, final, writer).items():
        for i, (o, later) in enumerate(sequence):
            for o0, earlier in sequence[max(0, i - _LOOKBACK) : i]:
                a, b = txns[earlier], txns[later]
                if earlier != later and (_apart(a, b) or _apart(b, a)):
                    add(earlier, later, WW, f"partition {p}: {earlier} at {o0}, {later} at {o}")
    graph: Graph = {t: [] for t in txns}
    for e in edges.values():
        graph[e.src].append(e)
    return graph


def cycles(history: History, final: str) -> list[list[Edge]]:
    """One example cycle per strongly connected component of more than one transaction."""
    graph = dependency_graph(history, final)
    return [example_cycle(graph, c) for c in strongly_connected(graph) if len(c) > 1]


def describe(cycle: list[Edge]) -> str:
    """``G0`` or ``G1c`` and the cycle, each edge with why it is there."""
    kind = "G1c" if any(e.kind == WR for e in cycle) else "G0"
    steps = " ".join(f"-{e.kind}-> {e.dst} ({e.why})" for e in cycle)
    return f"{kind}: {cycle[0].src} {steps}"
