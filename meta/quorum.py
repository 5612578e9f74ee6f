"""The meta quorum's membership (KIP-853 dynamic quorums on pysyncobj's membership changes).

pysyncobj knows a voter by its Raft address ("host:port") and changes the set of voters through
membership entries of its log: ``["add", address, node]`` and ``["rem", address, node]``, in
effect on each node as soon as the entry is in its log, at most one uncommitted at a time. Here
each node in such an entry carries the voter's Kafka identity besides its address: node id,
directory id (the node's ``meta.properties``, as Kafka's) and gRPC address. An ``"upd"`` entry
(``["upd", address, new node, old node]``) changes those of a voter without touching the
quorum (Kafka's UpdateRaftVoter). The entries, and the state dump's copy of the set, persist the
membership: ``meta.quorum.voters`` is only the set a new cluster starts from (`persisted_members`).

A meta node whose Raft address is not among the voters is an observer: it follows the log
without a vote (pysyncobj's read-only connection) until an ``add`` entry names it.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pysyncobj.node import TCPNode

from meta import raft_port
from meta.journal import write_atomically
from meta.protocol import ErrorCode

DIRECTORY_FILE = "meta.properties"
MEMBERSHIP = 2  # pysyncobj's _COMMAND_TYPE.MEMBERSHIP: the first byte of a membership entry
ADD, REMOVE, UPDATE = "add", "rem", "upd"
# Listener names of a meta node's endpoints in Kafka's voter APIs (AddRaftVoter, DescribeQuorum)
RAFT_LISTENER, META_LISTENER = "RAFT", "META"


class DirectoryError(Exception):
    """meta.properties cannot be read, or belongs to another node."""


def kafka_uuid(value: uuid.UUID | None) -> str:
    """Kafka's text form of a Uuid (URL-safe base64, no padding); "" for none (zero)."""
    if value is None or value.int == 0:
        return ""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def parse_kafka_uuid(text: str) -> uuid.UUID | None:
    """The Uuid of Kafka's text form; None for "" (raises ValueError if malformed)."""
    if not text:
        return None
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a Kafka Uuid")
    return uuid.UUID(bytes=raw)


def directory_id(data_dir: Path, node_id: int) -> str:
    """This node's directory id, created once in ``data_dir/meta.properties`` (Kafka's
    ``directory.id``): a disk that is replaced gets a new one, so a voter that lost its log is
    not taken for the one that had it. Raises DirectoryError if the file names another node."""
    path = data_dir / DIRECTORY_FILE
    try:
        text = path.read_text() if path.exists() else ""
    except OSError as exc:
        raise DirectoryError(f"{path} cannot be read ({exc.strerror})") from exc
    props = dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and line[:1] != "#"
    )
    if props:
        if props.get("node.id") != str(node_id):
            raise DirectoryError(
                f"{path} belongs to node {props.get('node.id')}, not node.id {node_id}: this "
                "meta.data.dir is another node's; point meta.data.dir at this node's own"
            )
        found = props.get("directory.id", "")
        try:
            if parse_kafka_uuid(found) is not None:
                return found
        except ValueError:
            pass
        raise DirectoryError(f"{path} has no valid directory.id ({found!r})")
    created = kafka_uuid(uuid.uuid4())
    write_atomically(path, f"version=1\nnode.id={node_id}\ndirectory.id={created}\n".encode())
    return created


@dataclass(frozen=True)
class Member:
    """A voter (or an observer) of the meta quorum."""

    node_id: int
    raft_address: str  # its identity for pysyncobj
    grpc_address: str = ""
    directory_id: str = ""  # "" while unknown (a voter of meta.quorum.voters not yet started)

    def key(self) -> str:
        """Kafka's ReplicaKey text, for messages."""
        return f"ReplicaKey(id={self.node_id}, directoryId={self.directory_id or '<none>'})"


def node_of(member: Member) -> TCPNode:
    """The pysyncobj node of a member (what membership entries and state dumps hold)."""
    return TCPNode(
        member.raft_address,
        node_id=member.node_id,
        grpc_address=member.grpc_address,
        directory_id=member.directory_id,
    )


def member_of(node: Any) -> Member:
    """The member a pysyncobj node stands for (-1 as id if it carries none)."""
    return Member(
        int(getattr(node, "node_id", -1)),
        str(node.id),
        str(getattr(node, "grpc_address", "")),
        str(getattr(node, "directory_id", "")),
    )


def change_request(kind: str, member: Member, previous: Member | None = None) -> list[Any]:
    """A membership entry's request (pysyncobj's list; ``previous`` for UPDATE only)."""
    request: list[Any] = [kind, member.raft_address, node_of(member)]
    if kind == UPDATE:
        request.append(node_of(previous or member))
    return request


def parse_change(command: bytes) -> list[Any] | None:
    """The request of a membership log entry; None for any other entry."""
    if command[:1] != bytes([MEMBERSHIP]):
        return None
    request = raft_port.loads(command[1:])
    return request if isinstance(request, list) and len(request) >= 2 else None


def apply_change(members: dict[str, Member], request: Sequence[Any], reverse: bool = False) -> bool:
    """Apply (or undo) a membership request to ``members`` (by Raft address); whether it
    changed anything (pysyncobj's rules: adding a member or removing a non-member does not)."""
    kind, address = request[0], str(request[1])
    node = request[2] if len(request) > 2 else TCPNode(address)
    if kind == UPDATE:
        if address not in members:
            return False
        members[address] = member_of(request[3] if reverse and len(request) > 3 else node)
        return True
    adding = (kind == ADD) != reverse
    if kind not in (ADD, REMOVE) or (address in members) == adding:
        return False
    if adding:
        members[address] = member_of(node)
    else:
        del members[address]
    return True


