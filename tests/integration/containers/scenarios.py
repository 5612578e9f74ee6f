"""Failover scenarios against a `ContainerCluster`, recorded and judged by the chaos harness.

One scenario = a fresh 3-meta/3-broker cluster of containers, the chaos `Workload` (idempotent
acks=all producers - confluent-kafka and the Java client with its defaults - and a live
consumer, all through the published ports), one fault (`FAULTS`), a drain, the checker's final
read, a clean stop, the replicas' logs read from the volumes, and `checker.check`. What is new
here is only what containers make possible (pause, network isolation, recreate from volumes);
the rest is the harness's own code:

- workload.py `Workload` / `WorkloadConfig`: producers and consumer, as for a LocalCluster
- nemesis/ `ClusterView` (metadata, meta Raft leader, "whole again"), `kill_leader`,
  `kill_meta_leader`: used as they are, ContainerCluster has LocalCluster's interface
- checker.py `final_read`, `read_replica_logs`, `check`: the verdict and its figures
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.verify.checker.produce import Report, check, final_read, read_replica_logs
from cluster.verify.history import OK, Fault, History
from cluster.verify.nemesis.base import ClusterView, broker_name
from cluster.verify.nemesis.process import kill_leader, kill_meta_leader
from cluster.verify.run import REPLICATED_OVERRIDES
from cluster.verify.workload.produce import Workload, WorkloadConfig, supported_apis
from tests.integration.clients import drivers
from tests.integration.containers.cluster import ContainerCluster
from tests.integration.kafka_wire import WireClient, builder

METADATA = 3

SESSION_S = int(REPLICATED_OVERRIDES["broker.session.timeout.ms"]) / 1000
RECOVER_TIMEOUT_S = 90.0
MAX_FAULT_S = 40.0  # a pause / isolation ends by then even if no failover was seen


@dataclass
class Context:
    cluster: ContainerCluster
    history: History
    view: ClusterView
    checks: dict[str, Any] = field(default_factory=dict)  # scenario-specific facts


def _leader_seen_by(port: int, topic: str, partition: int) -> int | None:
    """The partition's leader in the Metadata of the broker at 127.0.0.1:``port``."""
    with WireClient(port, timeout=2.0) as w:
        md = w.call(
            METADATA,
            12,
            topics=(builder(METADATA, 12).MetadataRequestTopic(name=topic, topic_id=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    for t in md.topics:
        for p in t.partitions:
            if p.partition_index == partition:
                return p.leader_id
    return None


def _wait_new_leader(ctx: Context, partition: int, old: int, until: float) -> float | None:
    """Poll the *other* brokers' Metadata until one names a leader of ``partition`` other than
    ``old``; the time it was seen, or None if not by ``until``. (Not through a client: a
    client may keep asking the faulty broker, which holds the request.)"""
    ports = [
        n.host_port for n in ctx.cluster.nodes.values() if n.kind == "broker" and n.node_id != old
    ]
    while time.time() < until:
        for port in ports:
            with contextlib.suppress(Exception):
                if _leader_seen_by(port, ctx.view.topic, partition) not in (None, -1, old):
                    return time.time()
        time.sleep(0.1)
    return None


def _recovered(ctx: Context, fault: Fault) -> None:
    fault.t_recovered = ctx.view.wait_whole(RECOVER_TIMEOUT_S, full_isr=True)
    if fault.t_recovered is None:
        ctx.history.note(f"{fault.kind} {fault.target}: not whole {RECOVER_TIMEOUT_S}s after heal")


def _led_by(ctx: Context, node_id: int) -> tuple[int, ...]:
    return tuple(sorted(p for p, s in ctx.view.partitions().items() if s.leader == node_id))


# ------------------------------------------------------------------------------------ the faults


def fault_kill_leader(ctx: Context, down_s: float = 5.0) -> None:
    """kill -9 (``docker kill``) of partition 0's leader; restarted after ``down_s``."""
    # ContainerCluster has LocalCluster's kill/start_node/wait_ready: cluster/verify's nemesis
    # functions are typed for LocalCluster only (a Protocol there would name what they use).
    fault, heal = kill_leader(ctx.cluster, ctx.history, ctx.view, 0)  # type: ignore[arg-type]
    time.sleep(down_s)
    heal()
    _recovered(ctx, fault)


def fault_pause_leader(ctx: Context, extra_s: float = 4.0) -> None:
    """``docker pause`` of partition 0's leader for broker.session.timeout.ms + ``extra_s`` (and
    at least 2 s past the failover): its lease runs out, the meta service fences it and elects
    other leaders; unpaused, it must find itself deposed, truncate and catch up."""
    leader = ctx.view.leader_of(0)
    name, led = broker_name(leader), _led_by(ctx, leader)
    ctx.cluster.pause(name)
    fault = ctx.history.fault("pause-leader", name, led or (0,), "docker pause")
    seen = _wait_new_leader(ctx, 0, leader, fault.t_start + MAX_FAULT_S)
    ctx.checks["failover_s"] = None if seen is None else round(seen - fault.t_start, 2)
    # Past the session timeout by extra_s, and past the failover (on a loaded machine the
    # fencing can take longer than the lease), so it is deposed for a while when it wakes.
    end = max(fault.t_start + SESSION_S + extra_s, (seen or 0) + 2.0)
    time.sleep(max(0.0, end - time.time()))
    ctx.cluster.unpause(name)
    fault.t_heal = time.time()
    fault.detail += (
        f" {fault.t_heal - fault.t_start:.0f}s, new leader of 0 seen after "
        f"{ctx.checks['failover_s']}s"
    )
    _recovered(ctx, fault)


def fault_isolate_leader(ctx: Context, extra_s: float = 6.0) -> None:
    """``docker network disconnect`` of partition 0's leader from the cluster network for
    broker.session.timeout.ms + ``extra_s`` (and at least 2 s past the failover). The
    producers keep their connections to it (the client network stays), so they go on sending
    it records; it can reach neither its
    followers nor the meta service, so it must acknowledge none of them (acks=all,
    min.insync.replicas=2) - any it did would be lost when it rejoins and truncates."""
    leader = ctx.view.leader_of(0)
    name, led = broker_name(leader), _led_by(ctx, leader)
    node = ctx.cluster.nodes[name]
    ctx.cluster.isolate(name)
    fault = ctx.history.fault("isolate-leader", name, led or (0,), "network disconnect")
    seen = _wait_new_leader(ctx, 0, leader, fault.t_start + MAX_FAULT_S)
    ctx.checks["failover_s"] = None if seen is None else round(seen - fault.t_start, 2)
    end = max(fault.t_start + SESSION_S + extra_s, (seen or 0) + 2.0)
    # Still reachable by clients while cut off from the cluster?
    try:
        supported_apis(f"127.0.0.1:{node.host_port}", timeout=3.0)
        ctx.checks["isolated_reachable_by_clients"] = True
    except (OSError, RuntimeError):
        ctx.checks["isolated_reachable_by_clients"] = False
    time.sleep(max(0.0, end - time.time()))
    ctx.cluster.rejoin(name)
    fault.t_heal = time.time()
    # Acks on the partitions it led, from 1 s after the cut until the new leader was seen:
    # only the isolated leader could have given them (a sign, not proof; `lost` is the proof).
    stop = seen if seen is not None else fault.t_heal
    attempts = list(ctx.history.attempts.values())
    hit = led or (0,)
    ctx.checks["acks_while_cut_off"] = sum(
        1
        for a in attempts
        if a.outcome == OK
        and a.partition in hit
        and a.t_done is not None
        and fault.t_start + 1.0 < a.t_done < stop
    )
    ctx.checks["_isolation"] = (fault, hit)  # counted after the drain (see run_scenario)
    fault.detail += (
        f" {fault.t_heal - fault.t_start:.0f}s, new leader of 0 seen after "
        f"{ctx.checks['failover_s']}s"
    )
    _recovered(ctx, fault)


def fault_kill_meta_leader(ctx: Context, down_s: float = 5.0) -> None:
    """kill -9 of the meta service's Raft leader; restarted after ``down_s``."""
    fault, heal = kill_meta_leader(ctx.cluster, ctx.history, ctx.view)  # type: ignore[arg-type]
    time.sleep(down_s)
    heal()
    _recovered(ctx, fault)


def fault_rolling_restart(ctx: Context, pause_s: float = 1.0) -> None:
    """Every broker in turn: SIGTERM (controlled shutdown), start, wait until the cluster is
    whole again (every replica back in its ISR) before the next one, as an operator would."""
    for name in [n for n, node in ctx.cluster.nodes.items() if node.kind == "broker"]:
        node_id = ctx.cluster.nodes[name].node_id
        fault = ctx.history.fault(
            "restart-broker", name, _led_by(ctx, node_id), "docker stop (SIGTERM) + start"
        )
        ctx.cluster.stop_node(name, timeout=30)
        ctx.cluster.start_node(name)
        ctx.cluster.wait_ready(RECOVER_TIMEOUT_S, names=[name])
        fault.t_heal = time.time()
        _recovered(ctx, fault)
        time.sleep(pause_s)


def fault_full_restart(ctx: Context, down_s: float = 2.0) -> None:
    """Stop the whole cluster (brokers, then meta nodes, SIGTERM), remove every container,
    and start new ones on the same volumes. The producers keep sending throughout."""
    fault = ctx.history.fault("full-restart", "cluster", (), "stop all, new containers")
    ctx.cluster.stop()
    ctx.cluster.recreate()
    time.sleep(down_s)
    ctx.cluster.start(RECOVER_TIMEOUT_S)
    fault.t_heal = time.time()
    _recovered(ctx, fault)


FAULTS: dict[str, Callable[[Context], None]] = {
    "kill-leader": fault_kill_leader,
    "pause-leader": fault_pause_leader,
    "isolate-leader": fault_isolate_leader,
    "kill-meta-leader": fault_kill_meta_leader,
    "rolling-restart": fault_rolling_restart,
    "full-restart": fault_full_restart,
}


# ------------------------------------------------------------------------------------ the run


@dataclass
class Outcome:
    scenario: str
    report: Report
    checks: dict[str, Any]
    seconds: float

    def summary(self) -> str:
        f: dict[str, Any] = self.report.figures
        gaps = f.get("fault_ack_gaps_s") or [0.0]
        extra = "".join(f"  {k}={v}" for k, v in self.checks.items())
        return (
            f"{self.scenario:16} acknowledged {f['acknowledged']}  read {f['read_live']} live"
            f" / {f['read_final']} final  lost {f['lost']}  duplicated {f['duplicated']}"
            f"  indeterminate {f['indeterminate']}  unavailable {max(gaps):.1f}s"
            f"{extra}  [{'OK' if self.report.ok else 'FAILED'}, {self.seconds:.0f}s]"
        )


def workload_config() -> WorkloadConfig:
    return WorkloadConfig(
        topic="failover",
        partitions=6,
        replication_factor=3,
        min_insync_replicas=2,
        rate=100.0,
        idempotent_py=True,  # confluent-kafka, acks=all, enable.idempotence=true
        plain_py=False,
        java="4.3.0",  # the Java client with its defaults: acks=all, idempotence on
        java_command=drivers.java_command("4.3.0"),
        java_idempotence=None,
        message_timeout_s=60.0,
        drain_s=30.0,
    )


def run_scenario(
    run_dir: Path,
    scenario: str,
    *,
    warmup_acks: int = 300,
    quiet_s: float = 3.0,
    out: Callable[[str], None] = print,
) -> Outcome:
    """The whole scenario; the outcome carries the checker's report and the scenario's facts.
    ``run_dir`` keeps the volumes, the containers' logs, history.jsonl and report.txt."""
    t0 = time.monotonic()

    def phase(text: str) -> None:
        out(f"[{scenario} {time.monotonic() - t0:6.1f}s] {text}")

    w = workload_config()
    overrides = {
        **REPLICATED_OVERRIDES,
        "default.replication.factor": str(w.replication_factor),
        "min.insync.replicas": str(w.min_insync_replicas),
    }
    cluster = ContainerCluster(run_dir, overrides=overrides)
    history = History()
    workload = Workload(cluster, history, w)  # type: ignore[arg-type]
    ctx = Context(cluster, history, ClusterView(cluster, w.topic))  # type: ignore[arg-type]
    report: Report | None = None
    try:
        cluster.start()
        phase(f"cluster up ({cluster.image}): bootstrap {cluster.bootstrap}")
        workload.setup()
        workload.start()
        if not workload.wait_for_acks(warmup_acks, 60):
            raise AssertionError(f"fewer than {warmup_acks} acks in 60s before any fault")
        phase(f"warmed up ({', '.join(p.name for p in workload.producers)}); fault {scenario}")
        FAULTS[scenario](ctx)
        ctx.checks["recovered"] = all(f.t_recovered is not None for f in history.faults)
        phase(f"fault over ({ctx.checks}); quiet {quiet_s}s, then drain")
        time.sleep(quiet_s)
        workload.stop()
        if (iso := ctx.checks.pop("_isolation", None)) is not None:
            fault, hit = iso
            # Records the producers sent while it was cut off that landed on its partitions:
            # they were sent to it first (clients kept its leadership until it rejoined).
            ctx.checks["sent_to_it_while_cut_off"] = sum(
                1
                for a in history.attempts.values()
                if a.outcome == OK
                and a.partition in hit
                and fault.t_start < a.t_send < (fault.t_heal or 0)
            )
        isr = {p: s.isr for p, s in ctx.view.partitions(10).items()}
        final = final_read(history, cluster.bootstrap, w.topic, w.partitions, isr)
        if not workload.catch_up(final.high, 30):
            history.note("live consumers did not reach the final high watermarks within 30s")
        workload.stop_consumers()
        phase("final read done; stopping the cluster")
        cluster.stop()
        replicas = read_replica_logs(cluster.data_dir, w.topic)
        report = check(history, final, replicas, w.replication_factor)
    finally:
        workload.abort()
        with contextlib.suppress(Exception):
            for name in cluster.nodes:
                cluster.unpause(name)
        cluster.destroy()
        history.dump(run_dir / "history.jsonl")
    summary = workload.summary()
    if summary:
        report.lines.append("client errors seen (retried or recorded above):\n" + summary)
    outcome = Outcome(scenario, report, dict(ctx.checks), time.monotonic() - t0)
    report.lines.append(f"total {outcome.seconds:.1f}s; run dir {run_dir}")
    (run_dir / "report.txt").write_text(report.text() + "\n")
    out(report.text())
    out("SUMMARY " + outcome.summary())
    return outcome
