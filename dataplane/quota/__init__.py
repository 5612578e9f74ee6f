"""Client quotas (KIP-13, KIP-124, KIP-219, KIP-599, KIP-612), as Kafka's broker enforces them.

- ``sensor``: Kafka's sampled Rate and KIP-599's token bucket, with its throttle-time formulas;
- ``resolve``: which quota (and which shared sensor) applies to a (user, client-id);
- ``manager``: the managers of producer_byte_rate, consumer_byte_rate, request_percentage,
  controller_mutation_rate and connection_creation_rate, fed by the metadata cache;
- ``throttle``: what handlers and the server call: record, set throttle_time_ms, mute.

The quotas themselves live in the meta service's Raft state (``meta.quotas``).
"""

from __future__ import annotations

from dataplane.quota.manager import QuotaManagers
from dataplane.quota.sensor import WindowConfig

__all__ = ["QuotaManagers", "WindowConfig", "quota_managers"]


def quota_managers(
    window_num: int, window_s: int, controller_window_num: int, controller_window_s: int
) -> QuotaManagers:
    """The managers for the broker's quota.window.* and controller.quota.window.* settings."""
    return QuotaManagers(
        WindowConfig(window_num, window_s * 1000),
        WindowConfig(controller_window_num, controller_window_s * 1000),
    )