def is_dynamic(cluster: Iterable[Any]) -> bool:
    """Whether a state dump's set of nodes is of a quorum changed since its bootstrap (its
    nodes are marked so by `dump_nodes`): then it, not ``meta.quorum.voters``, is the quorum."""
    return any(getattr(node, "dynamic", False) for node in cluster)


def dump_nodes(members: Iterable[Member], dynamic: bool) -> set[TCPNode]:
    """The set of nodes a state dump keeps, marked with whether the quorum was changed."""
    nodes = set()
    for member in members:
        node = node_of(member)
        if dynamic:
            node.dynamic = True
        nodes.add(node)
    return nodes


def persisted_members(
    bootstrap: Iterable[Member], dump_cluster: Iterable[Any] | None, log: Iterable[bytes]
) -> dict[str, Member]:
    """The voters as the node's data dir has them: the state dump's set if the quorum was
    changed before it (else the bootstrap voters of ``meta.quorum.voters``: a quorum never
    changed follows its configuration, as before dynamic quorums), changed by the membership
    entries of the Raft log, in order (committed or not: Raft's rule is that a node uses the
    latest configuration in its log)."""
    if dump_cluster is not None and is_dynamic(dump_cluster):
        members = {m.raft_address: m for m in map(member_of, dump_cluster)}
    else:
        members = {m.raft_address: m for m in bootstrap}
    for command in log:
        request = parse_change(command)
        if request is not None:
            apply_change(members, request)
    return members


def with_bootstrap_identity(
    members: Mapping[str, Member], bootstrap: Iterable[Member]
) -> dict[str, Member]:
    """``members`` with the node id and gRPC address of ``meta.quorum.voters`` /
    ``meta.quorum.listeners`` for those that carry none (state dumps of Rafka before dynamic
    quorums hold bare pysyncobj nodes)."""
    known = {m.raft_address: m for m in bootstrap}
    result = dict(members)
    for address, member in members.items():
        config = known.get(address)
        if config is not None and member.node_id < 0:
            result[address] = Member(
                config.node_id, address, config.grpc_address, member.directory_id
            )
    return result


@dataclass(frozen=True)
class Refusal:
    """A voter change refused, with Kafka's error and message."""

    error_code: ErrorCode
    message: str


def check_add(voters: Iterable[Member], new: Member) -> Refusal | None:
    """Kafka's AddRaftVoter checks on the request itself (before the node's progress)."""
    voters = list(voters)
    if new.node_id < 0 or not new.directory_id:
        return Refusal(ErrorCode.INVALID_REQUEST, "Add voter request didn't include a valid voter")
    if not new.raft_address:
        return Refusal(
            ErrorCode.INVALID_REQUEST,
            f"Add voter request didn't include the endpoint for the default listener "
            f"{RAFT_LISTENER}",
        )
    if any(v.node_id == new.node_id for v in voters):
        return Refusal(
            ErrorCode.DUPLICATE_VOTER,
            f"The voter id for {new.key()} is already part of the set of voters {_keys(voters)}.",
        )
    if any(v.raft_address == new.raft_address for v in voters):
        return Refusal(
            ErrorCode.DUPLICATE_VOTER,
            f"The Raft endpoint {new.raft_address} of {new.key()} is already a voter's "
            f"(set of voters {_keys(voters)})",
        )
    return None


def check_caught_up(new: Member, observed: Member | None, log_end: int, target: int) -> str:
    """Why the observer ``observed`` (as it reported itself) cannot be added as ``new`` yet:
    "" when it can (it is the same node and its log reaches ``target``)."""
    if observed is None:
        return (
            f"New voter {new.key()} is not ready to receive requests: no meta node with id "
            f"{new.node_id} follows the Raft log (start it, with an empty meta.data.dir and "
            "meta.quorum.voters naming the current voters, before adding it)"
        )
    if observed.directory_id != new.directory_id:
        return (
            f"The meta node {new.node_id} runs with directory id {observed.directory_id}, not "
            f"{new.directory_id}"
        )
    if observed.raft_address != new.raft_address:
        return (
            f"The meta node {new.node_id} has the Raft endpoint {observed.raft_address}, not "
            f"{new.raft_address}"
        )
    if log_end < target:
        return f"{new.key()} is lagging behind (log end {log_end}, leader's {target})"
    return ""


def find_voter(voters: Iterable[Member], node_id: int, directory: str) -> Member | Refusal:
    """The voter RemoveRaftVoter names (id and directory id, "" matching a voter whose
    directory id is not known), else VOTER_NOT_FOUND as Kafka's."""
    voters = list(voters)
    for voter in voters:
        if voter.node_id == node_id and voter.directory_id == directory:
            return voter
    wanted = Member(node_id, "", directory_id=directory)
    return Refusal(
        ErrorCode.VOTER_NOT_FOUND,
        f"Cannot remove voter {wanted.key()} from the set of voters {_keys(voters)}",
    )


def _keys(voters: Iterable[Member]) -> str:
    return "[" + ", ".join(v.key() for v in sorted(voters, key=lambda v: v.node_id)) + "]"
