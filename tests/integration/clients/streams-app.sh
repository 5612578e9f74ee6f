#!/usr/bin/env bash
# streams-app.sh [options]: the Kafka Streams 4.4 test application (streams/StreamsApp.java,
# built by setup.sh) in a small JVM. $RAFKA_CLIENT_LOG=DEBUG|INFO|WARN sets its logging.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
CACHE=${RAFKA_CLIENTS_CACHE:-$REPO/.cache/clients}
PEERS=${RAFKA_PEERS_CACHE:-$REPO/.cache/peers}
if [[ ! -f $CACHE/streams/classes/StreamsApp.class ]]; then
    echo "streams-app.sh: not built (run setup.sh)" >&2
    exit 2
fi
exec java -Xmx192m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="$HERE/java/log4j2.properties" \
    -Drafka.log.level="${RAFKA_CLIENT_LOG:-WARN}" \
    -cp "$CACHE/streams/classes:$PEERS/kafka/*" StreamsApp "$@"
