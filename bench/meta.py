"""Meta service writes: latency of one Raft write and the rate of topic creation.

    python bench/meta.py [--nodes 3] [--writes 300] [--topics 600] [--clients 1,16] [--dir D]

Starts a quorum of ``--nodes`` meta node processes (data dirs under ``--dir``, on the disk, so
the journal's syncs cost what they cost), registers three brokers, and prints:

- write latency: p50 / p99 / max of ``--writes`` AllocateProducerIds calls, one after another
  (each one Raft command, committed by a majority and applied before the answer);
- topic-creation rate: ``--topics`` single-partition RF 3 topics created by each number of
  concurrent clients in ``--clients`` (one CreateTopics call per topic), in topics/s.

Figures only: nothing here fails on a timing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cluster.local import LocalCluster, free_base_port
from meta.client import MetaClient
from proto import meta_pb2


async def run(args: argparse.Namespace, root: Path) -> None:
    overrides = {"broker.session.timeout.ms": "3600000"}  # the brokers below never heartbeat
    cluster = LocalCluster(0, args.nodes, root, free_base_port(0, args.nodes), overrides)
    cluster.start()
    try:
        async with cluster.meta_client() as client:
            while (await client.describe_cluster()).leader_id <= 0:
                await asyncio.sleep(0.05)
            epochs = {
                b: await client.register_broker(
                    b, "127.0.0.1", 9091 + b, incarnation_id=uuid.uuid4().bytes
                )
                for b in (1, 2, 3)
            }
            await write_latency(client, epochs[1], args.writes)
            for clients in args.clients:
                await topic_rate(cluster, clients, args.topics)
    finally:
        cluster.stop()


async def write_latency(client: MetaClient, epoch: int, writes: int) -> None:
    latencies = []
    for _ in range(writes):
        start = time.perf_counter()
        await client.allocate_producer_ids(1, epoch)
        latencies.append((time.perf_counter() - start) * 1000)
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"meta write latency (AllocateProducerIds, {writes} in a row): "
        f"p50 {statistics.median(latencies):.2f} ms, p99 {p99:.2f} ms, max {latencies[-1]:.2f} ms"
    )


async def topic_rate(cluster: LocalCluster, clients: int, topics: int) -> None:
    run_id = uuid.uuid4().hex[:8]
    names = iter(range(topics))

    async def creator() -> None:
        async with cluster.meta_client() as client:
            for n in names:
                topic = meta_pb2.CreatableTopic(
                    name=f"t-{run_id}-{n}", num_partitions=1, replication_factor=3
                )
                [result] = await client.create_topics([topic])
                assert result.error_code == 0, result.error_message

    start = time.perf_counter()
    await asyncio.gather(*(creator() for _ in range(clients)))
    elapsed = time.perf_counter() - start
    print(
        f"topic creation, {clients} concurrent client(s): {topics} topics in {elapsed:.2f} s, "
        f"{topics / elapsed:.0f} topics/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--topics", type=int, default=600)
    parser.add_argument("--clients", default="1,16", help="comma-separated client counts")
    parser.add_argument("--dir", type=Path, default=None, help="where the data dirs go")
    args = parser.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    with tempfile.TemporaryDirectory(prefix="rafka-bench-meta-", dir=args.dir) as root:
        asyncio.run(run(args, Path(root)))


if __name__ == "__main__":
    main()
