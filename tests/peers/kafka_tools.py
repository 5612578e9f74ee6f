"""Apache Kafka 4.4's command-line tools, run from the jars against any bootstrap, as an operator
runs `kafka-topics.sh` and the other scripts.

`run_tool("kafka-topics", "--bootstrap-server", b, "--list")` runs the script's main class (or a
main class named in full) in a short-lived JVM: C1 only and the serial collector start fastest,
and log4j2 sends only warnings and errors to stderr, so stdout holds what the tool prints. The
first run against a cluster also dumps the classes it loaded into a class-data-sharing archive
beside the jars, which later runs map instead of loading them again (half a JVM start's CPU; a
stale or broken archive is ignored by the JVM).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

from tests.peers.apache_kafka import PEERS, VERSION, setup

_LOG4J = Path(__file__).with_name("kafka-tools-log4j2.properties")
_JVM = [
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-XX:-UsePerfData",
    "-Xmx512m",
    "-Djava.awt.headless=true",
]

# The scripts of Kafka's bin/ and the main class each runs.
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
}


@functools.cache
def _archive() -> Path:
    """The class-data-sharing archive of this JVM and these jars (by size and mtime too: the
    JVM refuses an archive made from jar files since rewritten)."""
    java = Path(shutil.which("java") or "java").resolve()
    jars = sorted(
        f"{p.name} {p.stat().st_size} {p.stat().st_mtime_ns}"
        for p in (PEERS / "kafka").glob("*.jar")
    )
    key = hashlib.sha256("\n".join([str(java), *jars]).encode()).hexdigest()[:16]
    return PEERS / f"kafka-tools-{key}.jsa"


def java_command(main: str, *args: str, cds: list[str] | None = None) -> list[str]:
    """The `java` command line of one tool: `main` is a script name of TOOLS or a class;
    `cds` the options for the class archive (by default: use it if it exists)."""
    jars = PEERS / "kafka"
    if not (jars / f"kafka_2.13-{VERSION}.jar").exists():
        setup()
    if cds is None:
        # (a JVM that cannot use it says so on stdout, which the tests compare: silenced)
        cds = (
            [f"-XX:SharedArchiveFile={_archive()}", "-Xlog:cds=off,cds+dynamic=off"]
            if _archive().exists()
            else []
        )
    return [
        "java",
        *_JVM,
        *cds,
        f"-Dlog4j2.configurationFile={_LOG4J}",
        "-cp",
        f"{jars}/*",
        TOOLS.get(main, main),
        *args,
    ]


def run_tool(
    main: str, *args: str, timeout: float = 120, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one tool to its end (`input` is its stdin, e.g. for the console producer); its
    exit code, stdout and stderr are the caller's to check."""
    archive, dump = _archive(), None
    cds = None
    # A run that talks to a cluster makes it (one that does not, e.g. --version, would load
    # too few classes to be worth sharing); under a name of its own: runs may race.
    if not archive.exists() and "--bootstrap-server" in args:
        dump = archive.with_name(f"{archive.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        # (its warnings about classes it cannot archive would go to stdout)
        cds = [f"-XX:ArchiveClassesAtExit={dump}", "-Xlog:cds=off,cds+dynamic=off"]
    result = subprocess.run(
        java_command(main, *args, cds=cds),
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
    )
    if dump is not None and dump.exists():
        os.replace(dump, archive)
    return result
