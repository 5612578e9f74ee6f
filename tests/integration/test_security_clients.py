"""Every client over SASL_SSL, with each SASL mechanism, against ACLs: what a principal may do
it does, what it may not it is refused with Kafka's error, whatever the client.

One cluster for the module (2 brokers, StandardAuthorizer, `User:admin` super user):
- `User:writer` may WRITE the topics prefixed `w-` (one prefixed ACL);
- `User:reader` may READ the topics prefixed `w-` and the groups prefixed `readers-`;
- `User:revoked` may WRITE the topic `revocable`, until the test removes the ACL.
Clients: confluent-kafka, kcat, kafka-python, aiokafka, KafkaJS, Java (4.3.0), franz-go and
Sarama, through their drivers (tests/integration/clients, README "Security"). Limits said
there: kcat cannot send an expired JWT and has no group consumer; only Java and franz-go have
delegation tokens.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cluster import admin
from cluster.cli import app
from cluster.client_security import ClientSecurity
from cluster.kafka_client import KafkaConnection
from meta.acl import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.integration.clients.drivers import DRIVERS, ensure_setup, run_driver
from tests.integration.clients.group_member import Member
from tests.integration.conftest import wait_for
from tests.integration.secured_cluster import (
    MECHANISMS,
    PLAIN_MODULE,
    SecuredCluster,
    authenticates,
    secured_cluster,
)

CLIENTS = [
    "confluent",
    "kcat",
    "kafka-python",
    "aiokafka",
    "kafkajs",
    "java-4.3.0",
    "franz-go",
    "sarama",
]
# kcat has no group consumer. Sarama's group member is left out for time: each of its commits
# waits behind a Fetch long-poll on the coordinator's connection (about a second, on Apache
# Kafka too) and its GROUP_AUTHORIZATION_FAILED comes after its FindCoordinator retries: 23 s
# for what franz-go shows in 4.
GROUP_CLIENTS = [c for c in CLIENTS if c not in ("kcat", "sarama")]
# One mechanism per client where a test runs each client once, so that all four are covered.
# (kcat: PLAIN, its SCRAM is broken, see WRITER_CASES.)
ROTATION = {
    "confluent": "SCRAM-SHA-256",
    "kcat": "PLAIN",  # its SCRAM is broken, see WRITER_CASES
    "kafka-python": "SCRAM-SHA-512",
    "aiokafka": "OAUTHBEARER",
    "kafkajs": "PLAIN",
    "java-4.3.0": "OAUTHBEARER",
    "franz-go": "OAUTHBEARER",
    "sarama": "SCRAM-SHA-512",  # through franz-go's SCRAM session (README "Security")
}
FORBIDDEN = "not-yours"
READ_TOPIC = "w-read"
READ_COUNT = 6
NEGATIVE_TIMEOUT = "8"  # seconds a refused client may take (kcat waits for metadata that long)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    ensure_setup()
    with secured_cluster(tmp_path_factory.mktemp("security-clients")) as s:
        s.allow("User:writer", AclOperation.WRITE, ResourceType.TOPIC, "w-", PatternType.PREFIXED)
        s.allow("User:reader", AclOperation.READ, ResourceType.TOPIC, "w-", PatternType.PREFIXED)
        s.allow(
            "User:reader", AclOperation.READ, ResourceType.GROUP, "readers-", PatternType.PREFIXED
        )
        s.allow("User:revoked", AclOperation.WRITE, ResourceType.TOPIC, "revocable")
        for topic in (FORBIDDEN, READ_TOPIC, "revocable"):
            s.create_topic(topic)
        produced = produce(s, "confluent", READ_TOPIC, s.env("writer", "PLAIN"), READ_COUNT)
        assert produced.returncode == 0, produced.stderr
        yield s


def produce(
    s: SecuredCluster, driver: str, topic: str, env: dict[str, str], count: int = 5, timeout="30"
):
    args = ("produce", "--topic", topic, "--count", str(count), "--timeout", timeout)
    return run_driver(driver, *args, "--bootstrap", s.bootstrap, env=env)


def refused(res, error: str) -> str | None:
    """None if the run failed with Kafka's `error`, else what happened instead."""
    if res.returncode == 1 and res.error == error:
        return None
    return f"rc={res.returncode} error={res.error} lines={res.lines[-3:]}\n{res.stderr[-3000:]}"


# ---------------------------------------------------------------- writing


# kcat (librdkafka 2.0.2) does PLAIN only here: it puts its own nonce twice in SCRAM's
# client-final message (fixed in librdkafka 2.6.1, confluentinc/librdkafka#4895), which brokers
# checking the nonce as RFC 5802 says (Kafka 4, Rafka) refuse; and it cannot send a given
# OAUTHBEARER token (README "Security").
WRITER_CASES = [
    (driver, mechanism)
    for driver in CLIENTS
    for mechanism in MECHANISMS
    if driver != "kcat" or mechanism == "PLAIN"
] + [("java-3.9.1", "OAUTHBEARER")]  # the Java driver on older jars: its token handler
# aiokafka and KafkaJS send the OAUTHBEARER token but ignore the broker's error challenge
# (RFC 7628: the client answers %x01, then the broker fails the exchange with
# SASL_AUTHENTICATION_FAILED): their next request finds the connection closed instead.
NO_OAUTH_ERROR_STEP = {"aiokafka", "kafkajs"}


