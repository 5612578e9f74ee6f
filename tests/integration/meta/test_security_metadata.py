"""Security metadata in real meta node processes: ACLs, SCRAM credentials and delegation tokens
written through MetaClient reach brokers' metadata caches over the watch stream, and survive a
restart of every node."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from dataplane.metadata_cache import MetadataCache
from meta.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from meta.client import MetaClient
from meta.model import DelegationToken, ScramCredential
from meta.protocol import ErrorCode

from .harness import MetaNodes, eventually, leader_id

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

WRITE_ORDERS = AclBinding(
    ResourceType.TOPIC,
    "orders-",
    PatternType.PREFIXED,
    "User:alice",
    "*",
    AclOperation.WRITE,
    AclPermissionType.ALLOW,
)
KEYS = ScramCredential(b"salt" * 4, b"k" * 32, b"s" * 32, 4096)


@contextlib.asynccontextmanager
async def broker_cache(nodes: MetaNodes, node_id: int) -> AsyncIterator[MetadataCache]:
    """A metadata cache fed by one meta node's watch stream, as a broker feeds its own."""
    cache = MetadataCache()

    async def feed(client: MetaClient) -> None:
        async for event in client.watch(cache.offset):
            cache.apply(event)

    async with nodes.client([nodes.address(node_id)]) as client:
        task = asyncio.create_task(feed(client))
        try:
            yield cache
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_security_metadata_reaches_every_broker_and_survives_restarts(
    meta_nodes_factory,
) -> None:
    nodes: MetaNodes = meta_nodes_factory(3)
    nodes.start_all()
    async with nodes.client() as client:
        await leader_id(client)
        async with broker_cache(nodes, 2) as b1, broker_cache(nodes, 3) as b2:
            caches = (b1, b2)
            await eventually(lambda: all(c.cluster_id for c in caches), what="snapshots")

            # An ACL is in every cache within a second of its creation, and gone as fast.
            assert await client.create_acls([WRITE_ORDERS]) == [(ErrorCode.NONE, "")]
            await eventually(lambda: all(WRITE_ORDERS in c.acls for c in caches), timeout=1.0)
            everything_of_alice = AclBindingFilter(
                ResourceType.ANY,
                None,
                PatternType.ANY,
                "User:alice",
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
            [(code, _, deleted)] = await client.delete_acls([everything_of_alice])
            assert (code, deleted) == (ErrorCode.NONE, [WRITE_ORDERS])
            await eventually(lambda: all(c.acls == () for c in caches), timeout=1.0)
            await client.create_acls([WRITE_ORDERS])

            # SCRAM credentials, with Kafka's errors.
            results = await client.alter_scram_credentials(
                [("alice", "SCRAM-SHA-256", KEYS)], [("bob", "SCRAM-SHA-512")]
            )
            assert sorted(results) == [
                ("alice", ErrorCode.NONE, ""),
                (
                    "bob",
                    ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                ),
            ]
            key = ("alice", "SCRAM-SHA-256")
            await eventually(lambda: all(c.scram_credentials.get(key) == KEYS for c in caches))

            # Brokers register every listener they advertise.
            listeners = [
                ("INTERNAL", "10.0.0.7", 9092, "PLAINTEXT"),
                ("SASL_SSL", "h", 9093, "SASL_SSL"),
            ]
            await client.register_broker(
                7, "10.0.0.7", 9092, incarnation_id=b"7", endpoints=listeners
            )
            await client.register_broker(8, "10.0.0.8", 9092, incarnation_id=b"8")
            await eventually(lambda: all(8 in c.brokers for c in caches), what="registrations")
            for c in caches:
                assert c.brokers[7].endpoints == {
                    "INTERNAL": ("10.0.0.7", 9092),
                    "SASL_SSL": ("h", 9093),
                }
                assert c.brokers[8].endpoints == {"PLAINTEXT": ("10.0.0.8", 9092)}

            # Delegation tokens: renewed by the owner, refused to others, swept when expired.
            now = int(time.time() * 1000)
            token = DelegationToken(
                "long", b"hmac-long", "User:alice", "User:alice", (), now, now + 60_000,
                now + 600_000,
            )  # fmt: skip
            short = DelegationToken(
                "short", b"hmac-short", "User:alice", "User:alice", (), now, now + 300,
                now + 300,
            )  # fmt: skip
            assert await client.create_delegation_token(token) == (ErrorCode.NONE, "")
            assert await client.create_delegation_token(short) == (ErrorCode.NONE, "")
            code, _, expiry = await client.renew_delegation_token(
                b"hmac-long", "User:alice", 120_000, now
            )
            assert (code, expiry) == (ErrorCode.NONE, now + 120_000)
            code, _, _ = await client.expire_delegation_token(b"hmac-long", "User:eve", -1, now)
            assert code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
            await eventually(
                lambda: all(
                    list(c.delegation_tokens) == ["long"]
                    and c.delegation_tokens["long"].expiry_ms == now + 120_000
                    for c in caches
                ),
                what="the renewed token, and the short one swept",
            )

    # Everything is in the Raft state: it is all there after every node restarted.
    nodes.stop_all()
    nodes.start_all()
    async with nodes.client() as client:
        await leader_id(client)
        async with broker_cache(nodes, 1) as cache:
            await eventually(lambda: bool(cache.cluster_id), what="a snapshot")
            assert cache.acls == (WRITE_ORDERS,)
            assert cache.scram_credentials == {("alice", "SCRAM-SHA-256"): KEYS}
            assert list(cache.delegation_tokens) == ["long"]
