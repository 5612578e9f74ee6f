"""The Helm chart (deploy/k8s/rafka) and the plain manifests rendered from it.

No Kubernetes cluster runs here, so these check what can be checked offline:

- ``helm lint`` (strict) with the default values and with every non-default set below;
- ``helm template`` renders, with duplicate YAML keys refused, and what it renders has the
  structure the chart promises (probes, PVCs, PDBs, services, non-root security context,
  resources, the Raft voters, the advertised addresses...);
- every rendered object passes kubernetes-validate's *strict* schema validation (unknown
  fields fail) for each Kubernetes version in ``K8S_VERSIONS``;
- values that would render a broken cluster are refused with a message;
- deploy/k8s/manifests/rafka.yaml is exactly what deploy/k8s/render.sh renders now;
- every setting in values.yaml is documented (a comment right above it).

helm and kubernetes-validate come from setup.sh (cached under .cache/deploy).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
CHART = REPO / "deploy" / "k8s" / "rafka"
MANIFESTS = REPO / "deploy" / "k8s" / "manifests" / "rafka.yaml"
# Kubernetes versions validated against: the chart's kubeVersion (>=1.29) up to the newest
# schemas kubernetes-validate 1.37.0 ships.
K8S_VERSIONS = [f"1.{minor}.0" for minor in range(29, 38)]

# Non-default value sets, each rendered, linted and validated like the defaults.
VALUE_SETS: dict[str, list[str]] = {
    "external-nodeport": [
        "external.enabled=true",
        "external.advertisedHost=kafka.example.com",
        "broker.replicas=5",
        "image.repository=registry.example.com/rafka",
        "image.tag=1.2.3",
        "image.pullSecrets[0]=regcred",
    ],
    "external-loadbalancer": [
        "external.enabled=true",
        "external.type=LoadBalancer",
        "external.advertisedHost=broker-{ordinal}.kafka.example.com",
        "external.basePort=9094",
        "external.externalTrafficPolicy=Local",
        "external.loadBalancerSourceRanges[0]=10.0.0.0/8",
        "external.annotations.service\\.beta\\.kubernetes\\.io/aws-load-balancer-type=nlb",
    ],
    "single-meta-ephemeral": [
        "meta.replicas=1",
        "broker.replicas=1",
        "meta.persistence.enabled=false",
        "broker.persistence.enabled=false",
        "meta.pdb.enabled=false",
        "broker.pdb.enabled=false",
        "serviceAccount.create=false",
        "broker.config.default\\.replication\\.factor=1",
        "broker.config.min\\.insync\\.replicas=1",
    ],
    "internal-tls": [
        "internalSecurity.secretName=streaming-cluster-secret",
        "internalSecurity.secretKey=internal-secret",
        "internalSecurity.tls.secretName=rafka-internal-tls",
    ],
    "tuned": [
        "meta.replicas=5",
        "fullnameOverride=streams",
        "clusterDomain=k8s.internal",
        "broker.persistence.storageClass=fast-ssd",
        "broker.persistence.size=500Gi",
        "meta.persistence.storageClass=fast-ssd",
        "broker.resources.requests.cpu=4",
        "broker.resources.limits.memory=16Gi",
        "broker.nodeSelector.disktype=ssd",
        "broker.tolerations[0].key=dedicated",
        "broker.tolerations[0].operator=Equal",
        "broker.tolerations[0].value=kafka",
        "broker.tolerations[0].effect=NoSchedule",
        "broker.priorityClassName=high",
        "broker.podAnnotations.prometheus\\.io/scrape=true",
        "broker.extraEnv[0].name=RAFKA_BROKER_RACK",
        "broker.extraEnv[0].value=rack-{ordinal}",
        "meta.topologySpreadConstraints[0].maxSkew=1",
        "meta.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
        "meta.topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
        "meta.topologySpreadConstraints[0].labelSelector.matchLabels.app\\.kubernetes\\.io/component=meta",
        "pvcRetentionPolicy.whenScaled=Delete",
        "commonLabels.team=streaming",
        "bootstrap.type=LoadBalancer",
    ],
}


# ------------------------------------------------------------------------------------ tooling


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"deploy checks cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"deploy checks skipped: {reason}")


@pytest.fixture(scope="module")
def tools() -> tuple[str, str]:
    """(helm, python of the venv with PyYAML + kubernetes-validate), from setup.sh."""
    proc = subprocess.run(
        ["bash", str(HERE / "setup.sh")], capture_output=True, text=True, timeout=600
    )
    if proc.returncode:
        _unavailable(f"tests/unit/deploy/setup.sh failed:\n{proc.stderr[-2000:]}")
    helm, python = proc.stdout.split()[:2]
    return helm, python


def helm(tools: tuple[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tools[0], *args], capture_output=True, text=True, timeout=120)


def render(tools: tuple[str, str], sets: list[str], tmp_path: Path) -> Path:
    args = ["template", "rafka", str(CHART), "--namespace", "streaming"]
    for s in sets:
        args += ["--set", s]
    proc = helm(tools, *args)
    assert proc.returncode == 0, proc.stderr
    trailing = [n for n, line in enumerate(proc.stdout.splitlines(), 1) if line != line.rstrip()]
    assert not trailing, f"trailing whitespace on rendered lines {trailing[:10]}"
    out = tmp_path / "rendered.yaml"
    out.write_text(proc.stdout)
    return out


def load(tools: tuple[str, str], *files: Path, validate: list[str] | None = None) -> dict:
    cmd = [tools[1], str(HERE / "k8s_tool.py")]
    if validate:
        cmd += ["--validate", ",".join(validate)]
    proc = subprocess.run([*cmd, *map(str, files)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert not result["errors"], result["errors"]
    return result


def objects(result: dict) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for doc in result["documents"]:
        obj = doc["object"]
        key = (obj["kind"], obj["metadata"]["name"])
        assert key not in out, f"{key} rendered twice"
        out[key] = obj
    return out


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "<from>") for e in container.get("env", [])}


# ------------------------------------------------------------------------------------ tests


def test_helm_lint(tools: tuple[str, str]) -> None:
    proc = helm(tools, "lint", "--strict", str(CHART))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name, sets in VALUE_SETS.items():
        args = ["lint", "--strict", str(CHART)]
        for s in sets:
            args += ["--set", s]
        proc = helm(tools, *args)
        assert proc.returncode == 0, f"{name}:\n{proc.stdout}{proc.stderr}"


@pytest.fixture(scope="module")
def validated(tools: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every value set rendered and validated against every version, in one process (the
    validator loads each version's schemas once)."""
    files = {}
    for name in ["default", *VALUE_SETS]:
        files[name] = render(tools, VALUE_SETS.get(name, []), tmp_path_factory.mktemp(name))
    result = load(tools, *files.values(), validate=K8S_VERSIONS)
    by_file = {str(path): name for name, path in files.items()}
    out: dict[str, dict[str, list]] = {name: {"documents": [], "invalid": []} for name in files}
    for key in ("documents", "invalid"):
        for item in result[key]:
            out[by_file[item["file"]]][key].append(item)
    return out


