"""The pipeline's input: a clickstream-style stream of shop orders, as JSON, keyed by store.

    {"order_id": "o-000042", "store": "berlin", "sku": "sku-7", "quantity": 2,
     "amount_cents": 2598, "event_time": "2026-12-04T00:00:42.000Z"}

`make_orders` builds a deterministic data set; `expected_aggregates` is the batch job's answer
computed in plain Python, which the tests compare with Spark's.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

STORES = ("berlin", "lisbon", "oslo", "paris", "rome", "tokyo")
# Midnight (UTC) three days ago: whole windows, and records recent enough that a topic's
# retention (Kafka's default 7 days) keeps them and no timestamp lands in the future.
BASE_TIME = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=3)


@dataclass(frozen=True)
class Order:
    order_id: str
    store: str
    sku: str
    quantity: int
    amount_cents: int
    event_time: datetime

    def to_json(self) -> str:
        return json.dumps(
            {
                "order_id": self.order_id,
                "store": self.store,
                "sku": self.sku,
                "quantity": self.quantity,
                "amount_cents": self.amount_cents,
                "event_time": self.event_time.strftime("%Y-%m-%dT%H:%M:%S.")
                + f"{self.event_time.microsecond // 1000:03d}Z",
            },
            separators=(",", ":"),
        )


def make_orders(
    n: int,
    start_s: float = 0.0,
    end_s: float | None = None,
    seed: int = 7,
    first_id: int = 0,
) -> list[Order]:
    """n orders with event times spread evenly over [start_s, end_s) seconds after BASE_TIME
    (end_s defaults to start_s + n)."""
    rng = random.Random(seed)
    end_s = start_s + n if end_s is None else end_s
    step = (end_s - start_s) / n
    out = []
    for i in range(n):
        qty = rng.randint(1, 4)
        price = rng.choice((199, 499, 1299, 2599, 9900))
        out.append(
            Order(
                order_id=f"o-{first_id + i:07d}",
                store=rng.choice(STORES),
                sku=f"sku-{rng.randint(1, 40)}",
                quantity=qty,
                amount_cents=qty * price,
                event_time=BASE_TIME + timedelta(seconds=start_s + i * step),
            )
        )
    return out


def produce_orders(bootstrap: str, topic: str, orders: Iterable[Order], **conf: str) -> int:
    """Produce orders keyed by store (the Java client's murmur2 partitioning), idempotently
    and with acks=all, so a broker failover neither loses nor duplicates one."""
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "partitioner": "murmur2_random",
            **conf,
        }
    )
    n = 0
    for o in orders:
        while True:
            try:
                producer.produce(
                    topic,
                    key=o.store.encode(),
                    value=o.to_json().encode(),
                    timestamp=int(o.event_time.timestamp() * 1000),
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.05)
        n += 1
    if producer.flush(60) or errors:
        raise RuntimeError(f"producing orders failed: {errors[:3]}")
    return n


@dataclass(frozen=True)
class WindowAggregate:
    window_start: datetime
    window_end: datetime
    store: str
    orders: int
    items: int
    revenue_cents: int


def window_of(t: datetime, window_s: int) -> datetime:
    epoch = int(t.timestamp())
    return datetime.fromtimestamp(epoch - epoch % window_s, tz=UTC)


def expected_aggregates(
    orders: Iterable[Order], window_s: int = 60
) -> dict[tuple[datetime, str], WindowAggregate]:
    acc: dict[tuple[datetime, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for o in orders:
        a = acc[(window_of(o.event_time, window_s), o.store)]
        a[0] += 1
        a[1] += o.quantity
        a[2] += o.amount_cents
    return {
        (w, s): WindowAggregate(w, w + timedelta(seconds=window_s), s, *v)
        for (w, s), v in acc.items()
    }
