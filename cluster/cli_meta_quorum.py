"""`rafka meta-quorum`: the meta quorum, as kafka-metadata-quorum.sh shows and changes the
KRaft quorum, over the Kafka port (DescribeQuorum, AddRaftVoter, RemoveRaftVoter; the brokers
ask the meta service's Raft leader).

    rafka meta-quorum describe [--replication]
    rafka meta-quorum add-controller --config meta-4.properties   # the new node's own config
    rafka meta-quorum remove-controller --controller-id 3 --controller-directory-id ID
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from cluster.cli_common import (
    DEFAULT_BOOTSTRAP,
    BootstrapOpt,
    CommandConfigOpt,
    admin_errors,
    brokers,
    print_table,
)

DESCRIBE_QUORUM, ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 55, 80, 81
METADATA_TOPIC = "__cluster_metadata"

meta_quorum_app = typer.Typer(
    help="The meta quorum's voters and observers, and changes to them (as "
    "kafka-metadata-quorum.sh does)."
)


@meta_quorum_app.command("describe")
def describe(
    replication: Annotated[
        bool, typer.Option("--replication", help="One row per voter and observer.")
    ] = False,
    status: Annotated[bool, typer.Option("--status", help="The quorum's status (default).")] = True,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Leader, epoch, high watermark and voters (--status), or each replica's progress."""
    from cluster.admin import check
    from cluster.kafka_client import builder

    b = builder(DESCRIBE_QUORUM, 2)
    topics = [
        b.TopicData(topic_name=METADATA_TOPIC, partitions=[b.PartitionData(partition_index=0)])
    ]
    with admin_errors():
        conn = brokers(bootstrap, command_config).any()
        try:
            answer = conn.call(DESCRIBE_QUORUM, 2, topics=topics)
        finally:
            conn.sock.close()
        check("DescribeQuorum", answer.error_code, answer.error_message)
        [partition] = answer.topics[0].partitions
        check("DescribeQuorum", partition.error_code, partition.error_message)
    if replication:
        _print_replication(partition)
        return
    del status
    endpoints = {
        n.node_id: [f"{e.name}://{e.host}:{e.port}" for e in n.listeners] for n in answer.nodes
    }
    typer.echo(f"LeaderId:       {partition.leader_id}")
    typer.echo(f"LeaderEpoch:    {partition.leader_epoch}")
    typer.echo(f"HighWatermark:  {partition.high_watermark}")
    for title, replicas in (
        ("Voters", partition.current_voters),
        ("Observers", partition.observers),
    ):
        rows = [
            f"{r.replica_id} ({_directory(r)}) {' '.join(endpoints.get(r.replica_id, []))}"
            for r in replicas
        ]
        typer.echo(f"{title + ':':<16}{', '.join(rows) or '-'}")


def _print_replication(partition: Any) -> None:
    now = int(time.time() * 1000)

    def row(r: Any, status: str) -> list[object]:
        lag = partition.high_watermark - r.log_end_offset if r.log_end_offset >= 0 else "-"
        ago = f"{now - r.last_fetch_timestamp} ms ago" if r.last_fetch_timestamp > 0 else "-"
        return [r.replica_id, _directory(r), r.log_end_offset, lag, ago, status]

    rows = [
        row(r, "Leader" if r.replica_id == partition.leader_id else "Follower")
        for r in partition.current_voters
    ] + [row(r, "Observer") for r in partition.observers]
    print_table(
        None, ["NODE", "DIRECTORY-ID", "LOG-END-OFFSET", "LAG", "LAST-FETCH", "STATUS"], rows
    )


def _directory(replica: Any) -> str:
    from meta.quorum import kafka_uuid

    return kafka_uuid(replica.replica_directory_id) or "-"


@meta_quorum_app.command("add-controller")
def add_controller(
    config: Annotated[
        Path,
        typer.Option(
            "--config",
            "-c",
            help="The new meta node's own .properties (node.id, meta.raft.listener, "
            "meta.listener / meta.quorum.listeners, meta.data.dir); start the node first.",
        ),
    ],
    timeout_ms: Annotated[
        int, typer.Option("--timeout-ms", help="How long the node may take to catch up.")
    ] = 10000,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Add a running meta node (an observer, started with an empty meta.data.dir) to the
    voters, once it has caught up (AddRaftVoter)."""
    from cluster.admin import check
    from cluster.kafka_client import builder, split_address
    from meta import quorum
    from meta.config import MetaConfig

    with admin_errors():
        try:
            node = MetaConfig.load(config, {})
            directory = quorum.directory_id(node.meta_data_dir, node.node_id)
        except (ValueError, quorum.DirectoryError) as e:
            raise typer.BadParameter(str(e)) from None
        b = builder(ADD_RAFT_VOTER, 1)
        listeners = []
        for name, address in (
            (quorum.RAFT_LISTENER, node.raft_address()),
            (quorum.META_LISTENER, node.own_grpc_address()),
        ):
            host, port = split_address(address)
            listeners.append(b.Listener(name=name, host=host, port=port))
        conn = brokers(bootstrap, command_config).any(timeout=timeout_ms / 1000 + 30)
        try:
            answer = conn.call(
                ADD_RAFT_VOTER,
                1,
                cluster_id=None,
                timeout=timedelta(milliseconds=timeout_ms),
                voter_id=node.node_id,
                voter_directory_id=quorum.parse_kafka_uuid(directory),
                listeners=listeners,
                ack_when_committed=True,
            )
        finally:
            conn.sock.close()
        check(f"AddRaftVoter of meta node {node.node_id}", answer.error_code, answer.error_message)
    typer.echo(f"Added meta node {node.node_id} (directory id {directory}) to the voters.")


@meta_quorum_app.command("remove-controller")
def remove_controller(
    controller_id: Annotated[int, typer.Option("--controller-id", help="The voter's node id.")],
    controller_directory_id: Annotated[
        str,
        typer.Option(
            "--controller-directory-id",
            help="Its directory id (`describe` shows it; empty if it is not known).",
        ),
    ],
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Remove a voter (RemoveRaftVoter); stop that meta node afterwards."""
    from cluster.admin import check
    from meta import quorum

    with admin_errors():
        try:
            directory = quorum.parse_kafka_uuid(controller_directory_id)
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
        conn = brokers(bootstrap, command_config).any(timeout=60)
        try:
            answer = conn.call(
                REMOVE_RAFT_VOTER,
                0,
                cluster_id=None,
                voter_id=controller_id,
                voter_directory_id=directory,
            )
        finally:
            conn.sock.close()
        check(
            f"RemoveRaftVoter of meta node {controller_id}", answer.error_code, answer.error_message
        )
    typer.echo(f"Removed meta node {controller_id} from the voters.")