@pytest.mark.parametrize(("driver", "mechanism"), WRITER_CASES)
def test_writer_writes_its_prefix_and_nothing_else(
    secured: SecuredCluster, driver: str, mechanism: str
) -> None:
    topic = f"w-{driver}-{mechanism}".lower()
    secured.create_topic(topic)
    env = secured.env("writer", mechanism)
    res = produce(secured, driver, topic, env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert sorted(r["key"] for r in res.lines) == [f"key-{i}" for i in range(5)]
    res = produce(secured, driver, FORBIDDEN, env, 1, NEGATIVE_TIMEOUT)
    assert refused(res, "TOPIC_AUTHORIZATION_FAILED") is None, refused(
        res, "TOPIC_AUTHORIZATION_FAILED"
    )


# ---------------------------------------------------------------- reading and committing


@pytest.mark.parametrize("driver", GROUP_CLIENTS)
def test_reader_consumes_and_commits_in_its_groups_only(
    secured: SecuredCluster, driver: str
) -> None:
    env = secured.env("reader", ROTATION[driver])
    options = ("--commit", "offsets", "--max-records", str(READ_COUNT))
    member = Member(driver, secured.bootstrap, READ_TOPIC, f"readers-{driver}", *options, env=env)
    try:
        member.wait_event("closed", 60)
        assert member.stop() == 0, member.describe()
    finally:
        member.close()
    assert len(member.records()) == READ_COUNT, member.describe()
    commits = member.of("commit")
    assert commits, commits
    assert all(c["error"] is None for c in commits), commits

    other = Member(driver, secured.bootstrap, READ_TOPIC, f"others-{driver}", *options, env=env)
    try:
        other.wait_event("error", 30, error="GROUP_AUTHORIZATION_FAILED")
    finally:
        other.close()
    assert not other.records()


def test_kcat_reader_consumes_without_a_group(secured: SecuredCluster) -> None:
    """kcat's driver has no group consumer: it reads with assign, as READ on the topic allows."""
    env = secured.env("reader", ROTATION["kcat"])
    args = ("consume", "--topic", READ_TOPIC, "--expect", str(READ_COUNT), "--timeout", "30")
    res = run_driver("kcat", *args, "--bootstrap", secured.bootstrap, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(res.lines) == READ_COUNT, res.stderr[-3000:]


# ---------------------------------------------------------------- refused credentials


@pytest.mark.parametrize("driver", CLIENTS)
def test_wrong_password_is_refused(secured: SecuredCluster, driver: str) -> None:
    mechanism = {"OAUTHBEARER": "SCRAM-SHA-256"}.get(ROTATION[driver], ROTATION[driver])
    env = secured.env("writer", mechanism, password="not-the-password")
    res = produce(secured, driver, "w-refused", env, 1, NEGATIVE_TIMEOUT)
    assert refused(res, "SASL_AUTHENTICATION_FAILED") is None, refused(
        res, "SASL_AUTHENTICATION_FAILED"
    )


@pytest.mark.parametrize("driver", [c for c in CLIENTS if c != "kcat"])  # kcat: README
def test_expired_jwt_is_refused(secured: SecuredCluster, driver: str) -> None:
    env = secured.env("writer", "OAUTHBEARER", token=secured.jwt("writer", lifetime_s=-120))
    res = produce(secured, driver, "w-refused", env, 1, NEGATIVE_TIMEOUT)
    if driver in NO_OAUTH_ERROR_STEP:
        assert res.returncode == 1, res.stderr
        assert not [r for r in res.lines if "offset" in r], res.stderr
        return
    assert refused(res, "SASL_AUTHENTICATION_FAILED") is None, refused(
        res, "SASL_AUTHENTICATION_FAILED"
    )


def _token_call(s: SecuredCluster, api_key: int, version: int, **fields: object):
    with KafkaConnection.to_any(s.bootstrap, 10, s.security("writer", "SCRAM-SHA-256")) as c:
        return c.call(api_key, version, **fields)


@pytest.mark.parametrize("driver", ["java-4.3.0", "franz-go"])
def test_delegation_token_authenticates_until_expired(secured: SecuredCluster, driver: str) -> None:
    """Java and franz-go, the clients with delegation tokens: SCRAM with tokenauth=true as the
    token's owner; once the owner expires the token, it is refused."""
    created = _token_call(
        secured,
        38,
        3,
        owner_principal_type=None,
        owner_principal_name=None,
        renewers=(),
        max_lifetime=-1,
    )
    assert created.error_code == 0, created
    env = secured.env(
        created.token_id,
        "SCRAM-SHA-512",
        password=base64.b64encode(created.hmac).decode(),
        tokenauth=True,
    )
    topic = f"w-token-{driver}"  # one per client: the cluster is the module's
    secured.create_topic(topic)
    res = produce(secured, driver, topic, env, 3)
    assert res.returncode == 0, res.stderr[-3000:]

    expired = _token_call(secured, 40, 2, hmac=created.hmac, expiry_time_period=-1)
    assert expired.error_code == 0, expired
    res = produce(secured, driver, topic, env, 1, NEGATIVE_TIMEOUT)
    assert refused(res, "SASL_AUTHENTICATION_FAILED") is None, refused(
        res, "SASL_AUTHENTICATION_FAILED"
    )


# ---------------------------------------------------------------- ACL removal


def test_removing_an_acl_stops_a_connected_producer_within_a_second(
    secured: SecuredCluster,
) -> None:
    """A Java producer writes steadily as User:revoked; its ACL goes: within a second, no
    record it sends is accepted any more."""
    argv = [*DRIVERS["java-4.3.0"], "produce-stream", "--bootstrap", secured.bootstrap]
    argv += ["--topic", "revocable", "--duration", "30", "--rate", "50", "--stop-on-eof", "true"]
    argv += ["--idempotence", "false", "--acks", "all", "--drain", "5"]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | secured.env("revoked", "SCRAM-SHA-512"),
    )
    events: list[dict] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip():
                events.append(json.loads(line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_for(lambda: sum(e["event"] == "ack" for e in events) >= 20, 60, "20 acks")
        (result,) = admin.delete_acls(
            secured.admin,
            [
                AclBindingFilter(
                    ResourceType.TOPIC,
                    "revocable",
                    PatternType.LITERAL,
                    "User:revoked",
                    None,
                    AclOperation.ANY,
                    AclPermissionType.ANY,
                )
            ],
        )
        removed_at = int(time.time() * 1000)
        assert result[0] is None, result
        assert len(result[1]) == 1, result
        wait_for(lambda: any(e["event"] == "fail" for e in events), 10, "a refused record")
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)
        reader.join(5)
    sent = {e["key"]: e["t"] for e in events if e["event"] == "send"}
    late = [e for e in events if e["event"] == "ack" and sent[e["key"]] > removed_at + 1000]
    assert not late, f"accepted more than 1 s after the ACL went: {late[:3]}"
    fails = [e for e in events if e["event"] == "fail"]
    assert any("TopicAuthorization" in e["error"] for e in fails), fails[:3]


# ---------------------------------------------------------------- the admin commands


def rafka(s: SecuredCluster, config: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        app, [*args, "-b", s.bootstrap, "--command-config", str(config)], catch_exceptions=False
    )
    return result.exit_code, result.output


def command_config(s: SecuredCluster, path: Path, password: str) -> Path:
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=PLAIN\n"
        f'sasl.jaas.config={PLAIN_MODULE} required username="admin" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={s.ca}\n"
    )
    return path


def test_users_and_acls_commands(secured: SecuredCluster, tmp_path: Path) -> None:
    config = command_config(secured, tmp_path / "admin.properties", "admin-secret")
    scram = ClientSecurity("SASL_SSL", "SCRAM-SHA-256", "cli-user", "cli-pass", ca_file=secured.ca)

    create = ["users", "create", "cli-user", "--password", "cli-pass"]
    code, out = rafka(
        secured, config, *create, "--mechanism", "SCRAM-SHA-256", "--iterations", "8192"
    )
    assert code == 0, out
    code, out = rafka(secured, config, "users", "list")
    assert code == 0, out
    assert ["cli-user", "SCRAM-SHA-256", "8192"] in [line.split() for line in out.splitlines()], out
    wait_for(lambda: authenticates(secured.bootstrap, scram), 5, "cli-user's credentials")

    on_prefix = ["--topic", "cli-", "--resource-pattern-type", "prefixed"]
    ops = ["--operation", "Read", "--operation", "Describe"]
    code, out = rafka(
        secured, config, "acls", "add", "--allow-principal", "User:cli-user", *ops, *on_prefix
    )
    assert code == 0, out
    code, out = rafka(secured, config, "acls", "list", "--principal", "User:cli-user")
    listed = [line.split() for line in out.splitlines()]
    assert ["TOPIC", "cli-", "PREFIXED", "User:cli-user", "*", "READ", "ALLOW"] in listed, out
    code, out = rafka(secured, config, "acls", "remove", *on_prefix, "--principal", "User:cli-user")
    assert code == 0, out
    assert "Removed 2 ACL(s)." in out, out
    code, out = rafka(secured, config, "acls", "list", "--principal", "User:cli-user")
    assert "cli-" not in out, out

    code, out = rafka(secured, config, "users", "delete", "cli-user")
    assert code == 0, out
    assert "Deleted SCRAM credentials of cli-user." in out, out
    wait_for(lambda: not authenticates(secured.bootstrap, scram), 5, "cli-user refused")

    code, out = rafka(secured, config, "topics", "list")
    assert code == 0, out
    assert FORBIDDEN in out, out
    bad = command_config(secured, tmp_path / "bad.properties", "wrong")
    code, out = rafka(secured, bad, "topics", "list")
    assert code == 1, out
    assert "SASL_AUTHENTICATION_FAILED" in out, out
