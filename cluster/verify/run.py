"""One verify run end to end: cluster, workload, nemesis rounds, drain, final read, stop, check.

`run_verify` is what ``rafka verify`` and the test suite call. The cluster is a plain
`LocalCluster` on free local ports when every fault is a process fault (kill -9, SIGSTOP), and a
`NamespacedCluster` (one network namespace per node, root needed) when a fault needs namespaces
(network, disk, clock). The run directory keeps ``history.jsonl`` (every attempt, read, fault),
``report.txt``, and the cluster's data and the nodes' logs under ``cluster/``.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.local import LocalCluster, free_base_port
from cluster.verify.checker.ctp import check_ctp
from cluster.verify.checker.group import check_group
from cluster.verify.checker.produce import Report, check, final_read, read_replica_logs
from cluster.verify.checker.txn import check_txns
from cluster.verify.cluster import NamespacedCluster, faketime_library
from cluster.verify.history import OK, History
from cluster.verify.nemesis.base import ClusterView, alive
from cluster.verify.resources import (
    Run,
    cleanup_leftovers,
    require_root,
    require_tools,
)
from cluster.verify.schedule import CLOCK_FAULTS, DISK_FAULTS, Nemesis, Schedule, needs_namespaces
from cluster.verify.workload.ctp import CTP_GROUP, CtpWorker, CtpWorkload
from cluster.verify.workload.group import CONSUMER_PROTOCOL_OVERRIDES, GROUP, GroupWorkload
from cluster.verify.workload.produce import Workload, WorkloadConfig
from cluster.verify.workload.txn import READ_COMMITTED, TxnWorkload

FINAL_COMMITTED = "final-rc"  # the read_committed final read of a txn run

log = logging.getLogger("rafka.verify")

# Broker settings a replicated run relies on: a follower paused for the default 4 s fault drops
# out of the ISR (> replica.lag.time.max.ms) but is not fenced (< broker.session.timeout.ms).
REPLICATED_OVERRIDES = {
    "replica.lag.time.max.ms": "2000",
    "broker.heartbeat.interval.ms": "1000",
    "broker.session.timeout.ms": "6000",
    "unclean.leader.election.enable": "false",
}
_NETWORK_TOOLS = {"ip": "iproute2", "nft": "nftables", "mkfs.ext4": "e2fsprogs"}


@dataclass
class VerifyConfig:
    brokers: int = 3
    metas: int = 3
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    schedule: Schedule = field(default_factory=Schedule)
    overrides: dict[str, str] = field(default_factory=dict)
    warmup_acks: int = 200  # acknowledged records before the first fault
    warmup_timeout_s: float = 30.0


def start_cluster(run_dir: Path, cfg: VerifyConfig, overrides: dict[str, str]) -> LocalCluster:
    """The run's cluster in ``run_dir/cluster``, started: namespaced when a fault needs it. On
    failure, whatever was created (nodes, namespaces, mounts) is removed before the error
    propagates."""
    kinds = cfg.schedule.kinds
    data_dir = run_dir / "cluster"
    if needs_namespaces(kinds):
        require_root("network, disk and clock faults")
        require_tools(_NETWORK_TOOLS)
        if any(k in CLOCK_FAULTS for k in kinds):
            faketime_library()
        cleanup_leftovers()
        namespaced = NamespacedCluster(
            Run(),
            data_dir,
            cfg.brokers,
            cfg.metas,
            overrides,
            disks=any(k in DISK_FAULTS for k in kinds),
        )
        try:
            namespaced.start()
        except BaseException:
            namespaced.close()
            raise
        return namespaced
    for attempt in range(3):
        shutil.rmtree(data_dir, ignore_errors=True)
        base_port = free_base_port(cfg.brokers, cfg.metas)
        cluster = LocalCluster(cfg.brokers, cfg.metas, data_dir, base_port, overrides)
        try:
            cluster.start()
            return cluster
        except BaseException as e:
            cluster.stop()
            # A port found free was taken before a node bound it (other clusters on the
            # machine): another range, in a fresh directory.
            if not isinstance(e, RuntimeError) or attempt == 2 or not _port_clash(cluster):
                raise
            log.warning("a port of %d.. was taken meanwhile; starting on other ports", base_port)
    raise AssertionError("unreachable")


def _port_clash(cluster: LocalCluster) -> bool:
    return any(
        "Address already in use" in node.log_file.read_text(errors="replace")
        for node in cluster.nodes.values()
        if node.log_file.exists()
    )


def release(cluster: LocalCluster) -> None:
    """Stop the nodes; for a namespaced cluster also remove its namespaces and mounts."""
    if isinstance(cluster, NamespacedCluster):
        cluster.close()
    else:
        cluster.stop()


def run_verify(run_dir: Path, cfg: VerifyConfig, out: Callable[[str], None] = print) -> Report:
    """Run it all; returns the report (also written to ``run_dir/report.txt``)."""
    t0 = time.monotonic()
    phases: list[tuple[str, float]] = []

    def phase(name: str) -> None:
        phases.append((name, time.monotonic() - t0))
        out(f"[verify {time.monotonic() - t0:6.1f}s] {name}")

    w = cfg.workload
    overrides = {
        "default.replication.factor": str(w.replication_factor),
        "min.insync.replicas": str(w.min_insync_replicas),
        **cfg.overrides,
    }
    run_dir.mkdir(parents=True, exist_ok=True)
    cluster = start_cluster(run_dir, cfg, overrides)
    history = History()
    kinds = {"txn": TxnWorkload, "ctp": CtpWorkload, "group": GroupWorkload}
    workload = kinds.get(w.kind, Workload)(cluster, history, w)
    nemesis = Nemesis(cluster, history, w.topic)
    try:
        where = "own network namespaces" if isinstance(cluster, NamespacedCluster) else "local"
        phase(f"cluster up ({where}): {cfg.brokers} brokers, {cfg.metas} meta, {overrides}")
        workload.setup()
        workload.start()
        names = ", ".join(p.name for p in workload.producers)
        phase(f"workload started: {names} at {w.rate}/s each, topic {w.topic} x{w.partitions}")
        if not workload.wait_for_acks(cfg.warmup_acks, cfg.warmup_timeout_s):
            got = len(history.by_outcome(OK))
            raise RuntimeError(
                f"only {got} of {cfg.warmup_acks} warm-up records acknowledged within "
                f"{cfg.warmup_timeout_s}s (RF={w.replication_factor}, "
                f"min.insync.replicas={w.min_insync_replicas}): acks=all makes no progress"
            )
        s = cfg.schedule
        limit = f"{s.rounds} rounds" if s.rounds > 0 else "rounds"
        if s.duration_s > 0:
            limit += f" for up to {s.duration_s:.0f}s"
        phase(f"warmed up; nemesis: {limit} of {', '.join(s.kinds)}, seed {s.seed}")
        nemesis.run(s)
        phase("nemesis done; draining producers")
        workload.stop()
        phase("producers stopped; final read")
        isr = {p: st.isr for p, st in ClusterView(cluster, w.topic).partitions(10).items()}
        final = final_read(history, cluster.bootstrap, w.topic, w.partitions, isr)
        transactional = w.kind in ("txn", "ctp")
        if transactional:
            committed = final_read(
                history,
                cluster.bootstrap,
                w.topic,
                w.partitions,
                isolation="read_committed",
                name=FINAL_COMMITTED,
                upto=final.high,
            )
        if not workload.catch_up(final.high, 30):
            history.note("live consumers did not reach the final high watermarks within 30s")
        workload.stop_consumers()
        phase("final read done; stopping the cluster")
        t_stop = time.monotonic()
        cluster.stop()
        if time.monotonic() - t_stop > 15:
            history.note(
                f"stopping the cluster took {time.monotonic() - t_stop:.0f}s: a node ignored "
                "SIGTERM and was killed (see the rafka.cluster warning)"
            )
        disks = cluster.disks if isinstance(cluster, NamespacedCluster) else {}
        more = {name: [fs.mount] for name, fs in disks.items()}
        replicas = read_replica_logs(cluster.data_dir, w.topic, more)
        ctp = frozenset(p.name for p in workload.producers if isinstance(p, CtpWorker))
        members = frozenset(e.member for e in history.events) | ctp  # resume from commits
        report = check(
            history,
            final,
            replicas,
            w.replication_factor,
            dense=not transactional,
            resuming=members,
        )
        if transactional:
            if not committed.complete:
                report.failures.append(
                    f"the read_committed final read did not reach the high watermarks "
                    f"{committed.high} (the last stable offset stuck behind an open transaction)"
                )
            readers = {READ_COMMITTED, FINAL_COMMITTED} | ctp
            verdicts = [check_txns(history, readers, FINAL_COMMITTED)]
            if w.kind == "ctp":
                verdicts.append(check_ctp(history, FINAL_COMMITTED, CTP_GROUP))
        else:
            verdicts = [check_group(history, final, GROUP)] if w.kind == "group" else []
        for verdict in verdicts:
            report.failures += verdict.failures
            report.figures.update(verdict.figures)
            report.lines += verdict.lines
        report.lines.insert(0, headline(report))
        phase("checked")
    finally:
        nemesis.stop()
        workload.abort()  # a no-op after a normal run
        if any(alive(cluster, n) for n in cluster.nodes):
            nemesis.heal_all()  # SIGCONT anything still stopped, so that stop() can end it
        release(cluster)
        if workload.summary():  # in the history too, for a run that ended in an error
            history.note("client errors:\n" + workload.summary())
        history.dump(run_dir / "history.jsonl")
    summary = workload.summary()
    if summary:
        report.lines.append("client errors seen (retried or recorded above):\n" + summary)
    report.lines.append("timings: " + ", ".join(f"{_short(n)} @{t:.1f}s" for n, t in phases))
    report.lines.append(f"total {time.monotonic() - t0:.1f}s; run dir {run_dir}")
    report.figures["seconds"] = round(time.monotonic() - t0, 1)
    (run_dir / "report.txt").write_text(report.text() + "\n")
    out(report.text())
    return report


def _figures(report: Report) -> dict[str, Any]:
    """The report's figures, plus: ``faults`` counted, ``worst_gap_s`` (the longest time without
    an ack on the partitions a fault hit, over every fault)."""
    f: dict[str, Any] = dict(report.figures)
    f["fault_count"] = len(f.get("faults") or [])
    f["worst_gap_s"] = max(f.get("fault_ack_gaps_s") or [0.0])
    return f


def headline(report: Report) -> str:
    """The verdict in one line: operations, acknowledged, lost, duplicated, anomalies, and the
    worst unavailability during a fault."""
    f = _figures(report)
    return (
        f"operations {f.get('attempted', 0)}  acknowledged {f.get('acknowledged', 0)}  lost "
        f"{f.get('lost', 0)}  duplicated {f.get('duplicated', 0)}  indeterminate "
        f"{f.get('indeterminate', 0)}  faults {f['fault_count']}  longest ack gap during a "
        f"fault {f['worst_gap_s']:.1f}s  anomalies {len(report.failures)}"
    ) + (
        f"  transactions {f['txns']} (committed {f['txns_committed']}, aborted "
        f"{f['txns_aborted']}, indeterminate {f['txns_indeterminate']})"
        if "txns" in f
        else ""
    )


def build_config(
    nemesis: tuple[str, ...],
    *,
    rounds: int = 0,
    duration_s: float = 60.0,
    seed: int = 0,
    brokers: int = 3,
    metas: int = 3,
    replication_factor: int = 3,
    min_insync_replicas: int = 2,
    partitions: int = 6,
    rate: float = 100.0,
    down_s: float = 0.0,
    quiet_s: float = 4.0,
    producers: tuple[str, ...] = ("idempotent",),
    overrides: dict[str, str] | None = None,
    workload: str = "produce",
    group_protocol: str = "classic",
) -> VerifyConfig:
    """A run of ``workload`` under ``nemesis``: what ``rafka verify`` runs. ``produce``: the
    idempotent-produce workload (``producers``: ``idempotent`` and/or ``plain``, confluent-kafka
    with acks=all); ``txn``: transactional producers and read_committed readers; ``ctp``: those
    and consume-transform-produce transformers; ``group``: a churning consumer group of
    ``group_protocol`` (classic or consumer, KIP-848)."""
    unknown = set(producers) - {"idempotent", "plain"}
    if unknown or not producers:
        raise ValueError(f"producers: idempotent and/or plain, not {sorted(unknown) or 'none'}")
    if workload not in ("produce", "txn", "ctp", "group"):
        raise ValueError(f"unknown workload {workload!r} (known: produce, txn, ctp, group)")
    if group_protocol not in ("classic", "consumer"):
        raise ValueError(f"group protocol: classic or consumer, not {group_protocol!r}")
    kip848 = CONSUMER_PROTOCOL_OVERRIDES if group_protocol == "consumer" else {}
    replicated = replication_factor > 1
    return VerifyConfig(
        brokers=brokers,
        metas=metas,
        workload=WorkloadConfig(
            partitions=partitions,
            replication_factor=replication_factor,
            min_insync_replicas=min_insync_replicas,
            rate=rate,
            idempotent_py="idempotent" in producers,
            plain_py="plain" in producers,
            kind=workload,
            seed=seed,
            group_protocol=group_protocol,
        ),
        schedule=Schedule(
            kinds=nemesis,
            rounds=rounds,
            duration_s=duration_s,
            down_s=down_s,
            quiet_s=quiet_s,
            full_isr=replicated,
            seed=seed,
        ),
        overrides=(dict(REPLICATED_OVERRIDES) if replicated else {}) | kip848 | (overrides or {}),
    )


# The workload-specific columns of `table`: (figure that marks such a run, header, cell).
_COLUMNS: list[tuple[str, str, Callable[[dict[str, Any]], str]]] = [
    (
        "txns",
        "txns committed / aborted / indeterminate",
        lambda f: f"{f['txns_committed']} / {f['txns_aborted']} / {f['txns_indeterminate']}",
    ),
    ("ctp_transformed", "transformed", lambda f: str(f["ctp_transformed"])),
    (
        "ctp_transformed",
        "offsets without writes / writes without offsets / transformed twice",
        lambda f: (
            f"{f['ctp_offsets_without_writes']} / {f['ctp_writes_without_offsets']} / "
            f"{f['ctp_duplicated']}"
        ),
    ),
    ("ctp_transformed", "cycles G0 / G1c", lambda f: f"{f['cycles_g0']} / {f['cycles_g1c']}"),
    (
        "group_members",
        "members (killed)",
        lambda f: f"{f['group_members']} ({f['group_killed']})",
    ),
    ("group_members", "commits", lambda f: str(f["group_commits"])),
    ("group_members", "never consumed", lambda f: str(f["group_unconsumed"])),
    ("group_members", "commits ahead", lambda f: str(f["group_commit_ahead"])),
    ("group_members", "two owners", lambda f: str(f["group_double_owner"])),
    ("group_members", "stale owners fenced", lambda f: str(f["group_stale_owner"])),
]


def table(rows: list[tuple[str, Report]]) -> str:
    """One row per run: nemesis, minutes, operations, acknowledged, lost, duplicated, longest
    ack gap during a fault, anomalies (a Markdown table, as in the README); plus the columns of
    the workload's own checks (transactions, the pipeline, the group) when the runs have them."""
    columns = [c for c in _COLUMNS if any(c[0] in r.figures for _, r in rows)]
    head = ["nemesis", "minutes", "faults", "operations", "acknowledged", "lost", "duplicated"]
    head += ["worst ack gap", *(c[1] for c in columns), "anomalies"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in rows:
        f = _figures(r)
        cells = [name, f"{f.get('seconds', 0) / 60:.1f}", str(f["fault_count"])]
        cells += [str(f.get(k, 0)) for k in ("attempted", "acknowledged", "lost", "duplicated")]
        cells.append(f"{f['worst_gap_s']:.1f}s")
        cells += [cell(f) if key in f else "-" for key, _, cell in columns]
        cells.append(str(len(r.failures)))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _short(phase: str) -> str:
    return phase.split(";")[0].split(":")[0].split(" (")[0]
