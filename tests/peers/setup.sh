#!/usr/bin/env bash
# Idempotent, cached set-up of the Java peers (pom.xml): Maven copies each module's jars into
# $RAFKA_PEERS_CACHE/<module>/ (default <repo>/.cache/peers), a flat folder to put on a classpath:
#   kafka          Apache Kafka 4.4.0: broker (KRaft), CLI tools, Kafka Streams
#   connect        Kafka Connect 4.3.1: runtime, FileStream connectors, MirrorMaker 2
#   clients-4.3.0  kafka-clients 4.3.0 for the Java test driver
#   clients-3.9.1  kafka-clients 3.9.1 for the Java test driver
#   spark          Spark's official Kafka connector (spark-sql-kafka-0-10) for pyspark's spark.jars
# A warm run only compares a stamp of the pom files. No Maven is an error, never a skip.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${RAFKA_PEERS_CACHE:-$REPO/.cache/peers}
mkdir -p "$CACHE"

exec 9>"$CACHE/.lock"  # one set-up at a time (parallel test workers may all call us)
flock 9

log() { echo "[peers/setup] $*" >&2; }

for tool in mvn java; do
    if ! command -v "$tool" >/dev/null; then
        log "error: '$tool' is not on PATH. The tests run Apache Kafka and the Java clients" \
            "beside Rafka; install a JDK (17+) and Maven 3 (Debian: apt-get install" \
            "openjdk-17-jdk-headless maven), then run this again."
        exit 1
    fi
done

stamp=$(cat "$HERE"/pom.xml "$HERE"/*/pom.xml | sha256sum | cut -c1-16)
if [[ $(cat "$CACHE/.stamp" 2>/dev/null) == "$stamp" ]]; then
    exit 0
fi
log "mvn dependency:copy-dependencies into $CACHE"
rm -rf "$CACHE.tmp"
# Each module copies its own resolution into a folder named after it: the modules' versions of
# one artifact (kafka-clients, log4j bindings) never meet on one classpath.
if ! mvn -q -B -Dstyle.color=never -f "$HERE/pom.xml" dependency:copy-dependencies \
        -DoutputDirectory="$CACHE.tmp/\${project.artifactId}" >&2; then
    log "error: Maven could not resolve the peers' jars (above). They come from Maven Central" \
        "(https://repo.maven.apache.org); check that this machine reaches it."
    exit 1
fi
for module in "$CACHE.tmp"/*/; do
    module=$(basename "$module")
    rm -rf "${CACHE:?}/$module" && mv "$CACHE.tmp/$module" "$CACHE/$module"
done
rm -rf "$CACHE.tmp"
echo "$stamp" >"$CACHE/.stamp"
log "ready: $(cd "$CACHE" && ls -d */ | tr -d / | tr '\n' ' ')"
