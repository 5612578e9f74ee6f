#!/usr/bin/env bash
# Build the Rafka container image without any container registry (`make image`):
#
#   1. base    a Debian bookworm root filesystem (debootstrap --variant=minbase from Debian's apt
#              mirror, + python3), trimmed and `docker import`ed as rafka-base:bookworm-<hash>.
#              Kept in Docker and as a tarball under the cache; rebuilt only when this recipe
#              changes. Needs root (debootstrap chroots); installs debootstrap if missing.
#   2. wheels  Rafka's dependencies as wheels (`pip wheel` from PyPI, pinned to the versions in
#              the project's .venv), cached per pyproject.toml + pins.
#   3. app     the rafka wheel built from this checkout (reproducible: SOURCE_DATE_EPOCH).
#   4. docker build deploy/image/Dockerfile -> $RAFKA_IMAGE:dev and $RAFKA_IMAGE:<version>.
#
# A rebuild after a code change redoes only step 3 and the last Dockerfile stage.
# Env: RAFKA_IMAGE (default rafka), RAFKA_IMAGE_CACHE (default <repo>/.cache/image),
#      DEBIAN_MIRROR (default http://deb.debian.org/debian), PYTHON (default <repo>/.venv/bin/python).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${RAFKA_IMAGE_CACHE:-$REPO/.cache/image}
IMAGE=${RAFKA_IMAGE:-rafka}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PY=${PYTHON:-$REPO/.venv/bin/python}
SUITE=bookworm
# python3-minimal + the standard library; netbase for /etc/services and /etc/protocols.
PACKAGES=python3-minimal,libpython3.11-stdlib,netbase
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

log() { echo "[image] $*" >&2; }
# quiet CMD...: run it with its output in $CACHE/last.log, shown only if it fails.
quiet() { "$@" >"$CACHE/last.log" 2>&1 || { grep -v '^WARNING: Location' "$CACHE/last.log" >&2; return 1; }; }
t_start=$(date +%s%N)
elapsed() { local ms=$((($(date +%s%N) - t_start) / 1000000)); printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100)); }
command -v docker >/dev/null || { log "no docker command: install docker.io (see .ci/run)"; exit 1; }
docker info >/dev/null 2>&1 || {
    log "the Docker engine does not answer: start dockerd (see .ci/run)"; exit 1; }
[[ -x $PY ]] || PY=python3
VERSION=$("$PY" -c 'import tomllib; print(tomllib.load(open("'"$REPO"'/pyproject.toml", "rb"))["project"]["version"])')

