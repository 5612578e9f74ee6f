#!/usr/bin/env bash
# Idempotent, cached set-up of the non-Python client drivers (README.md in this folder):
#   kcat      Debian's kcat 1.7.1 (librdkafka 2.0.2), apt-get installed if missing
#   kafkajs   KafkaJS 2.2.4 + codecs, `npm ci` into node/ from the committed lock file
#   java      kafka-clients 4.3.0 and 3.9.1 from Maven Central (tests/peers/setup.sh),
#             java/*.java (RafkaDriver and its command classes) compiled once per version
#   streams   streams/*.java (a Kafka Streams 4.4 application) compiled against the peers'
#             Apache Kafka 4.4 jars (tests/peers module kafka)
#   go        franz-go and Sarama from the Go module proxy (go/go.sum), go/*.go built into
#             one binary, rafka-go-driver
# Everything downloaded or built lives under $RAFKA_CLIENTS_CACHE (default <repo>/.cache/clients)
# and node/node_modules, both git-ignored. A warm run only compares stamps.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
CACHE=${RAFKA_CLIENTS_CACHE:-$REPO/.cache/clients}
mkdir -p "$CACHE"

# One set-up at a time (parallel test workers may all call us).
exec 9>"$CACHE/.lock"
flock 9

log() { echo "[clients/setup] $*" >&2; }
sha() { cat "$@" | sha256sum | cut -c1-16; }

# ---- kcat -----------------------------------------------------------------------------
if ! command -v kcat >/dev/null; then
    SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo
    log "installing kcat (apt)"
    export DEBIAN_FRONTEND=noninteractive
    # A fresh machine may have no package lists yet: update only if the install fails.
    $SUDO apt-get install -y -qq kcat >/dev/null ||
        { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq kcat >/dev/null; }
fi

# ---- KafkaJS --------------------------------------------------------------------------
NODE_DIR=$HERE/node
node_stamp=$(sha "$NODE_DIR/package.json" "$NODE_DIR/package-lock.json")
if [[ $(cat "$NODE_DIR/node_modules/.rafka-stamp" 2>/dev/null) != "$node_stamp" ]]; then
    log "npm ci (kafkajs 2.2.4 + codecs)"
    # lz4 and zstd-napi are native addons built by node-gyp: point it at the installed Node
    # headers (it would otherwise download them), and stop zstd-napi's prebuild-install from
    # fetching a prebuilt binary (only the npm registry is reachable).
    [[ -f /usr/include/node/node.h ]] && export npm_config_nodedir=/usr
    export npm_config_build_from_source=true
    (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error >&2)
    echo "$node_stamp" >"$NODE_DIR/node_modules/.rafka-stamp"
fi

# ---- Java kafka-clients ---------------------------------------------------------------
# The jars come from Maven Central through tests/peers (modules clients-4.3.0, clients-3.9.1:
# kafka-clients + the compression libraries it loads + slf4j 2 with a log4j2 binding).
PEERS=${RAFKA_PEERS_CACHE:-$REPO/.cache/peers}
bash "$REPO/tests/peers/setup.sh"

build_java() {  # build_java VERSION: java/*.java compiled against that kafka-clients
    local ver=$1
    local dir=$CACHE/java/$ver lib=$PEERS/clients-$ver
    local stamp
    stamp=$(sha "$HERE"/java/*.java "$PEERS/.stamp")
    if [[ $(cat "$dir/classes.stamp" 2>/dev/null) != "$stamp" ]]; then
        log "javac java/*.java against kafka-clients $ver"
        # Built aside, then swapped in: a driver running meanwhile keeps finding its classes.
        rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
        ln -s "$lib" "$dir.tmp/lib"
        javac -nowarn -d "$dir.tmp/classes" -cp "$lib/*" "$HERE"/java/*.java
        echo "$stamp" >"$dir.tmp/classes.stamp"
        rm -rf "$dir.old" && { [[ ! -e $dir ]] || mv "$dir" "$dir.old"; }
        mv "$dir.tmp" "$dir" && rm -rf "$dir.old"
    fi
}

build_java 4.3.0
build_java 3.9.1

# ---- Kafka Streams 4.4 application -------------------------------------------------------
streams_dir=$CACHE/streams
streams_stamp=$(sha "$HERE"/streams/*.java "$PEERS/.stamp")
if [[ $(cat "$streams_dir/classes.stamp" 2>/dev/null) != "$streams_stamp" ]]; then
    log "javac streams/*.java against Kafka Streams 4.4"
    rm -rf "$streams_dir.tmp" && mkdir -p "$streams_dir.tmp"
    javac -nowarn -d "$streams_dir.tmp/classes" -cp "$PEERS/kafka/*" "$HERE"/streams/*.java
    echo "$streams_stamp" >"$streams_dir.tmp/classes.stamp"
    rm -rf "$streams_dir.old" && { [[ ! -e $streams_dir ]] || mv "$streams_dir" "$streams_dir.old"; }
    mv "$streams_dir.tmp" "$streams_dir" && rm -rf "$streams_dir.old"
fi

# ---- Go: franz-go and Sarama ------------------------------------------------------------
# One module (go/go.mod, go.sum committed), built with -mod=readonly so that go.sum decides
# every module's content; the module and build caches live in the cache, so a machine
# downloads the modules once. GOTOOLCHAIN=local: the installed Go builds it (go.mod's `go`
# line says which it needs), never one fetched.
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
GO_DIR=$HERE/go
go_stamp=$(sha "$GO_DIR"/go.mod "$GO_DIR"/go.sum "$GO_DIR"/*.go <(go version))
if [[ $(cat "$CACHE/go/driver.stamp" 2>/dev/null) != "$go_stamp" ]]; then
    log "go build go/*.go (franz-go, Sarama)"
    mkdir -p "$CACHE/go"
    (cd "$GO_DIR" &&
        GOMODCACHE=$CACHE/go/mod GOCACHE=$CACHE/go/build GOTOOLCHAIN=local \
        GOFLAGS="-mod=readonly -modcacherw -buildvcs=false" \
        go build -trimpath -o "$CACHE/go/rafka-go-driver.tmp" .)
    # rename(2): a driver running meanwhile keeps its old binary.
    mv -f "$CACHE/go/rafka-go-driver.tmp" "$CACHE/go/rafka-go-driver"
    echo "$go_stamp" >"$CACHE/go/driver.stamp"
fi

log "ready"
