"""Apache Kafka 4.4's own command-line tools run against Rafka as an operator runs them
(`kafka-topics.sh`, `kafka-configs.sh`, ... from the jars: tests/peers/kafka_tools.py), each
output checked line by line: against what the same command prints for Apache Kafka (the compat
session's single broker; ids, ports and times masked) where both can be given the same state,
else against the lines Kafka's tool prints for that state.

One 3-broker Rafka serves the whole package (package-scoped fixtures, started once for all its
modules); the ACL, SCRAM and delegation-token commands run against a SASL_SSL cluster with an
authorizer (tests/integration/secured_cluster.py) of their own, also started once.

The modules run in name order on the same Rafka, and test_admin_topics must run first: its
listings of the whole cluster (`--at-min-isr-partitions`, `--topics-with-overrides`) expect only
its own topics, so it sees none the other modules create (test_configs' `cfg` with overrides,
the single-replica topics of test_consumers, ...). That is why its name sorts first.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cluster.local import LocalCluster
from tests.compat.kafka_tools.support import Sides
from tests.integration.conftest import running_cluster
from tests.integration.secured_cluster import SecuredCluster, secured_cluster
from tests.peers.apache_kafka import ApacheKafka


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("kafka-tools"), brokers=3, metas=1) as c:
        yield c


@pytest.fixture(scope="package")
def sides(apache_kafka: ApacheKafka, cluster: LocalCluster) -> Sides:
    return Sides(apache_kafka.bootstrap, cluster.bootstrap)


@pytest.fixture(scope="package")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    with secured_cluster(tmp_path_factory.mktemp("kafka-tools-secured"), brokers=1) as s:
        yield s
