"""The plain Kubernetes manifests (deploy/k8s/manifests/rafka.yaml), run in Docker the way a
kubelet would run their pods - as far as Docker can - since no Kubernetes cluster runs here.

For each pod of the two StatefulSets: hostname = pod name, a DNS alias = the pod's name through
its headless Service (<pod>.<service>.<namespace>.svc.cluster.local), the container's args and
env with ``fieldRef`` and ``$(VAR)`` resolved as the kubelet does, the ConfigMap's items as
read-only files, a volume per pod for the data (its PVC), /tmp on tmpfs, and the pod's
securityContext (uid/gid, read-only root filesystem, no capabilities, no privilege
escalation). Then, through each broker's Kafka port published on the host:

- every broker answers (the readiness probe's port is open) and registered under the node.id
  its ordinal gives, advertising its pod DNS name;
- a topic auto-created takes num.partitions and default.replication.factor from the ConfigMap;
- an acks=all produce (min.insync.replicas=2 from the ConfigMap) succeeds on each partition,
  so the followers replicate from the leaders through the advertised pod DNS names, and the
  brokers reach the Raft quorum through the meta pods' DNS names.

What this does not cover (no cluster): the API server accepting the objects (see
tests/unit/deploy for the schemas), scheduling, PVC provisioning, Services' virtual IPs,
probes run by a kubelet, PodDisruptionBudgets, rolling updates.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from cluster.verify.workload.produce import supported_apis
from tests.integration.kafka_wire import WireClient, builder
from tests.unit.log.batches import make_batch

pytestmark = pytest.mark.containers

REPO = Path(__file__).resolve().parents[3]
MANIFESTS = REPO / "deploy" / "k8s" / "manifests" / "rafka.yaml"
TOOLS = REPO / "tests" / "unit" / "deploy"
NAMESPACE = "streaming"
METADATA, PRODUCE = 3, 0
# The Secrets created before applying the manifests, as README "Kubernetes" says: (name, key).
SECRETS = {("rafka-internal", "secret"): secrets.token_hex(32)}


def manifest_objects() -> dict[tuple[str, str], dict]:
    setup = subprocess.run(
        ["bash", str(TOOLS / "setup.sh")], capture_output=True, text=True, timeout=600
    )
    assert setup.returncode == 0, setup.stderr
    python = setup.stdout.split()[1]
    proc = subprocess.run(
        [python, str(TOOLS / "k8s_tool.py"), str(MANIFESTS)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)["documents"]
    return {(d["object"]["kind"], d["object"]["metadata"]["name"]): d["object"] for d in docs}


def kubelet_env(container: dict, pod: str) -> dict[str, str]:
    """The container's environment as the kubelet builds it: downward-API fields, keys of
    SECRETS, and $(VAR) references to variables defined earlier in the list ($$ escapes a $)."""
    env: dict[str, str] = {}
    fields = {"metadata.name": pod, "metadata.namespace": NAMESPACE}
    for item in container.get("env", []):
        if "valueFrom" in item:
            source = item["valueFrom"]
            if secret := source.get("secretKeyRef"):
                env[item["name"]] = SECRETS[(secret["name"], secret["key"])]
            else:
                env[item["name"]] = fields[source["fieldRef"]["fieldPath"]]
            continue

        def ref(m: re.Match[str]) -> str:
            return "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0))

        env[item["name"]] = re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", ref, item["value"])
    return env


def test_manifests_pods_in_docker(rafka_image: str, tmp_path: Path) -> None:
    import docker
    from testcontainers.core.network import Network

    from cluster.local import free_base_port
    from tests.integration.containers.cluster import LABEL

    objs = manifest_objects()
    config = objs[("ConfigMap", "rafka-config")]["data"]
    client = docker.from_env(timeout=120)
    labels = {LABEL: "containers", f"{LABEL}.pid": str(os.getpid())}
    network = Network(docker_network_kw={"labels": labels}).create()
    containers, volumes = [], []
    ports: dict[int, int] = {}  # broker node id -> published Kafka port
    base = free_base_port(3, 3)
    try:
        for sts_name in ("rafka-meta", "rafka-broker"):
            sts = objs[("StatefulSet", sts_name)]
            spec = sts["spec"]["template"]["spec"]
            (c,) = spec["containers"]
            image = os.environ.get("RAFKA_TEST_IMAGE") or c["image"]  # rafka:<version>
            pod_sec, sec = spec["securityContext"], c["securityContext"]
            cm_dir = tmp_path / f"{sts_name}-config"
            (cm_volume,) = [v for v in spec["volumes"] if v["name"] == "config"]
            for item in cm_volume["configMap"]["items"]:
                (cm_dir / item["path"]).parent.mkdir(parents=True, exist_ok=True)
                (cm_dir / item["path"]).write_text(config[item["key"]])
            mounts = {m["name"]: m for m in c["volumeMounts"]}
            kafka = next((p for p in c["ports"] if p["name"] == "kafka"), None)
            for i in range(sts["spec"]["replicas"]):
                pod = f"{sts_name}-{i}"
                fqdn = f"{pod}.{sts['spec']['serviceName']}.{NAMESPACE}.svc.cluster.local"
                volume = client.volumes.create(f"rafka-test-{os.getpid()}-{pod}", labels=labels)
                volumes.append(volume)
                published = {}
                if kafka is not None:
                    ports[i + 1] = base + i
                    published = {f"{kafka['containerPort']}/tcp": ("127.0.0.1", base + i)}
                container = client.containers.create(
                    image,
                    command=c["args"],
                    name=f"rafka-test-{os.getpid()}-{pod}",
                    hostname=pod,
                    environment=kubelet_env(c, pod),
                    labels=labels,
                    user=f"{pod_sec['runAsUser']}:{pod_sec['runAsGroup']}",
                    group_add=[str(pod_sec["fsGroup"])],
                    read_only=sec["readOnlyRootFilesystem"],
                    cap_drop=sec["capabilities"]["drop"],
                    security_opt=["no-new-privileges"],
                    tmpfs={mounts["tmp"]["mountPath"]: ""},
                    volumes={
                        str(cm_dir): {"bind": mounts["config"]["mountPath"], "mode": "ro"},
                        volume.name: {"bind": mounts["data"]["mountPath"], "mode": "rw"},
                    },
                    ports=published,
                    network=network.name,
                )
                client.networks.get(network.name).disconnect(container)
                client.networks.get(network.name).connect(container, aliases=[fqdn])
                containers.append(container)
        for container in containers:
            container.start()

        def logs() -> str:
            return "\n".join(
                f"--- {c.name}\n{c.logs(tail=15).decode(errors='replace')}" for c in containers
            )

        # Readiness: each broker's Kafka port answers (it opens only once registered and
        # caught up with the metadata).
        deadline = time.monotonic() + 90
        for port in ports.values():
            while True:
                try:
                    supported_apis(f"127.0.0.1:{port}", timeout=1.0)
                    break
                except (OSError, RuntimeError):
                    assert time.monotonic() < deadline, f"broker not ready:\n{logs()}"
                    time.sleep(0.5)

        topic = "smoke"
        while True:
            with WireClient(ports[1]) as w:
                md = w.call(
                    METADATA,
                    12,
                    topics=(builder(METADATA, 12).MetadataRequestTopic(name=topic, topic_id=None),),
                    allow_auto_topic_creation=True,
                    include_topic_authorized_operations=False,
                )
            parts = md.topics[0].partitions if md.topics else ()
            if parts and all(p.leader_id > 0 for p in parts):
                break
            assert time.monotonic() < deadline, f"no leaders: {md}\n{logs()}"
            time.sleep(0.3)
        advertised = {b.node_id: (b.host, b.port) for b in md.brokers}
        assert advertised == {
            i + 1: (f"rafka-broker-{i}.rafka-broker-headless.{NAMESPACE}.svc.cluster.local", 9092)
            for i in range(3)
        }
        assert len(parts) == 3  # num.partitions from the ConfigMap
        assert all(len(p.replica_nodes) == 3 for p in parts)  # default.replication.factor

        b = builder(PRODUCE, 9)
        for p in parts:
            batch = make_batch([f"through the manifests {p.partition_index}".encode()])
            data = b.TopicProduceData(
                name=topic,
                partition_data=(b.PartitionProduceData(index=p.partition_index, records=batch),),
            )
            with WireClient(ports[p.leader_id]) as w:
                resp = w.call(PRODUCE, 9, acks=-1, timeout=15000, topic_data=(data,))
            (result,) = resp.responses[0].partition_responses
            assert result.error_code == ErrorCode.none, f"acks=all failed: {result}\n{logs()}"
            assert result.base_offset == 0
    finally:
        for container in containers:
            container.remove(force=True, v=True)
        for volume in volumes:
            volume.remove(force=True)
        network.remove()
        client.close()
