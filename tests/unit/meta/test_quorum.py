"""The meta quorum's membership logic (meta.quorum): identities, persisted membership, and the
checks of AddRaftVoter / RemoveRaftVoter."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pysyncobj import pickle
from pysyncobj.node import TCPNode

from meta import quorum
from meta.protocol import ErrorCode
from meta.quorum import ADD, REMOVE, UPDATE, Member, Refusal

A = Member(1, "a:9292", "a:9192", "dirA")
B = Member(2, "b:9292", "b:9192", "dirB")
C = Member(3, "c:9292", "c:9192", "dirC")
D = Member(4, "d:9292", "d:9192", "dirD")


def entry(kind: str, member: Member, previous: Member | None = None) -> bytes:
    """A membership log entry, as pysyncobj writes it."""
    return bytes([quorum.MEMBERSHIP]) + pickle.dumps(quorum.change_request(kind, member, previous))


def test_kafka_uuid_text_round_trips_and_zero_is_none() -> None:
    value = uuid.uuid4()
    text = quorum.kafka_uuid(value)
    assert len(text) == 22
    assert "=" not in text
    assert quorum.parse_kafka_uuid(text) == value
    assert quorum.kafka_uuid(None) == quorum.kafka_uuid(uuid.UUID(int=0)) == ""
    assert quorum.parse_kafka_uuid("") is None
    with pytest.raises(ValueError, match="is not a Kafka Uuid"):
        quorum.parse_kafka_uuid("AAAA")


def test_directory_id_is_made_once_and_kept(tmp_path: Path) -> None:
    made = quorum.directory_id(tmp_path, 3)
    assert quorum.parse_kafka_uuid(made) is not None
    assert quorum.directory_id(tmp_path, 3) == made
    text = (tmp_path / quorum.DIRECTORY_FILE).read_text()
    assert "node.id=3" in text
    assert f"directory.id={made}" in text


def test_directory_of_another_node_is_refused(tmp_path: Path) -> None:
    quorum.directory_id(tmp_path, 3)
    with pytest.raises(quorum.DirectoryError, match=r"belongs to node 3, not node\.id 4"):
        quorum.directory_id(tmp_path, 4)


def test_membership_entries_carry_the_identity() -> None:
    request = quorum.parse_change(entry(ADD, D))
    assert request is not None
    assert request[0] == ADD
    assert request[1] == D.raft_address
    assert quorum.member_of(request[2]) == D
    assert quorum.parse_change(b"\x00regular command") is None


def test_changes_apply_and_undo_as_pysyncobj_does() -> None:
    members = {m.raft_address: m for m in (A, B, C)}
    assert quorum.apply_change(members, quorum.change_request(ADD, D))
    assert not quorum.apply_change(members, quorum.change_request(ADD, D))  # already a voter
    assert quorum.apply_change(members, quorum.change_request(REMOVE, A))
    assert not quorum.apply_change(members, quorum.change_request(REMOVE, A))
    moved = Member(2, B.raft_address, "b2:9192", "dirB")
    update = quorum.change_request(UPDATE, moved, previous=B)
    assert quorum.apply_change(members, update)
    assert members[B.raft_address] == moved
    assert quorum.apply_change(members, update, reverse=True)  # a follower's rollback
    assert members[B.raft_address] == B
    assert quorum.apply_change(members, quorum.change_request(ADD, D), reverse=True)
    assert sorted(members) == [B.raft_address, C.raft_address]


def test_a_quorum_never_changed_follows_its_configuration() -> None:
    """A state dump of a quorum never changed (or of Rafka before dynamic quorums) does not
    override meta.quorum.voters: a node may move as before, by changing its configuration."""
    static_dump = quorum.dump_nodes([Member(1, "old:1")], dynamic=False)
    assert not quorum.is_dynamic(static_dump)
    found = quorum.persisted_members([A, B, C], static_dump, [])
    assert sorted(found) == [A.raft_address, B.raft_address, C.raft_address]
    assert quorum.persisted_members([A], None, [b"\x00x"]) == {A.raft_address: A}


def test_a_changed_quorum_is_what_the_data_dir_has_not_the_configuration() -> None:
    dump = quorum.dump_nodes([A, B, C, D], dynamic=True)
    assert quorum.is_dynamic(dump)
    log = [entry(REMOVE, A), entry(UPDATE, Member(2, B.raft_address, "b2:1", "dirB"), B)]
    found = quorum.persisted_members([A, B, C], dump, log)
    assert sorted(m.node_id for m in found.values()) == [2, 3, 4]
    assert found[B.raft_address].grpc_address == "b2:1"
    # without a dump, the log's entries change the bootstrap voters
    found = quorum.persisted_members([A, B, C], None, [entry(ADD, D), entry(REMOVE, C)])
    assert sorted(m.node_id for m in found.values()) == [1, 2, 4]


def test_bare_nodes_of_an_old_dump_get_their_ids_from_the_configuration() -> None:
    members = {"a:9292": quorum.member_of(TCPNode("a:9292"))}
    assert members["a:9292"].node_id == -1
    assert quorum.with_bootstrap_identity(members, [A])["a:9292"] == Member(
        1, "a:9292", "a:9192", ""
    )


@pytest.mark.parametrize(
    ("new", "code", "message"),
    [
        (Member(4, "d:1", "d:2", ""), ErrorCode.INVALID_REQUEST, "didn't include a valid voter"),
        (Member(4, "", "d:2", "x"), ErrorCode.INVALID_REQUEST, "endpoint for the default listener"),
        (Member(2, "d:1", "d:2", "x"), ErrorCode.DUPLICATE_VOTER, "already part of the set"),
        (Member(4, B.raft_address, "d:2", "x"), ErrorCode.DUPLICATE_VOTER, "already a voter's"),
    ],
)
def test_add_refusals(new: Member, code: ErrorCode, message: str) -> None:
    refusal = quorum.check_add([A, B, C], new)
    assert isinstance(refusal, Refusal)
    assert refusal.error_code == code
    assert message in refusal.message


def test_add_accepts_a_new_node() -> None:
    assert quorum.check_add([A, B, C], D) is None


def test_a_node_is_added_only_as_it_runs_and_once_caught_up() -> None:
    assert "is not ready" in quorum.check_caught_up(D, None, -1, 10)
    other_disk = Member(4, D.raft_address, D.grpc_address, "dirX")
    assert "runs with directory id dirX" in quorum.check_caught_up(D, other_disk, 10, 10)
    elsewhere = Member(4, "e:1", D.grpc_address, D.directory_id)
    assert "has the Raft endpoint e:1" in quorum.check_caught_up(D, elsewhere, 10, 10)
    assert "lagging behind" in quorum.check_caught_up(D, D, 9, 10)
    assert quorum.check_caught_up(D, D, 10, 10) == ""


def test_remove_finds_the_voter_by_id_and_directory() -> None:
    assert quorum.find_voter([A, B, C], 2, "dirB") == B
    refusal = quorum.find_voter([A, B, C], 2, "dirX")
    assert isinstance(refusal, Refusal)
    assert refusal.error_code == ErrorCode.VOTER_NOT_FOUND
    assert "Cannot remove voter ReplicaKey(id=2, directoryId=dirX)" in refusal.message
    unknown = Member(5, "e:1")  # a voter of meta.quorum.voters not started yet
    assert quorum.find_voter([A, unknown], 5, "") == unknown
