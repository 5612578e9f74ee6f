"""Meta node settings, under Kafka-style names (see common/settings.py for where values come from).

A meta node has two endpoints: the Raft endpoint its peers replicate through
(``meta.quorum.voters``, like Kafka's ``controller.quorum.voters``) and the gRPC endpoint brokers
and tools call (``meta.listener``, advertised to peers through ``meta.quorum.listeners``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from common.internal_security import InternalSecurityConfig


def parse_node_addresses(value: str, setting: str) -> dict[int, str]:
    """``1@host:port,2@host:port`` -> ``{1: "host:port", 2: "host:port"}``."""
    nodes: dict[int, str] = {}
    for entry in filter(None, (part.strip() for part in value.split(","))):
        node_id, sep, address = entry.partition("@")
        host, colon, port = address.rpartition(":")
        if not (sep and colon and host and node_id.strip().isdigit() and port.isdigit()):
            raise ValueError(f"{setting}: expected id@host:port, got {entry!r}")
        if int(node_id) in nodes:
            raise ValueError(f"{setting}: node id {node_id} appears twice")
        nodes[int(node_id)] = address
    return nodes


class MetaConfig(InternalSecurityConfig):
    """Settings of one meta node (with the internal.* credentials of common.internal_security)."""

    node_id: int = Field(1, description="node.id: this meta node's id; must be in the voters.")
    meta_listener: str = Field(
        "0.0.0.0:9192",
        description="meta.listener: host:port the meta gRPC API binds (brokers' "
        "meta.bootstrap.servers point here).",
    )
    meta_quorum_voters: str = Field(
        "1@127.0.0.1:9292",
        description="meta.quorum.voters: id@host:port of the Raft endpoint of every meta node, "
        "comma-separated (like Kafka's controller.quorum.voters). Every node must list the same "
        "voters; a node binds the address of its own entry. One voter: a single-node quorum.",
    )
    meta_raft_listener: str = Field(
        "",
        description="meta.raft.listener: host:port of this node's Raft endpoint as its peers "
        "reach it (it binds that port). Default: this node's entry in meta.quorum.voters; set "
        "it on a meta node that joins a running quorum, which is not among meta.quorum.voters.",
    )
    meta_quorum_listeners: str = Field(
        "",
        description="meta.quorum.listeners: id@host:port of the gRPC API of every meta node, as "
        "brokers reach it, comma-separated. Followers use it to point brokers at the Raft "
        "leader; required with more than one voter (default for one voter: meta.listener).",
    )
    meta_data_dir: Path = Field(
        Path("./data/meta"),
        description="meta.data.dir: the Raft journal and state dump of this node; keeps the "
        "metadata across restarts.",
    )
    broker_session_timeout_ms: int = Field(
        9000,
        description="broker.session.timeout.ms: a broker that has not heartbeated for this long "
        "is fenced.",
    )
    unclean_leader_election_enable: bool = Field(
        False,
        description="unclean.leader.election.enable: cluster default for topics that do not "
        "set it; when true, a replica outside the ISR may become leader (possible data loss).",
    )
    auto_leader_rebalance_enable: bool = Field(
        True,
        description="auto.leader.rebalance.enable: the Raft leader periodically moves the "
        "leadership of each partition back to its preferred replica (the first one) when that "
        "replica is unfenced, not shutting down and in the ISR.",
    )
    leader_imbalance_check_interval_seconds: float = Field(
        300,
        gt=0,
        description="leader.imbalance.check.interval.seconds: how often the Raft leader checks "
        "for partitions not led by their preferred replica.",
    )
    meta_write_timeout_ms: int = Field(
        10000,
        description="meta.write.timeout.ms: how long a write waits for the Raft leader to commit "
        "it before failing with a retriable UNAVAILABLE (e.g. while a leader is elected).",
    )
    meta_watch_buffer_size: int = Field(
        10000,
        description="meta.watch.buffer.size: changes kept in memory so a Watch resuming from an "
        "offset gets the missed changes rather than a full snapshot.",
    )
    transaction_version: int = Field(
        2,
        ge=0,
        le=2,
        description="transaction.version: the finalized level of the transaction.version feature "
        "a new cluster starts with (2: KIP-890 transactions, what Kafka 4 clients use). Read "
        "once, when the cluster (or a cluster from before finalized features) is initialised; "
        "UpdateFeatures (`rafka features`) changes it afterwards.",
    )
    group_version: int = Field(
        1,
        ge=0,
        le=1,
        description="group.version: the finalized level of the group.version feature a new "
        "cluster starts with (1: the KIP-848 consumer group protocol). Read once, like "
        "transaction.version.",
    )
    streams_version: int = Field(
        1,
        ge=0,
        le=1,
        description="streams.version: the finalized level of the streams.version feature a new "
        "cluster starts with (1: the KIP-1071 streams group protocol, as Kafka 4.4 bootstraps "
        "it). Read once, like transaction.version.",
    )
    meta_server_threads: int = Field(
        64,
        description="meta.server.threads: gRPC worker threads; each open Watch stream holds one.",
    )
    meta_metrics_port: int = Field(
        0,
        description="meta.metrics.port: Prometheus endpoint of this meta node (Raft term, "
        "commit index, leader, apply lag); 0: off.",
    )

    @model_validator(mode="after")
    def _check_quorum(self) -> MetaConfig:
        voters = self.voters()
        if self.node_id not in voters and not self.meta_raft_listener:
            raise ValueError(
                f"node.id {self.node_id} is not in meta.quorum.voters: set meta.raft.listener "
                "for a meta node that joins a running quorum"
            )
        if self.meta_raft_listener:
            parse_node_addresses(f"{self.node_id}@{self.meta_raft_listener}", "meta.raft.listener")
        missing = voters.keys() - self.grpc_addresses().keys()
        if missing:
            raise ValueError(f"meta.quorum.listeners has no address for node(s) {sorted(missing)}")
        return self

    def voters(self) -> dict[int, str]:
        """Node id -> Raft host:port."""
        return parse_node_addresses(self.meta_quorum_voters, "meta.quorum.voters")

    def raft_address(self) -> str:
        """This node's Raft host:port (its identity in the quorum)."""
        return self.meta_raft_listener or self.voters()[self.node_id]

    def own_grpc_address(self) -> str:
        """This node's gRPC host:port as clients reach it."""
        return self.grpc_addresses().get(self.node_id, self.meta_listener)

    def grpc_addresses(self) -> dict[int, str]:
        """Node id -> gRPC host:port as clients reach it."""
        listeners = parse_node_addresses(self.meta_quorum_listeners, "meta.quorum.listeners")
        if not listeners and len(self.voters()) == 1:
            return {self.node_id: self.meta_listener}
        return listeners
