"""One network namespace per node, each with its own address on a bridge, and the packet filter
the network faults write into each namespace.

For a run with prefix P (``rv<id>``, see resources.py) on subnet 10.A.B.0/24:

- the bridge ``br0`` lives in a namespace of its own, ``P-hub``: bridged traffic is seen by
  netfilter (br_netfilter) in the bridge's namespace, and the root namespace's FORWARD chain
  may drop it (Docker sets its policy to drop); the hub's netfilter is empty;
- the root namespace reaches the bridge through the veth ``Pc`` at 10.A.B.1: the harness and
  its clients reach every node through it, at the node's own address (Kafka, meta gRPC, Raft
  and replication all bind it), as local traffic (nothing is forwarded in the root namespace);
- node ``meta-2`` lives in namespace ``P-meta-2`` at 10.A.B.12 (meta i: .10+i, broker i: .20+i),
  linked to the bridge by a veth pair (``Pm2`` in the hub, ``eth0`` inside);
- each namespace has an nftables table ``inet rafka_verify`` whose input chain holds the faults:
  drops of the packets from given sources (a partition, a one-way cut) and random drops
  (``numgen random``: packet loss). Each change rewrites every namespace's chain from the wanted
  cuts (counted, so overlapping faults heal independently); `heal` empties them. Filtering on
  input only is enough: a two-way cut drops on both sides.

``CLIENTS`` stands for the root namespace (the bridge address), so a fault can cut clients off
too.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import random
from collections import Counter
from dataclasses import dataclass, field

from cluster.verify.resources import Run, remove_resources, run_cmd

log = logging.getLogger("rafka.verify")

CLIENTS = "clients"
TABLE = "rafka_verify"


def _short(node: str) -> str:
    """``broker-2`` -> ``b2``: interface names are at most 15 characters."""
    kind, _, index = node.partition("-")
    return kind[0] + index


@dataclass
class Network:
    run: Run
    nodes: list[str]
    subnet: ipaddress.IPv4Network = field(init=False)
    addresses: dict[str, str] = field(init=False)  # node (or CLIENTS) -> address
    cuts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (a, b): b drops a's
    loss: dict[str, int] = field(default_factory=dict)  # node -> % of its input dropped
    _up: bool = False

    def __post_init__(self) -> None:
        self.subnet = _free_subnet()
        hosts = list(self.subnet.hosts())
        self.addresses = {CLIENTS: str(hosts[0])}
        for node in self.nodes:
            kind, _, index = node.partition("-")
            self.addresses[node] = str(hosts[(9 if kind == "meta" else 19) + int(index)])

    @property
    def hub(self) -> str:
        """The namespace that holds the bridge."""
        return f"{self.run.prefix}-hub"

    @property
    def uplink(self) -> str:
        """The root namespace's link to the bridge."""
        return f"{self.run.prefix}c"

    def namespace(self, node: str) -> str:
        return f"{self.run.prefix}-{node}"

    def exec_prefix(self, node: str) -> list[str]:
        """The command prefix that runs a process in ``node``'s namespace."""
        return ["ip", "netns", "exec", self.namespace(node)]

    def up(self) -> None:
        """Hub and bridge, namespaces, veths, addresses, empty filter tables."""
        self._up = True
        bits, hub = self.subnet.prefixlen, self.hub
        run_cmd("ip", "netns", "add", hub)
        run_cmd("ip", "-n", hub, "link", "add", "br0", "type", "bridge")
        run_cmd("ip", "-n", hub, "link", "set", "br0", "up")
        self._plug(self.uplink)
        run_cmd("ip", "addr", "add", f"{self.addresses[CLIENTS]}/{bits}", "dev", self.uplink)
        run_cmd("ip", "link", "set", self.uplink, "up")
        for node in self.nodes:
            ns, outside = self.namespace(node), f"{self.run.prefix}{_short(node)}"
            run_cmd("ip", "netns", "add", ns)
            self._plug(outside)
            run_cmd("ip", "link", "set", outside, "netns", ns)
            run_cmd("ip", "-n", ns, "link", "set", outside, "name", "eth0")
            run_cmd("ip", "-n", ns, "addr", "add", f"{self.addresses[node]}/{bits}", "dev", "eth0")
            run_cmd("ip", "-n", ns, "link", "set", "eth0", "up")
            run_cmd("ip", "-n", ns, "link", "set", "lo", "up")
            self._write_rules(node)

    def _plug(self, link: str) -> None:
        """A veth pair ``link`` / ``<link>p`` whose ``p`` end is a port of the hub's bridge."""
        run_cmd("ip", "link", "add", link, "type", "veth", "peer", "name", f"{link}p")
        run_cmd("ip", "link", "set", f"{link}p", "netns", self.hub)
        run_cmd("ip", "-n", self.hub, "link", "set", f"{link}p", "master", "br0", "up")

    def down(self) -> None:
        """Kill what still runs inside, delete the namespaces (veths and bridge go with them)."""
        if not self._up:
            return
        self._up = False
        namespaces = [self.namespace(n) for n in self.nodes] + [self.hub]
        remove_resources(namespaces, [self.uplink], [])

    # -- faults --------------------------------------------------------------------------------

    def add_cuts(self, cuts: list[tuple[str, str]]) -> None:
        """(a, b): b drops a's packets. Counted: two faults may cut the same pair."""
        self.cuts.update(cuts)
        self.apply()

    def remove_cuts(self, cuts: list[tuple[str, str]]) -> None:
        self.cuts.subtract(cuts)
        self.cuts = +self.cuts  # drop the pairs no fault cuts any more
        self.apply()

    def set_loss(self, percent: int, nodes: list[str] | None = None) -> None:
        """Drop ``percent`` % of the packets every node (or those of ``nodes``) receives."""
        self.loss = dict.fromkeys(nodes or self.nodes, percent) if percent else {}
        self.apply()

    def apply(self) -> None:
        """Write the wanted cuts and losses into every namespace."""
        if not self._up:
            return
        for node in self.nodes:
            self._write_rules(node)
        log.info("network: cuts %s, loss %s", sorted(self.cuts), self.loss or "none")

    def heal(self) -> None:
        self.cuts.clear()
        self.loss.clear()
        self.apply()

    def _write_rules(self, node: str) -> None:
        sources = sorted(self.addresses[a] for a, b in self.cuts if b == node)
        rules = []
        if sources:
            rules.append(f"ip saddr {{ {', '.join(sources)} }} drop")
        if self.loss.get(node):
            rules.append(f"numgen random mod 100 < {self.loss[node]} drop")
        script = (
            f"table inet {TABLE}\ndelete table inet {TABLE}\n"
            f"table inet {TABLE} {{\n  chain input {{\n"
            "    type filter hook input priority 0; policy accept;\n"
            + "".join(f"    {r}\n" for r in rules)
            + "  }\n}\n"
        )
        run_cmd(*self.exec_prefix(node), "nft", "-f", "-", input=script)


def between(
    side_a: list[str], side_b: list[str], *, one_way: bool = False
) -> list[tuple[str, str]]:
    """The cuts that part two sides (only a -> b with ``one_way``)."""
    cuts = [(a, b) for a in side_a for b in side_b if a != b]
    return cuts if one_way else cuts + [(b, a) for a, b in cuts]


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.200.0.0/13 that no interface of the root namespace is on."""
    used = []
    for line in run_cmd("ip", "-o", "-4", "addr", "show", check=False).splitlines():
        parts = line.split()
        if "inet" in parts:
            with contextlib.suppress(ValueError):
                used.append(ipaddress.ip_interface(parts[parts.index("inet") + 1]).network)
    rng = random.Random()
    for _ in range(100):
        net = ipaddress.IPv4Network(f"10.{rng.randrange(200, 208)}.{rng.randrange(256)}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free /24 in 10.200.0.0/13 for the run's bridge")
