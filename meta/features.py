"""Decisions of the metadata controller on finalized features: the levels Rafka supports and
Kafka's checks of an UpdateFeatures request.

Pure functions, like the rest of the controller's decisions: the state machine calls them while
applying a Raft command, on every node and on every replay.
"""

from __future__ import annotations

from enum import IntEnum


class UpgradeType(IntEnum):
    """Kafka's FeatureUpdate.UpgradeType (same values as UpdateFeatures v1+ on the wire)."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


# The feature levels Rafka implements: transaction.version 2 is KIP-890 part 2 (EndTxn v5),
# group.version 1 the KIP-848 consumer group protocol (ConsumerGroupHeartbeat), streams.version
# 1 the KIP-1071 streams group protocol (StreamsGroupHeartbeat).
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    "group.version": (0, 1),
    "streams.version": (0, 1),
    "transaction.version": (0, 2),
}


def check_feature_update(name: str, level: int, upgrade_type: int, current: int) -> str | None:
    """Kafka's FeatureControlManager.updateFeature checks; the INVALID_UPDATE_VERSION message,
    or None when ``name`` may go from ``current`` to ``level``. Level 0 removes a feature."""

    def invalid(reason: str) -> str:
        return f"Invalid update version {level} for feature {name}. {reason}"

    if not UpgradeType.UPGRADE <= upgrade_type <= UpgradeType.UNSAFE_DOWNGRADE:
        return invalid("The controller does not support the given upgrade type.")
    if level < 0:
        return invalid("A feature version cannot be less than 0.")
    low, high = SUPPORTED_FEATURES.get(name, (0, 0))
    if not low <= level <= high:
        if high == 0:
            return invalid("The meta service does not support this feature.")
        return invalid(f"The meta service only supports versions {low}-{high}")  # as Kafka
    if level < current and upgrade_type == UpgradeType.UPGRADE:
        return invalid(
            "Can't downgrade the version of this feature without setting the upgrade type to "
            "either safe or unsafe downgrade."
        )
    if level > current and upgrade_type != UpgradeType.UPGRADE:
        return invalid("Can't downgrade to a newer version.")
    return None
