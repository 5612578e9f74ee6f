"""The SSL listener: the client certificate's subject, mapped by ssl.principal.mapping.rules,
is the principal, and ssl.client.auth=required refuses a connection without a trusted one."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from cluster.kafka_client import KafkaConnection
from common import dev_ca
from tests.compat.pair import Side, record
from tests.compat.security.support import (
    API_VERSIONS,
    CLOSED,
    DESCRIBE_CLUSTER,
    DESCRIBED,
    OPEN,
    Principals,
    metadata,
)


def test_ssl_client_certificate_is_the_principal(users: Principals) -> None:
    """CN=writer maps to User:writer (ssl.principal.mapping.rules): the writer's view."""
    pair = users.ssl(users.tls.client("writer"))
    metadata(pair, "Metadata over SSL as CN=writer: named topics", [OPEN, DESCRIBED, CLOSED])
    pair.call(
        "DescribeCluster over SSL as CN=writer: authorized operations",
        DESCRIBE_CLUSTER,
        1,
        include_cluster_authorized_operations=True,
        endpoint_type=1,
    )
    pair.close()


def test_ssl_super_user_certificate(users: Principals) -> None:
    pair = users.ssl(users.tls.client("admin"))
    pair.call(
        "DescribeCluster over SSL as CN=admin (the super user)",
        DESCRIBE_CLUSTER,
        1,
        include_cluster_authorized_operations=True,
        endpoint_type=1,
    )
    pair.close()


def ssl_outcome(side: Side) -> str:
    """Whether a TLS connection gets an answer to ApiVersions ("answered"), or how it ends."""
    try:
        with KafkaConnection.to_any(side.bootstrap, 10, side.security) as c:
            c.call(API_VERSIONS, 3, client_software_name="compat", client_software_version="1")
            return "answered"
    except (ssl.SSLError, ConnectionError, OSError):
        return "refused (TLS handshake or connection closed)"


@pytest.mark.parametrize("who", ["no client certificate", "a certificate of another CA"])
def test_ssl_client_certificate_required(users: Principals, tmp_path: Path, who: str) -> None:
    cert = ""
    if who != "no client certificate":
        cert = str(dev_ca.issue_certificate(tmp_path, "stranger.pem", "writer", server=False))
    outcome = users.ssl(cert).both(ssl_outcome)
    record(
        f"SSL listener with ssl.client.auth=required: {who}",
        *outcome,
        [] if outcome[0] == outcome[1] else [f"{outcome}"],
    )
