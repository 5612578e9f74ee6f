"""kafka-acls, SCRAM users set with kafka-configs, and kafka-delegation-tokens, on the
package's SASL_SSL cluster with an authorizer (the `secured` fixture).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.compat.kafka_tools.support import fails, ok, rows, tool
from tests.integration.secured_cluster import SecuredCluster

_LOGIN = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def command_config(
    secured: SecuredCluster, path: Path, user: str, mechanism: str, password: str | None = None
) -> str:
    """A --command-config file: SASL_SSL with `user`'s password (the test principals' own by
    default), trusting the cluster's CA."""
    password = secured.credentials(user, mechanism, password)["password"]
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secured.ca}\n"
        f"sasl.mechanism={mechanism}\n"
        f'sasl.jaas.config={_LOGIN[mechanism]} required username="{user}" password="{password}";\n'
    )
    return f"--command-config {path}"


def acl_blocks(text: str) -> dict[str, set[str]]:
    """Each `... ACLs for resource `<pattern>`:` block: pattern -> its ACLs (in any order)."""
    out: dict[str, set[str]] = {}
    resource = ""
    for line in text.splitlines():
        if " ACLs for resource `" in line:
            resource = line.split("`")[1]
            out[resource] = set()
        elif line.strip().startswith("(principal="):
            out[resource].add(line.strip())
    return out


def test_acls(secured: SecuredCluster, tmp_path: Path) -> None:
    b = secured.bootstrap
    admin = command_config(secured, tmp_path / "admin.properties", "admin", "PLAIN")
    writer = command_config(secured, tmp_path / "writer.properties", "writer", "SCRAM-SHA-256")
    ok(b, f"kafka-topics {admin} --create --topic secret --partitions 1")
    acls = f"kafka-acls {admin}"
    added = ok(
        b,
        f"{acls} --add --allow-principal User:writer --operation Write --operation Describe "
        "--topic secret",
    )
    topic = "ResourcePattern(resourceType=TOPIC, name=secret, patternType=LITERAL)"
    group = "ResourcePattern(resourceType=GROUP, name=readers, patternType=LITERAL)"
    prefixed = "ResourcePattern(resourceType=TOPIC, name=out-, patternType=PREFIXED)"

    def w(op: str) -> str:
        return f"(principal=User:writer, host=*, operation={op}, permissionType=ALLOW)"

    def r(op: str) -> str:
        return f"(principal=User:reader, host=*, operation={op}, permissionType=ALLOW)"

    assert acl_blocks(added) == {topic: {w("WRITE"), w("DESCRIBE")}}
    ok(b, f"{acls} --add --allow-principal User:reader --consumer --topic secret --group readers")
    ok(
        b,
        f"{acls} --add --allow-principal User:writer --producer --topic out- "
        "--resource-pattern-type prefixed",
    )
    assert acl_blocks(ok(b, f"{acls} --list")) == {
        topic: {w("WRITE"), w("DESCRIBE"), r("READ"), r("DESCRIBE")},
        group: {r("READ")},
        prefixed: {w("WRITE"), w("DESCRIBE"), w("CREATE")},
    }
    by_reader = ok(b, f"{acls} --list --principal User:reader")
    assert by_reader.splitlines()[0] == "ACLs for principal `User:reader`"
    assert acl_blocks(by_reader) == {topic: {r("READ"), r("DESCRIBE")}, group: {r("READ")}}

    # The writer may write to `secret`, but not to a topic nobody let it write to.
    as_writer = f"kafka-console-producer {writer.replace('--command-config', '--producer.config')}"
    ok(b, f"{as_writer} --topic secret", input="allowed\n")
    ok(b, f"kafka-topics {admin} --create --topic closed --partitions 1")
    refused = tool(b, f"{as_writer} --topic closed", input="refused\n")
    assert "Not authorized to access topics: [closed]" in refused.stderr, refused.stderr
    # Aborting a transaction writes its marker: for the cluster's operators only.
    abort = "abort --topic secret --partition 0 --producer-id 5 --producer-epoch 0"
    denied = fails(b, f"kafka-transactions {writer} {abort} --coordinator-epoch 0")
    spec = "AbortTransactionSpec(topicPartition=secret-0, producerId=5, producerEpoch=0, "
    spec += "coordinatorEpoch=0)"
    assert denied == (
        f"Failed to abort transaction {spec}: WriteTxnMarkers request with {spec} failed due to "
        "cluster authorization error. Enable debug logging for additional detail."
    ), denied
    remove = "--remove --force --allow-principal User:writer --operation Write --topic secret"
    assert ok(b, f"{acls} {remove}") == ""
    after = ok(b, f"{acls} --list --topic secret")
    assert acl_blocks(after) == {topic: {w("DESCRIBE"), r("READ"), r("DESCRIBE")}}