@pytest.mark.parametrize("values", ["default", *VALUE_SETS])
def test_schema_valid_on_every_kubernetes_version(validated: dict, values: str) -> None:
    result = validated[values]
    assert len(result["documents"]) >= 6  # StatefulSets, Services, ConfigMap at least
    assert not result["invalid"], json.dumps(result["invalid"][:5], indent=1)


def test_validation_is_not_vacuous(tools: tuple[str, str], tmp_path: Path) -> None:
    """A typo'd field, a wrong type, an unknown kind: strict validation must catch each."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n"
        "spec: {ports: [{port: 1}], publishNotReadyAddress: true}\n"
        "---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: b}\n"
        "spec: {replicas: three, serviceName: b, selector: {}, template: {}}\n"
        "---\napiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata: {name: c}\n"
    )
    result = load(tools, bad, validate=["1.29.0"])
    assert {i["name"] for i in result["invalid"]} == {"a", "b", "c"}, result["invalid"]
    dup = tmp_path / "dup.yaml"
    dup.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\nkind: Secret\n")
    proc = subprocess.run(
        [tools[1], str(HERE / "k8s_tool.py"), str(dup)], capture_output=True, text=True
    )
    assert "duplicate key" in json.loads(proc.stdout)["errors"][0]


def test_default_render(tools: tuple[str, str], tmp_path: Path) -> None:
    objs = objects(load(tools, render(tools, [], tmp_path)))
    assert set(objs) == {
        ("ServiceAccount", "rafka"),
        ("ConfigMap", "rafka-config"),
        ("Service", "rafka-meta-headless"),
        ("Service", "rafka-broker-headless"),
        ("Service", "rafka-bootstrap"),
        ("StatefulSet", "rafka-meta"),
        ("StatefulSet", "rafka-broker"),
        ("PodDisruptionBudget", "rafka-meta"),
        ("PodDisruptionBudget", "rafka-broker"),
    }
    ns = "$(POD_NAMESPACE)"
    meta_hosts = [f"rafka-meta-{i}.rafka-meta-headless.{ns}.svc.cluster.local" for i in range(3)]

    # -- meta StatefulSet: 3 Raft voters found through the headless Service ----------------
    meta = objs[("StatefulSet", "rafka-meta")]
    assert meta["spec"]["replicas"] == 3
    assert meta["spec"]["serviceName"] == "rafka-meta-headless"
    assert meta["spec"]["podManagementPolicy"] == "Parallel"
    (mc,) = meta["spec"]["template"]["spec"]["containers"]
    assert mc["args"] == ["meta"]
    menv = env_of(mc)
    assert menv["RAFKA_META_QUORUM_VOTERS"] == ",".join(
        f"{i + 1}@{h}:9292" for i, h in enumerate(meta_hosts)
    )
    assert menv["RAFKA_META_QUORUM_LISTENERS"] == ",".join(
        f"{i + 1}@{h}:9192" for i, h in enumerate(meta_hosts)
    )
    assert "RAFKA_NODE_ID" not in menv  # from the pod's ordinal (the image's entry point)
    assert objs[("Service", "rafka-meta-headless")]["spec"]["publishNotReadyAddresses"] is True

    # -- broker StatefulSet: a PVC each, advertised by stable DNS name --------------------
    broker = objs[("StatefulSet", "rafka-broker")]
    assert broker["spec"]["replicas"] == 3
    assert broker["spec"]["serviceName"] == "rafka-broker-headless"
    (claim,) = broker["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
    (bc,) = broker["spec"]["template"]["spec"]["containers"]
    benv = env_of(bc)
    pod = f"$(POD_NAME).rafka-broker-headless.{ns}.svc.cluster.local"
    assert benv["RAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://{pod}:9092"
    assert benv["RAFKA_ADVERTISED_REPLICATION_LISTENER"] == f"{pod}:9392"
    assert benv["RAFKA_META_BOOTSTRAP_SERVERS"] == ",".join(f"{h}:9192" for h in meta_hosts)
    # $(VAR) references only work for variables defined earlier in the list.
    names = [e["name"] for e in bc["env"]]
    assert names[:2] == ["POD_NAME", "POD_NAMESPACE"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert bc[probe]["tcpSocket"]["port"] == "kafka", probe
    assert {p["name"]: p["containerPort"] for p in bc["ports"]} == {
        "kafka": 9092,
        "replication": 9392,
        "metrics": 9404,
    }

    # -- both: security, resources, config, PDB -------------------------------------------
    config = objs[("ConfigMap", "rafka-config")]["data"]
    assert "min.insync.replicas=2" in config["broker.properties"].splitlines()
    for sts, component in ((meta, "meta"), (broker, "broker")):
        spec = sts["spec"]["template"]["spec"]
        (c,) = spec["containers"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] == 10001
        assert spec["securityContext"]["fsGroup"] == 10001
        assert spec["enableServiceLinks"] is False  # else RAFKA_*_PORT vars become settings
        assert spec["automountServiceAccountToken"] is False
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert c["resources"]["requests"]["cpu"]
        assert c["resources"]["requests"]["memory"]
        assert c["resources"]["limits"]["memory"]
        assert c["readinessProbe"]
        assert c["livenessProbe"]
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        assert set(mounts) == {"/var/lib/rafka", "/etc/rafka", "/tmp"}
        assert mounts["/etc/rafka"]["readOnly"] is True
        annotations = sts["spec"]["template"]["metadata"]["annotations"]
        assert re.fullmatch(r"[0-9a-f]{64}", annotations["checksum/config"])
        pdb = objs[("PodDisruptionBudget", f"rafka-{component}")]
        assert pdb["spec"]["maxUnavailable"] == 1
        selector = sts["spec"]["selector"]["matchLabels"]
        assert pdb["spec"]["selector"]["matchLabels"] == selector
        labels = sts["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items()
    bootstrap = objs[("Service", "rafka-bootstrap")]["spec"]
    assert bootstrap["selector"] == broker["spec"]["selector"]["matchLabels"]
    assert bootstrap["ports"][0]["targetPort"] == "kafka"


def test_external_services(tools: tuple[str, str], tmp_path: Path) -> None:
    objs = objects(load(tools, render(tools, VALUE_SETS["external-nodeport"], tmp_path)))
    external = sorted(n for k, n in objs if k == "Service" and n.endswith("-external"))
    assert external == [f"rafka-broker-{i}-external" for i in range(5)]
    for i in range(5):
        svc = objs[("Service", f"rafka-broker-{i}-external")]["spec"]
        assert svc["type"] == "NodePort"
        assert svc["selector"]["statefulset.kubernetes.io/pod-name"] == f"rafka-broker-{i}"
        assert svc["ports"][0]["nodePort"] == svc["ports"][0]["port"] == 31090 + i
    (bc,) = objs[("StatefulSet", "rafka-broker")]["spec"]["template"]["spec"]["containers"]
    # Expanded per pod by the entry point: broker i advertises port 31090 + i.
    assert env_of(bc)["RAFKA_ADVERTISED_LISTENERS"] == (
        "PLAINTEXT://kafka.example.com:{ordinal+31090}"
    )
    assert bc["image"] == "registry.example.com/rafka:1.2.3"

    objs = objects(load(tools, render(tools, VALUE_SETS["external-loadbalancer"], tmp_path)))
    svc = objs[("Service", "rafka-broker-2-external")]["spec"]
    assert svc["type"] == "LoadBalancer"
    assert "nodePort" not in svc["ports"][0]
    assert svc["loadBalancerSourceRanges"] == ["10.0.0.0/8"]


def test_metrics_ports_annotations_and_service_monitor(
    tools: tuple[str, str], tmp_path: Path
) -> None:
    objs = objects(load(tools, render(tools, [], tmp_path)))
    for component, port, env in (
        ("broker", 9404, "RAFKA_METRICS_PORT"),
        ("meta", 9405, "RAFKA_META_METRICS_PORT"),
    ):
        template = objs[("StatefulSet", f"rafka-{component}")]["spec"]["template"]
        annotations = template["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == str(port)
        assert annotations["prometheus.io/path"] == "/metrics"
        (container,) = template["spec"]["containers"]
        assert env_of(container)[env] == str(port)
        assert {"name": "metrics", "containerPort": port} in container["ports"]
        service = objs[("Service", f"rafka-{component}-headless")]["spec"]
        assert {"name": "metrics", "port": port, "targetPort": "metrics"} in service["ports"]
    assert not any(kind == "ServiceMonitor" for kind, _ in objs)

    sets = ["metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=prom"]
    objs = objects(load(tools, render(tools, sets, tmp_path)))
    monitor = objs[("ServiceMonitor", "rafka")]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchExpressions"][0]["values"] == ["broker", "meta"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics"
    assert endpoint["path"] == "/metrics"

    objs = objects(load(tools, render(tools, ["metrics.enabled=false"], tmp_path)))
    broker = objs[("StatefulSet", "rafka-broker")]["spec"]["template"]
    assert "prometheus.io/scrape" not in broker["metadata"]["annotations"]
    (container,) = broker["spec"]["containers"]
    assert "RAFKA_METRICS_PORT" not in env_of(container)


def test_non_default_values_reach_the_objects(tools: tuple[str, str], tmp_path: Path) -> None:
    objs = objects(load(tools, render(tools, VALUE_SETS["tuned"], tmp_path)))
    meta = objs[("StatefulSet", "streams-meta")]
    assert meta["spec"]["replicas"] == 5
    (mc,) = meta["spec"]["template"]["spec"]["containers"]
    voters = env_of(mc)["RAFKA_META_QUORUM_VOTERS"].split(",")
    assert len(voters) == 5
    assert voters[4] == (
        "5@streams-meta-4.streams-meta-headless.$(POD_NAMESPACE).svc.k8s.internal:9292"
    )
    broker = objs[("StatefulSet", "streams-broker")]
    spec = broker["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"disktype": "ssd"}
    assert spec["tolerations"][0]["value"] == "kafka"
    assert spec["priorityClassName"] == "high"
    (claim,) = broker["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == "fast-ssd"
    assert claim["spec"]["resources"]["requests"]["storage"] == "500Gi"
    assert broker["spec"]["persistentVolumeClaimRetentionPolicy"]["whenScaled"] == "Delete"
    assert env_of(spec["containers"][0])["RAFKA_BROKER_RACK"] == "rack-{ordinal}"
    assert all(o["metadata"]["labels"]["team"] == "streaming" for o in objs.values())

    objs = objects(load(tools, render(tools, VALUE_SETS["single-meta-ephemeral"], tmp_path)))
    assert not any(k == "PodDisruptionBudget" for k, _ in objs)
    assert ("ServiceAccount", "rafka") not in objs
    broker = objs[("StatefulSet", "rafka-broker")]
    assert "volumeClaimTemplates" not in broker["spec"]
    volumes = {v["name"]: v for v in broker["spec"]["template"]["spec"]["volumes"]}
    assert "emptyDir" in volumes["data"]
    assert broker["spec"]["template"]["spec"]["serviceAccountName"] == "default"


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["meta.replicas=2"], "meta.replicas must be 1, 3 or 5"),
        (["broker.replicas=0"], "broker.replicas must be at least 1"),
        (["external.enabled=true"], "external.enabled needs external.advertisedHost"),
        (["external.type=ClusterIP"], "external.type must be NodePort or LoadBalancer"),
        (["internalSecurity.secretKey="], "internalSecurity.secretKey must name the key"),
    ],
)
def test_broken_values_are_refused(tools: tuple[str, str], sets: list[str], message: str) -> None:
    args = ["template", "rafka", str(CHART)]
    for s in sets:
        args += ["--set", s]
    proc = helm(tools, *args)
    assert proc.returncode != 0, proc.stderr
    assert message in proc.stderr, proc.stderr


def internal_credentials(container: dict) -> dict[str, tuple[str, str]]:
    """RAFKA_INTERNAL_* variable -> (Secret, key) it comes from; a literal value fails."""
    out = {}
    for e in container["env"]:
        if e["name"].startswith("RAFKA_INTERNAL_"):
            assert "value" not in e, f"{e['name']} has a value in the chart"
            ref = e["valueFrom"]["secretKeyRef"]
            out[e["name"]] = (ref["name"], ref["key"])
    return out


def test_internal_credentials_come_from_secrets(tools: tuple[str, str], tmp_path: Path) -> None:
    """Every pod gets the cluster secret (and, when asked, the internal TLS certificate) from
    Kubernetes Secrets; the chart has no default credential."""
    objs = objects(load(tools, render(tools, [], tmp_path)))
    assert not any(kind == "Secret" for kind, _ in objs)  # none made up by the chart
    for component in ("meta", "broker"):
        (c,) = objs[("StatefulSet", f"rafka-{component}")]["spec"]["template"]["spec"]["containers"]
        assert internal_credentials(c) == {"RAFKA_INTERNAL_SECRET": ("rafka-internal", "secret")}

    objs = objects(load(tools, render(tools, VALUE_SETS["internal-tls"], tmp_path)))
    for component in ("meta", "broker"):
        (c,) = objs[("StatefulSet", f"rafka-{component}")]["spec"]["template"]["spec"]["containers"]
        assert internal_credentials(c) == {
            "RAFKA_INTERNAL_SECRET": ("streaming-cluster-secret", "internal-secret"),
            "RAFKA_INTERNAL_SSL_KEYSTORE_CERTIFICATE_CHAIN": ("rafka-internal-tls", "tls.crt"),
            "RAFKA_INTERNAL_SSL_KEYSTORE_KEY": ("rafka-internal-tls", "tls.key"),
            "RAFKA_INTERNAL_SSL_TRUSTSTORE_CERTIFICATES": ("rafka-internal-tls", "ca.crt"),
        }


def test_plain_manifests_match_the_chart(tools: tuple[str, str]) -> None:
    proc = subprocess.run(
        ["bash", str(REPO / "deploy" / "k8s" / "render.sh"), "-"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert MANIFESTS.read_text() == proc.stdout, (
        "deploy/k8s/manifests/rafka.yaml is stale: run `bash deploy/k8s/render.sh`"
    )
    result = load(tools, MANIFESTS, validate=K8S_VERSIONS)
    assert not result["invalid"], result["invalid"][:5]
    # Namespace-free, so `kubectl apply -n <any>` works.
    assert not [d for d in result["documents"] if "namespace" in d["object"]["metadata"]]


def test_every_value_is_documented() -> None:
    """Each key in values.yaml has a comment on the line right above it (or above its block)."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    undocumented = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)([A-Za-z][\w.-]*):", line)
        if not m:
            continue
        above = lines[i - 1].strip() if i else ""
        if not above.startswith("#"):
            undocumented.append(f"values.yaml:{i + 1}: {m.group(2)}")
    assert not undocumented, "settings without a comment above:\n" + "\n".join(undocumented)
