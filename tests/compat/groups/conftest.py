"""Consumer groups compared between the compat session's Apache Kafka 4.4 and Rafka (the
session's `pair`): FindCoordinator, the classic protocol, the group admin APIs, committed
offsets, and KIP-848's consumer protocol, with every error a group client can provoke. Flows play
the same requests on both brokers (flows.py); member ids the brokers make up are compared by
shape.

The two topics every module uses are made, and the coordinators found, once for the whole package
(a package-scoped autouse fixture). Each case uses group ids of its own, so the modules' order
does not matter.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import NewTopic

from tests.compat import flows
from tests.compat.conftest import create_topics
from tests.compat.groups.support import OTHER, TOPIC
from tests.compat.pair import Pair


@pytest.fixture(scope="package", autouse=True)
def topics(pair: Pair) -> None:
    create_topics(pair, NewTopic(TOPIC, 3, 1), NewTopic(OTHER, 1, 1))
    flows.wait_for_coordinators(pair)
