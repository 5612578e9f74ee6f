"""`rafka groups describe` of a share group: its members and assignments, then per
share-partition the start offset, the lag and the members it is shared by."""

from __future__ import annotations

import typer

from cluster.admin_share_groups import ShareGroupDescription
from cluster.cli_common import print_table


def print_share_group(d: ShareGroupDescription) -> None:
    typer.echo(
        f"group {d.group} (share): {d.state}, epoch {d.group_epoch}, assignor {d.assignor}, "
        f"coordinator {d.coordinator}, {len(d.members)} member(s)"
    )
    print_table(
        None,
        ["CONSUMER-ID", "HOST", "CLIENT-ID", "ASSIGNMENT"],
        [
            [
                m.member_id,
                m.host,
                m.client_id,
                ",".join(f"{t}-{p}" for t, p in m.partitions) or "-",
            ]
            for m in d.members
        ],
    )
    print_table(
        None,
        ["TOPIC", "PARTITION", "START-OFFSET", "LAG", "MEMBERS"],
        [
            [
                r.topic,
                r.partition,
                r.start_offset if r.start_offset >= 0 else "-",
                r.lag if r.lag >= 0 else "-",
                len(r.members),
            ]
            for r in d.partitions
        ],
    )