def test_scram_users(secured: SecuredCluster, tmp_path: Path) -> None:
    """SCRAM credentials set and removed with kafka-configs, as the user then logs in."""
    b = secured.bootstrap
    admin = command_config(secured, tmp_path / "admin.properties", "admin", "PLAIN")
    carol = f"kafka-configs {admin} --entity-type users --entity-name carol"
    for mechanism in (
        "SCRAM-SHA-256=[iterations=8192,password=carol-secret]",
        "SCRAM-SHA-512=[password=carol-secret]",
    ):
        assert ok(b, f"{carol} --alter --add-config {mechanism}") == (
            "Completed updating config for user carol.\n"
        )
    assert ok(b, f"{carol} --describe") == (
        "SCRAM credential configs for user-principal 'carol' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
    )
    # One change per user and request, as Kafka's controller allows.
    both_at_once = "SCRAM-SHA-256=[password=x],SCRAM-SHA-512=[password=y]"
    assert (
        "DuplicateResourceException: A user credential cannot be altered twice in the same request"
        in fails(b, f"{carol} --alter --add-config {both_at_once}")
    )
    login = command_config(
        secured, tmp_path / "carol.properties", "carol", "SCRAM-SHA-256", "carol-secret"
    )
    assert ok(b, f"kafka-topics {login} --list").strip() == ""  # no topic it may see
    ok(b, f"{carol} --alter --delete-config SCRAM-SHA-256")
    assert ok(b, f"{carol} --describe") == (
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=4096\n"
    )
    assert fails(b, f"kafka-topics {login} --list").splitlines()[0] == (
        "Error while executing topic command : Authentication failed during authentication due "
        "to invalid credentials with SASL mechanism SCRAM-SHA-256"
    )


def test_delegation_tokens(secured: SecuredCluster, tmp_path: Path) -> None:
    b = secured.bootstrap
    admin = command_config(secured, tmp_path / "admin.properties", "admin", "PLAIN")
    writer = command_config(secured, tmp_path / "writer.properties", "writer", "SCRAM-SHA-256")
    tokens = "kafka-delegation-tokens"
    created = ok(
        b, f"{tokens} {admin} --create --max-life-time-period -1 --renewer-principal User:writer"
    ).splitlines()
    assert (
        created[0]
        == "Calling create token operation with renewers :[User:writer] , max-life-time-period :-1"
    )
    token_id = created[1].removeprefix("Created delegation token with tokenId : ")
    header = [
        "TOKENID",
        "HMAC",
        "OWNER",
        "REQUESTER",
        "RENEWERS",
        "ISSUEDATE",
        "EXPIRYDATE",
        "MAXDATE",
    ]
    assert rows("\n".join(created[2:]))[0] == header
    token = rows("\n".join(created[2:]))[1]
    assert token[0] == token_id
    assert token[2:5] == ["User:admin", "User:admin", "[User:writer]"]
    hmac = token[1]

    def described() -> list[list[str]]:
        out = ok(b, f"{tokens} {admin} --describe --owner-principal User:admin").splitlines()
        assert out[0] == "Calling describe token operation for owners: [User:admin]"
        assert out[1] == f"Total number of tokens : {len(rows(chr(10).join(out[3:])))}"
        return rows("\n".join(out[3:]))

    assert [t[:5] for t in described()] == [token[:5]]
    # Without owners the tool asks for an empty list of them, which matches no token (Kafka's
    # DelegationTokenManager.filterToken).
    assert ok(b, f"{tokens} {admin} --describe").splitlines()[:2] == [
        "Calling describe token operation for current user.",
        "Total number of tokens : 0",
    ]
    renewed = ok(b, f"{tokens} {writer} --renew --hmac {hmac} --renew-time-period 3600000")
    assert re.fullmatch(
        r"Calling renew token operation with hmac :\S+ , renew-time-period :3600000\n"
        r"Completed renew operation\. New expiry date : \d{4}-\d\d-\d\dT\d\d:\d\d",
        renewed,
    ), renewed
    expired = ok(b, f"{tokens} {admin} --expire --hmac {hmac} --expiry-time-period -1")
    assert "Completed expire operation. New expiry date : " in expired
    assert described() == []
    gone = fails(b, f"{tokens} {writer} --renew --hmac {hmac} --renew-time-period 1000")
    assert "DelegationTokenNotFoundException: Delegation Token is not found on server." in gone
