"""One chaos run end to end: cluster, workload, nemesis rounds, drain, final read, stop, check.

    python -m tests.integration.chaos.run --rf 3 --min-isr 2 --rounds 6 --faults \\
        kill-leader,pause-follower,kill-meta-leader [--dir /tmp/chaos] [--rate 100]

prints the report (figures and verdict) and exits 1 if a check failed. The run directory keeps
the nodes' logs, their data, ``history.jsonl`` (every attempt, read, fault) and ``report.txt``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.integration.chaos.checker import Report, check, final_read, read_replica_logs
from tests.integration.chaos.history import History
from tests.integration.chaos.nemesis import ClusterView, Nemesis, Schedule, alive
from tests.integration.chaos.workload import Workload, WorkloadConfig
from tests.integration.conftest import start_cluster

# Broker/meta settings a replicated run relies on (see test_chaos.py for why each value).
REPLICATED_OVERRIDES = {
    "replica.lag.time.max.ms": "2000",  # a follower paused 4 s must drop out of the ISR
    "broker.heartbeat.interval.ms": "1000",
    "broker.session.timeout.ms": "6000",  # > the pause, so a paused follower is not fenced
    "unclean.leader.election.enable": "false",
}


@dataclass
class ChaosConfig:
    brokers: int = 3
    metas: int = 3
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    schedule: Schedule = field(default_factory=Schedule)
    overrides: dict[str, str] = field(default_factory=dict)
    warmup_acks: int = 200  # acknowledged records before the first fault
    warmup_timeout_s: float = 30.0


def run_chaos(run_dir: Path, cfg: ChaosConfig, out=print) -> Report:
    """Run it all; returns the report (also written to ``run_dir/report.txt``)."""
    t0 = time.monotonic()
    phases: list[tuple[str, float]] = []

    def phase(name: str) -> None:
        phases.append((name, time.monotonic() - t0))
        out(f"[chaos {time.monotonic() - t0:6.1f}s] {name}")

    w = cfg.workload
    overrides = {
        "default.replication.factor": str(w.replication_factor),
        "min.insync.replicas": str(w.min_insync_replicas),
        **cfg.overrides,
    }
    cluster = start_cluster(run_dir, cfg.brokers, cfg.metas, **overrides)
    history = History()
    workload = Workload(cluster, history, w)
    nemesis = Nemesis(cluster, history, w.topic)
    try:
        phase(f"cluster up: {cfg.brokers} brokers, {cfg.metas} meta, {overrides}")
        workload.setup()
        workload.start()
        names = ", ".join(p.name for p in workload.producers)
        phase(f"workload started: {names} at {w.rate}/s each, topic {w.topic} x{w.partitions}")
        if not workload.wait_for_acks(cfg.warmup_acks, cfg.warmup_timeout_s):
            got = len(history.by_outcome("ok"))
            raise AssertionError(
                f"only {got} of {cfg.warmup_acks} warm-up records acknowledged within "
                f"{cfg.warmup_timeout_s}s (RF={w.replication_factor}, "
                f"min.insync.replicas={w.min_insync_replicas}): acks=all makes no progress"
            )
        phase(f"warmed up; nemesis: {cfg.schedule.rounds} rounds of {cfg.schedule.kinds}")
        nemesis.run(cfg.schedule)
        phase("nemesis done; draining producers")
        workload.stop()
        phase("producers stopped; final read")
        isr = {p: s.isr for p, s in ClusterView(cluster, w.topic).partitions(10).items()}
        final = final_read(history, cluster.bootstrap, w.topic, w.partitions, isr)
        assert workload.consumer is not None
        if not workload.consumer.catch_up(final.high, 30):
            history.note("live consumer did not reach the final high watermarks within 30s")
        workload.consumer.stop()
        phase("final read done; stopping the cluster")
        t_stop = time.monotonic()
        cluster.stop()
        if time.monotonic() - t_stop > 15:
            history.note(
                f"stopping the cluster took {time.monotonic() - t_stop:.0f}s: a node ignored "
                "SIGTERM and was killed (see the rafka.cluster warning)"
            )
        replicas = read_replica_logs(cluster.data_dir, w.topic)
        report = check(history, final, replicas, w.replication_factor)
        phase("checked")
    finally:
        nemesis.stop()
        workload.abort()  # a no-op after a normal run
        if any(alive(cluster, n) for n in cluster.nodes):
            nemesis.heal_all()  # SIGCONT anything still stopped, so that stop() can end it
        cluster.stop()
        history.dump(run_dir / "history.jsonl")
    summary = workload.summary()
    if summary:
        report.lines.append("client errors seen (retried or recorded above):\n" + summary)
    report.lines.append("timings: " + ", ".join(f"{_short(n)} @{t:.1f}s" for n, t in phases))
    report.lines.append(f"total {time.monotonic() - t0:.1f}s; run dir {run_dir}")
    (run_dir / "report.txt").write_text(report.text() + "\n")
    out(report.text())
    return report


def _short(phase: str) -> str:
    return phase.split(";")[0].split(":")[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dir", type=Path, default=None, help="run directory (default: a temp dir)")
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--metas", type=int, default=3)
    ap.add_argument("--rf", type=int, default=3)
    ap.add_argument("--min-isr", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rate", type=float, default=100.0, help="records/s per producer")
    ap.add_argument("--faults", default="kill-leader,pause-follower,kill-meta-leader")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--down", type=float, default=4.0, help="seconds a fault lasts")
    ap.add_argument("--quiet", type=float, default=4.0, help="healthy seconds between rounds")
    ap.add_argument("--java", default="4.3.0", help="4.3.0, 3.9.1 or none")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", action="append", default=[], help="extra key=value for every node")
    ap.add_argument("-v", action="store_true", help="show librdkafka's own log lines")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if not a.v:
        logging.getLogger("chaos.rdkafka").setLevel(logging.CRITICAL)
    overrides = dict(REPLICATED_OVERRIDES) if a.rf > 1 else {}
    overrides.update(kv.split("=", 1) for kv in a.o)
    cfg = ChaosConfig(
        brokers=a.brokers,
        metas=a.metas,
        workload=WorkloadConfig(
            partitions=a.partitions,
            replication_factor=a.rf,
            min_insync_replicas=a.min_isr,
            rate=a.rate,
            java=None if a.java == "none" else a.java,
        ),
        schedule=Schedule(
            kinds=tuple(a.faults.split(",")),
            rounds=a.rounds,
            down_s=a.down,
            quiet_s=a.quiet,
            full_isr=a.rf > 1,
            seed=a.seed,
        ),
        overrides=overrides,
    )
    run_dir = a.dir or Path(tempfile.mkdtemp(prefix="chaos-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    return 0 if run_chaos(run_dir, cfg).ok else 1


if __name__ == "__main__":
    sys.exit(main())
