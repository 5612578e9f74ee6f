"""UnregisterBroker (64) v0: remove a broker's registration from the meta service (Kafka's
`Admin.unregisterBroker`, `kafka-cluster.sh unregister`), to forget a broker that was
decommissioned. ALTER on the CLUSTER, else CLUSTER_AUTHORIZATION_FAILED; an id no broker has is
BROKER_ID_NOT_REGISTERED, as Kafka's controller answers.

As Kafka's ReplicationControlManager.unregisterBroker: the broker leaves every ISR and its
leaderships move to other in-sync replicas (or, for a partition it was the last in-sync replica
of, the partition goes offline), then its registration goes; its replica assignments stay (move
them with AlterPartitionReassignments). A broker still running is not broken by it: its next
heartbeat is answered BROKER_ID_NOT_REGISTERED and it registers again (a new broker epoch),
leading its offline partitions again and rejoining ISRs as it catches up.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType
from meta.client import MetaError

if TYPE_CHECKING:
    from kio.schema.unregister_broker import v0

UnregisterBrokerRequest: TypeAlias = "v0.UnregisterBrokerRequest"
"""The kio classes of the versions served."""

API_KEY = 64
VERSIONS = (0, 0)

log = logging.getLogger("rafka.cluster_admin")

_PROPAGATION_S = 10.0  # how long to wait for our cache to show the broker gone


async def handle(ctx: RequestContext, req: UnregisterBrokerRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    broker_id = req.broker_id
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        message = f"{ctx.conn.principal} may not ALTER the cluster (UnregisterBroker)"
        return b.UnregisterBrokerResponse(
            throttle_time=0,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=message,
        )
    try:
        code, message = await ctx.services.meta.unregister_broker(broker_id)
    except MetaError as e:
        log.warning(
            "UnregisterBroker of broker %d failed: the meta service did not answer (%s); check "
            "that the meta quorum is up, then retry",
            broker_id,
            e,
        )
        return b.UnregisterBrokerResponse(
            throttle_time=0,
            error_code=ErrorCode.request_timed_out,
            error_message=f"meta service unavailable: {e}",
        )
    if code != ErrorCode.none:
        log.info("UnregisterBroker of broker %d refused: %s", broker_id, message)
        return b.UnregisterBrokerResponse(
            throttle_time=0, error_code=code, error_message=message or None
        )
    log.info(
        "broker %d unregistered by %s (%s); a broker still running registers again",
        broker_id,
        ctx.conn.principal,
        ctx.conn.peer,
    )
    cache = ctx.services.cache
    await cache.wait_until(lambda: broker_id not in cache.brokers, _PROPAGATION_S)
    return b.UnregisterBrokerResponse(
        throttle_time=0, error_code=ErrorCode.none, error_message=None
    )
