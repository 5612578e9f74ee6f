#!/usr/bin/env bash
# Render the plain manifests (deploy/k8s/manifests/rafka.yaml) from the Helm chart with its
# default values, for kubectl users. `render.sh -` prints them instead (the tests compare).
# helm comes from tests/unit/deploy/setup.sh (cached under .cache/deploy).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
HELM=$(bash "$REPO/tests/unit/deploy/setup.sh" | sed -n 1p)  # not head: it could SIGPIPE setup.sh
render() {
    cat <<'HEADER'
# Rafka: 3 meta nodes + 3 brokers, rendered from the Helm chart deploy/k8s/rafka with its
# default values by deploy/k8s/render.sh. Do not edit: change the chart and run
# `bash deploy/k8s/render.sh` (a test checks that this file matches the chart).
# Install into any namespace (the pods find their namespace through the downward API):
#   kubectl create namespace rafka
#   kubectl create secret -n rafka generic rafka-internal \
#       --from-literal=secret=$(openssl rand -hex 32)   # the cluster secret; no default
#   kubectl apply -n rafka -f deploy/k8s/manifests/rafka.yaml
# Image: rafka:0.1.0 (`make image`), which your cluster must be able to pull.
HEADER
    "$HELM" template rafka "$HERE/rafka"
}
if [[ ${1:-} == - ]]; then
    render
else
    mkdir -p "$HERE/manifests"
    render >"$HERE/manifests/rafka.yaml.tmp"
    mv "$HERE/manifests/rafka.yaml.tmp" "$HERE/manifests/rafka.yaml"
    echo "wrote $HERE/manifests/rafka.yaml" >&2
fi
