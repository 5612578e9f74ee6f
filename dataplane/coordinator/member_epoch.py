"""The member-epoch check the KIP-848-style groups (consumer, streams) share."""

from __future__ import annotations

from dataplane.protocol.errors import ErrorCode, KafkaError


def check_member_epoch(received: int, expected: int) -> None:
    """An offset commit or fetch of a member must carry its current epoch (Kafka's
    STALE_MEMBER_EPOCH otherwise, with Kafka's message)."""
    if received != expected:
        raise KafkaError(
            ErrorCode.stale_member_epoch,
            f"The received member epoch {received} does not match the expected member "
            f"epoch {expected}.",
        )
