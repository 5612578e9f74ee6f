"""Network faults, as nftables drops inside the nodes' namespaces (netns.py). Clients (the root
namespace) keep reaching every node unless said otherwise: Jepsen's partitions are between the
nodes, and a client left talking to the wrong side is what exposes a stale leader.

- ``isolate-node``         one random node cut off from every other node
- ``split-majority``       the nodes split in two: a minority (a meta node and a broker of
                           3 + 3) and the majority
- ``isolate-meta-leader``  the meta Raft leader cut off from every other node
- ``zombie-leader``        the broker leading the round's partition cut off from every meta
                           node while its clients and followers still reach it: it must stop
                           acknowledging acks=all writes before a new leader takes any
- ``one-way``              a random node hears no other node (``in``), or no node hears it
                           (``out``), while its own packets get through
- ``packet-loss``          every node drops a random share (5-30 %) of the packets it receives
"""

from __future__ import annotations

import contextlib
import time

from cluster.admin import Brokers, metadata
from cluster.verify.cluster import NamespacedCluster
from cluster.verify.nemesis.base import (
    Context,
    FaultFn,
    Injected,
    alive,
    broker_name,
    brokers,
    led_by,
    metas,
    node_id,
)
from cluster.verify.netns import Network, between


def network(c: Context) -> Network:
    if not isinstance(c.cluster, NamespacedCluster):
        raise TypeError("network faults need a NamespacedCluster")
    return c.cluster.net


def _cut(
    c: Context,
    kind: str,
    target: str,
    cuts: list[tuple[str, str]],
    detail: str,
    partitions: tuple[int, ...] = (),
) -> Injected:
    net = network(c)
    net.add_cuts(cuts)
    fault = c.history.fault(kind, target, partitions, detail)

    def heal() -> None:
        net.remove_cuts(cuts)
        fault.t_heal = time.time()

    return fault, heal


def _nodes(c: Context) -> list[str]:
    return list(c.cluster.nodes)


def _hit(c: Context, name: str) -> tuple[int, ...]:
    """Partitions expected to stall when ``name`` is cut off: those it leads (a broker), or
    every one (a meta node: metadata changes stall)."""
    return led_by(c.view, node_id(name)) if name.startswith("broker") else ()


def isolate_node(c: Context) -> Injected:
    name = c.rng.choice([n for n in _nodes(c) if alive(c.cluster, n)])
    others = [n for n in _nodes(c) if n != name]
    return _cut(
        c,
        "isolate-node",
        name,
        between([name], others),
        "cut off from every other node; clients still reach it",
        _hit(c, name),
    )


def split_majority(c: Context) -> Injected:
    m, b = metas(c.cluster), brokers(c.cluster)
    c.rng.shuffle(m)
    c.rng.shuffle(b)
    minority = m[: len(m) // 2] + b[: len(b) // 2]
    majority = [n for n in _nodes(c) if n not in minority]
    return _cut(
        c,
        "split-majority",
        ",".join(minority),
        between(minority, majority),
        f"minority {minority} | majority {majority}",
    )


def isolate_meta_leader(c: Context) -> Injected:
    leader = c.view.meta_leader()
    others = [n for n in _nodes(c) if n != leader]
    return _cut(
        c,
        "isolate-meta-leader",
        leader,
        between([leader], others),
        "meta Raft leader cut off from every other node",
    )


def zombie_leader(c: Context) -> Injected:
    """The partition's leader loses the meta service only; the heal first records which leader
    the other brokers name by then (a new one, if the meta service fenced the zombie)."""
    leader = c.view.leader_of(c.partition)
    name = broker_name(leader)
    fault, undo = _cut(
        c,
        "zombie-leader",
        name,
        between([name], metas(c.cluster)),
        f"leader of {c.partition} cut off from the meta service; clients and "
        "brokers still reach it",
        led_by(c.view, leader) or (c.partition,),
    )

    def heal() -> None:
        seen = _leaders_seen(c, exclude=name)
        fault.detail += f"; at heal the other brokers name leader {seen}"
        undo()

    return fault, heal


def _leaders_seen(c: Context, exclude: str) -> dict[str, tuple[int, int] | None]:
    """(leader, epoch) of the round's partition in each other broker's Metadata."""
    out: dict[str, tuple[int, int] | None] = {}
    for b in brokers(c.cluster):
        if b == exclude or not alive(c.cluster, b):
            continue
        node = c.cluster.nodes[b]
        out[b] = None
        with contextlib.suppress(Exception):
            info = metadata(Brokers(f"{node.host}:{node.port}"), [c.view.topic])
            p = info.topics[0].partitions[c.partition]
            out[b] = (p.leader, p.leader_epoch)
    return out


def one_way(c: Context) -> Injected:
    name = c.rng.choice([n for n in _nodes(c) if alive(c.cluster, n)])
    others = [n for n in _nodes(c) if n != name]
    if c.rng.random() < 0.5:
        cuts, detail = between(others, [name], one_way=True), "hears no other node (in)"
    else:
        cuts, detail = between([name], others, one_way=True), "no other node hears it (out)"
    return _cut(c, "one-way", name, cuts, detail, _hit(c, name))


def packet_loss(c: Context) -> Injected:
    net = network(c)
    percent = c.rng.choice((5, 10, 20, 30))
    net.set_loss(percent)
    fault = c.history.fault("packet-loss", "all", (), f"{percent}% of every node's input dropped")

    def heal() -> None:
        net.set_loss(0)
        fault.t_heal = time.time()

    return fault, heal


FAULTS: dict[str, FaultFn] = {
    "isolate-node": isolate_node,
    "split-majority": split_majority,
    "isolate-meta-leader": isolate_meta_leader,
    "zombie-leader": zombie_leader,
    "one-way": one_way,
    "packet-loss": packet_loss,
}
