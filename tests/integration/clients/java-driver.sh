#!/usr/bin/env bash
# java-driver.sh <4.3.0|3.9.1> <command> [options]: RafkaDriver on the chosen kafka-clients.
# Contract: README.md. Built by setup.sh; $RAFKA_CLIENT_LOG=DEBUG|INFO|WARN sets client logging.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RAFKA_CLIENTS_CACHE:-$(cd "$HERE/../../.." && pwd)/.cache/clients}
ver=${1:-}
dir=$CACHE/java/$ver
if [[ -z $ver || ! -f $dir/classes/RafkaDriver.class ]]; then
    echo "java-driver.sh: unknown version '$ver' or not built (run setup.sh); have:" \
        "$(ls "$CACHE/java" 2>/dev/null | tr '\n' ' ')" >&2
    exit 2
fi
shift
# Short-lived JVM: C1 only starts faster.
exec java -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="$HERE/java/log4j2.properties" \
    -Drafka.log.level="${RAFKA_CLIENT_LOG:-WARN}" \
    -cp "$dir/classes:$dir/lib/*" RafkaDriver "$@"