# ---- 1. base image ---------------------------------------------------------------------------
# What is removed from the root filesystem: documentation, man pages, translations, apt's
# package lists and caches (apt-get update brings the lists back if someone needs apt).
strip_rootfs() {
    local root=$1
    rm -rf "$root"/usr/share/{doc,man,info,lintian,linda,locale,bash-completion}/* \
        "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/cache/debconf/*-old \
        "$root"/var/log/* "$root"/tmp/* "$root"/root/.cache
    find "$root"/usr/lib/python3* -depth -name __pycache__ -type d -exec rm -rf {} +
    # A resolver config that Docker and Kubernetes replace at run time anyway.
    : >"$root"/etc/resolv.conf
    echo rafka >"$root"/etc/hostname
}
base_hash=$( { echo "$SUITE $PACKAGES"; declare -f strip_rootfs; } | sha256sum | cut -c1-12)
BASE=rafka-base:$SUITE-$base_hash
if ! docker image inspect "$BASE" >/dev/null 2>&1; then
    tarball=$CACHE/base-$SUITE-$base_hash.tar
    if [[ ! -f $tarball ]]; then
        if ! command -v debootstrap >/dev/null; then
            log "installing debootstrap (apt)"
            export DEBIAN_FRONTEND=noninteractive
            apt-get install -y -qq debootstrap >/dev/null ||
                { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
        fi
        [[ $(id -u) == 0 ]] || { log "debootstrap needs root: run make image as root"; exit 1; }
        root=$CACHE/rootfs.tmp
        rm -rf "$root" && mkdir -p "$CACHE/debs"
        log "debootstrap $SUITE ($PACKAGES) from $MIRROR"
        debootstrap --variant=minbase --include="$PACKAGES" --cache-dir="$CACHE/debs" \
            "$SUITE" "$root" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
            { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
        strip_rootfs "$root"
        tar -C "$root" --numeric-owner -cf "$tarball.tmp" .
        mv "$tarball.tmp" "$tarball"
        rm -rf "$root"
    fi
    log "docker import $BASE"
    quiet docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["/bin/bash"]' \
        "$tarball" "$BASE"
    docker tag "$BASE" "rafka-base:$SUITE"
fi

# ---- 2. dependency wheels --------------------------------------------------------------------
requirements=$("$PY" -c 'import tomllib; print("\n".join(tomllib.load(open("'"$REPO"'/pyproject.toml", "rb"))["project"]["dependencies"]))')
# Pin transitive dependencies to what the project's venv (the one the tests ran) has.
pins=$("$PY" -m pip freeze --exclude-editable 2>/dev/null | grep -v '^-e ' | grep '==' || true)
pip_version=$("$PY" -m pip --version | cut -d' ' -f2)
wheels_hash=$( { echo "$requirements"; echo "$pins"; echo "pip $pip_version";
    "$PY" -c 'import sys; print(sys.version_info[:2])'; } | sha256sum | cut -c1-12)
WHEELS=$CACHE/wheels-$wheels_hash
if [[ ! -f $WHEELS/requirements.txt ]]; then
    log "pip wheel: dependencies from PyPI"
    rm -rf "$WHEELS.tmp" && mkdir -p "$WHEELS.tmp"
    echo "$requirements" >"$WHEELS.tmp/requirements.in"
    echo "$pins" >"$WHEELS.tmp/constraints.txt"
    quiet "$PY" -m pip wheel -q --disable-pip-version-check --wheel-dir "$WHEELS.tmp" \
        -r "$WHEELS.tmp/requirements.in" -c "$WHEELS.tmp/constraints.txt"
    quiet "$PY" -m pip download -q --disable-pip-version-check --no-deps -d "$WHEELS.tmp" \
        "pip==$pip_version"
    mv "$WHEELS.tmp"/pip-*.whl "$WHEELS.tmp/pip.whl"
    mv "$WHEELS.tmp/requirements.in" "$WHEELS.tmp/requirements.txt"
    rm -f "$WHEELS.tmp/constraints.txt"
    rm -rf "$WHEELS" && mv "$WHEELS.tmp" "$WHEELS"
    # Older wheel sets are of no further use.
    find "$CACHE" -maxdepth 1 -name 'wheels-*' ! -name "wheels-$wheels_hash" -exec rm -rf {} +
fi

# ---- 3. the rafka wheel ----------------------------------------------------------------------
CTX=$CACHE/context
rm -rf "$CTX" && mkdir -p "$CTX/app"
# Only what the package is made of, so the build sees no tests, data or caches.
rm -rf "$CACHE/src" && mkdir -p "$CACHE/src"
cp "$REPO/pyproject.toml" "$REPO/README.md" "$CACHE/src/"
for pkg in cluster meta dataplane common proto; do
    cp -r "$REPO/$pkg" "$CACHE/src/"
done
find "$CACHE/src" -name __pycache__ -type d -exec rm -rf {} +
isolation=(--no-build-isolation)
"$PY" -c 'import setuptools, wheel' 2>/dev/null || isolation=()
SOURCE_DATE_EPOCH=315532800 quiet "$PY" -m pip wheel -q --disable-pip-version-check --no-deps \
    "${isolation[@]}" --wheel-dir "$CTX/app" "$CACHE/src"
rm -rf "$CACHE/src"/{build,*.egg-info}

# ---- 4. docker build -------------------------------------------------------------------------
cp -al "$WHEELS" "$CTX/wheels" 2>/dev/null || cp -r "$WHEELS" "$CTX/wheels"
cp "$HERE/Dockerfile" "$CTX/Dockerfile"
install -m 0755 "$HERE/entrypoint.py" "$CTX/entrypoint.py"
log "docker build -> $IMAGE:dev, $IMAGE:$VERSION (base $BASE)"
# The legacy builder unless told otherwise: it needs no buildx plugin, whatever the docker CLI.
DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0} quiet docker build \
    --build-arg "BASE=$BASE" --build-arg "VERSION=$VERSION" \
    -t "$IMAGE:dev" -t "$IMAGE:$VERSION" "$CTX"
size=$(docker image inspect -f '{{.Size}}' "$IMAGE:dev")
log "built $IMAGE:dev = $IMAGE:$VERSION, $((size / 1024 / 1024)) MiB, in $(elapsed)"
