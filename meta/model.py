"""The entities of cluster metadata: brokers, topics and their partitions, and the security
metadata (SCRAM credentials, delegation tokens; ACL bindings are ``meta.acl.AclBinding``).

They are frozen: a change replaces the object (``dataclasses.replace``), so a reader holding one
never sees it change underneath, and results can share objects with the state safely.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

NO_LEADER = -1
CLUSTER_DEFAULT = -1  # the broker id under which the cluster-wide dynamic broker configs live


@dataclass(frozen=True)
class Partition:
    index: int
    replicas: tuple[int, ...]  # preferred leader first
    isr: tuple[int, ...]
    leader: int  # NO_LEADER: offline
    leader_epoch: int = 0  # bumped on every leader change
    partition_epoch: int = 0  # bumped on every change of this partition
    # A reassignment in progress (Kafka's addingReplicas / removingReplicas): replicas is then
    # the target followed by the replicas being removed; both empty when none is in progress.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)


@dataclass(frozen=True)
class Topic:
    name: str
    topic_id: bytes  # 16 raw bytes of a UUID4
    partitions: tuple[Partition, ...]
    configs: dict[str, str] = field(default_factory=dict)  # overrides only; never mutated
    internal: bool = False


class Endpoint(NamedTuple):
    """One Kafka listener a broker advertises to clients."""

    name: str  # the listener name, e.g. "SASL_SSL" or "INTERNAL"
    host: str
    port: int
    security_protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL


@dataclass(frozen=True)
class Broker:
    id: int
    host: str  # the first listener's (``endpoints[0]``), kept for readers of one address
    port: int
    rack: str | None
    replication_endpoint: str
    incarnation_id: bytes  # new on every broker process start
    epoch: int  # the metadata offset of its latest registration, as in KRaft
    fenced: bool = False
    # Asked for a controlled shutdown: leads nothing new, joins no ISR, and heartbeats do not
    # unfence it; a new registration (the restarted process) clears it.
    in_controlled_shutdown: bool = False
    # Every advertised listener, the first one at host:port. Empty for a registration from
    # before listeners were registered: then host:port is its one PLAINTEXT listener.
    endpoints: tuple[Endpoint, ...] = ()

    @property
    def active(self) -> bool:
        """May lead partitions and be in ISRs: unfenced and not shutting down (KRaft's isActive)."""
        return not self.fenced and not self.in_controlled_shutdown


@dataclass(frozen=True)
class ScramCredential:
    """A user's SCRAM credential for one mechanism (RFC 5802): only the salted keys, never the
    password, as Kafka's UserScramCredentialRecord."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys stay out of logs, as Kafka's ScramCredentialValue
        return f"ScramCredential(iterations={self.iterations}, keys=[hidden])"


@dataclass(frozen=True)
class DelegationToken:
    """A delegation token (KIP-48): ``hmac`` is its password; all times wall clock ms."""

    token_id: str
    hmac: bytes
    owner: str  # principal, "User:alice"
    requester: str  # the principal that created it
    renewers: tuple[str, ...]  # principals that may renew or expire it besides these two
    issue_ms: int
    expiry_ms: int  # renewals move it, never past max_ms
    max_ms: int

    def __repr__(self) -> str:
        return (
            f"DelegationToken(token_id={self.token_id!r}, owner={self.owner!r}, "
            f"expiry_ms={self.expiry_ms}, max_ms={self.max_ms}, hmac=[hidden])"
        )

    def may_renew(self, principal: str) -> bool:
        """Kafka's TokenInformation.ownerOrRenewer: who may renew or expire the token."""
        return principal in (self.owner, self.requester) or principal in self.renewers


@dataclass(frozen=True)
class ConfigAlteration:
    """The dynamic configs of one resource to change (AlterConfigs, IncrementalAlterConfigs).

    ``name``: the topic name, or a broker id as a string ("" = the cluster-wide broker default).
    ``replace`` (AlterConfigs): the resource's dynamic configs become exactly ``set``; otherwise
    (IncrementalAlterConfigs) ``set`` is applied, then ``delete`` removed. Values are validated
    by the broker before it calls the meta service.
    """

    resource_type: Literal["topic", "broker"]
    name: str
    set: Mapping[str, str] = field(default_factory=dict)
    delete: tuple[str, ...] = ()
    replace: bool = False


@dataclass(frozen=True)
class ReassignmentInfo:
    """One partition with a reassignment in progress (ListPartitionReassignments)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]  # target first, then the replicas being removed
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
