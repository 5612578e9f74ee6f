"""The cost of security: produce and consume throughput over PLAINTEXT and over SASL_SSL, in one
run, on the same machine and settings.

    python bench/security.py [--mb 2000] [--partitions 6]

Two single-broker clusters (1 meta node each), one after the other: one with a PLAINTEXT
listener; one with a SASL_SSL listener (TLS from the development CA, SCRAM-SHA-512), the
StandardAuthorizer on and the bench's user allowed by ACLs (so every request is authorized,
as it is per request and topic, never per record). librdkafka produces `--mb` MB of 1 KiB
records (acks=1) and reads them back (assign, no group); the figures are MB/s and the
SASL_SSL/PLAINTEXT ratio. Figures only: nothing here fails on a timing. MB = 10^6 bytes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.produce_consume import RECORD, consume, measure, produce
from cluster import admin
from cluster.client_security import ClientSecurity
from cluster.local import LocalCluster, free_base_port
from meta.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

USER, PASSWORD = "bench", "bench-secret"
ADMIN_PASSWORD = "admin-secret"
SECURED = {
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
    "listener.name.sasl_ssl.plain.sasl.jaas.config": (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_admin="{ADMIN_PASSWORD}";'
    ),
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
}


def run(work: Path, protocol: str, args: argparse.Namespace) -> dict[str, float | str]:
    """produce and consume MB/s over `protocol`."""
    secured = protocol == "SASL_SSL"
    cluster = LocalCluster(
        1,
        1,
        work / protocol.lower(),
        free_base_port(1, 1),
        SECURED if secured else {},
        log_level="WARNING",
        security_protocol=protocol,
    )
    cluster.start()
    try:
        conf: dict[str, object] = {}
        brokers = admin.Brokers(cluster.bootstrap)
        if secured:
            ca = str(cluster.ca_path)
            brokers = admin.Brokers(
                cluster.bootstrap,
                ClientSecurity(protocol, "PLAIN", "admin", ADMIN_PASSWORD, ca_file=ca),
            )
            errors = admin.alter_users(brokers, [(USER, "SCRAM-SHA-512", PASSWORD, 4096)], [])
            if any(errors.values()):
                raise RuntimeError(f"cannot create the bench user: {errors}")
            allow = [
                AclBinding(
                    rtype,
                    name,
                    PatternType.LITERAL,
                    f"User:{USER}",
                    "*",
                    op,
                    AclPermissionType.ALLOW,
                )
                for rtype, name, op in (
                    (ResourceType.TOPIC, "bench", AclOperation.WRITE),
                    (ResourceType.TOPIC, "bench", AclOperation.READ),
                    (ResourceType.GROUP, "bench", AclOperation.READ),
                )
            ]
            if any(admin.create_acls(brokers, allow)):
                raise RuntimeError("cannot create the bench user's ACLs")
            conf = {
                "security.protocol": protocol,
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": USER,
                "sasl.password": PASSWORD,
                "ssl.ca.location": ca,
            }
        admin.create_topic(brokers, "bench", args.partitions, 1, {})
        return {
            "produce": measure(lambda: produce(cluster.bootstrap, "bench", args.mb, "1", **conf)),
            "consume": measure(
                lambda: consume(cluster.bootstrap, "bench", args.partitions, args.mb, **conf)
            ),
        }
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=int, default=2000, help="MB to produce (default 2000)")
    parser.add_argument("--partitions", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:
        figures = {p: run(Path(tmp), p, args) for p in ("PLAINTEXT", "SASL_SSL")}
    print(f"\n{args.mb} MB of {RECORD} B records, acks=1, {args.partitions} partitions, librdkafka")
    print(f"{'':34}{'produce MB/s':>14}{'consume MB/s':>14}")
    labels = {
        "PLAINTEXT": "PLAINTEXT",
        "SASL_SSL": "SASL_SSL (SCRAM-SHA-512, ACLs)",
    }
    for protocol, values in figures.items():
        cells = "".join(
            f"{v:>14.0f}" if isinstance(v, float) else f"{'n/a':>14}" for v in values.values()
        )
        print(f"{labels[protocol]:34}{cells}")
        for phase, v in values.items():
            if isinstance(v, str):
                print(f"  {protocol} {phase} {v}")
    plain, tls = figures["PLAINTEXT"], figures["SASL_SSL"]
    ratios = [
        f"{phase} {tls[phase] / plain[phase]:.0%}"  # type: ignore[operator]
        for phase in ("produce", "consume")
        if isinstance(plain[phase], float) and isinstance(tls[phase], float)
    ]
    if ratios:
        print(f"SASL_SSL / PLAINTEXT: {', '.join(ratios)}")


if __name__ == "__main__":
    main()
