"""A meta node that comes back with a new IP address (what every restart of a Kubernetes pod
does) must rejoin the Raft quorum, found again through its DNS name.

While the node is down its name does not resolve, so its peers keep its old address and dial
it; nothing answers there. pysyncobj alone would wait for the kernel to give up on that
connect (about two minutes) before resolving the name again, leaving the node with the
smallest address (it never dials: the greater address does) cut off - and after one more
loss, no majority. meta/raft.py's `ReresolvingTransport` abandons a connect after
connectionTimeout, so the name is resolved again within seconds (`dnsCacheTime=2`). This test
then kills another node right away: meta-1 and the survivor must agree on a leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.containers


async def _leader(address: str, internal: dict[str, str]) -> int:
    from common.internal_security import InternalSecurity
    from meta.client import MetaClient

    security = InternalSecurity.from_properties(internal)
    async with MetaClient(
        [address], timeout_s=3.0, attempt_timeout_s=2.0, security=security
    ) as client:
        return (await client.describe_cluster()).leader_id


@pytest.mark.timeout(180)
def test_meta_node_with_a_new_ip_rejoins(rafka_image: str, tmp_path: Path) -> None:
    from tests.integration.containers.cluster import ContainerCluster

    cluster = ContainerCluster(tmp_path, brokers=0, metas=3)
    try:
        cluster.start()
        address = dict(zip(["meta-1", "meta-2", "meta-3"], cluster.meta_servers, strict=True))
        cluster.kill("meta-1")
        cluster.readdress("meta-1", 31)
        cluster.start_node("meta-1")
        cluster.wait_ready(60, names=["meta-1"])
        # Leave meta-1 with one peer: the quorum now needs it.
        leader = asyncio.run(_leader(address["meta-2"], cluster.internal_properties))
        victim = "meta-2" if leader == 2 else "meta-3"
        survivor = "meta-3" if victim == "meta-2" else "meta-2"
        cluster.kill(victim)
        deadline = time.monotonic() + 30
        seen: dict[str, int] = {}
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                seen = {
                    n: asyncio.run(_leader(address[n], cluster.internal_properties))
                    for n in ("meta-1", survivor)
                }
                ids = set(seen.values())
                if len(ids) == 1 and ids <= {1, int(survivor[-1])}:
                    return
            time.sleep(1.0)
        pytest.fail(f"no common leader of meta-1 and {survivor} after 30 s: {seen}")
    finally:
        cluster.stop()
        cluster.destroy()
