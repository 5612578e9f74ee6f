"""``rafka verify``: a Jepsen-style run against a fresh local cluster - a workload recorded
while a nemesis injects faults, then the checker's verdict (see cluster/verify/)."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Annotated

import typer

_PROCESS = "kill-leader,pause-follower,kill-meta-leader"


def verify(
    nemesis: Annotated[
        str,
        typer.Option(
            help="Faults, comma-separated, cycled through one per round: kill-leader, "
            "kill-broker, pause-follower, kill-meta-leader (process faults, local ports); "
            "isolate-node, split-majority, isolate-meta-leader, zombie-leader, one-way, "
            "packet-loss (network: one namespace per node, needs root); disk-full, disk-error; "
            "clock-skew (libfaketime)."
        ),
    ] = _PROCESS,
    workload: Annotated[
        str,
        typer.Option(
            help="The workload: produce (acks=all producers and a live reader) or txn "
            "(transactional producers over several partitions, some aborted on purpose; "
            "read_committed and read_uncommitted readers) or ctp (txn plus consume-transform-"
            "produce: transformers that consume, write and commit the consumed offsets in one "
            "transaction) or group (an idempotent producer and a consumer group whose members, "
            "each a process, join, leave and are killed with kill -9)."
        ),
    ] = "produce",
    group_protocol: Annotated[
        str,
        typer.Option(help="The group workload's group.protocol: classic, or consumer (KIP-848)."),
    ] = "classic",
    time_s: Annotated[
        float, typer.Option("--time", help="Seconds of faults (no round starts after).")
    ] = 60.0,
    rounds: Annotated[int, typer.Option(help="At most this many rounds (0: --time only).")] = 0,
    seed: Annotated[int, typer.Option(help="The nemesis's random seed.")] = 0,
    each: Annotated[
        bool,
        typer.Option(
            "--each", help="One run per fault kind, each for --time; prints a table at the end."
        ),
    ] = False,
    brokers: Annotated[int, typer.Option(min=1)] = 3,
    meta: Annotated[int, typer.Option(help="Meta (Raft) nodes: 1 or 3.")] = 3,
    rf: Annotated[int, typer.Option(help="The topic's replication factor.")] = 3,
    min_isr: Annotated[int, typer.Option(help="The topic's min.insync.replicas.")] = 2,
    partitions: Annotated[int, typer.Option(min=1)] = 6,
    rate: Annotated[float, typer.Option(help="Records per second per producer.")] = 100.0,
    down: Annotated[
        float,
        typer.Option(
            help="Seconds each fault lasts; 0: the fault's own (4 for kill and pause, 10 for "
            "network and disk faults, 15 for a clock skew)."
        ),
    ] = 0.0,
    quiet: Annotated[float, typer.Option(help="Healthy seconds between rounds.")] = 4.0,
    producers: Annotated[
        str, typer.Option(help="idempotent and/or plain (enable.idempotence=false), comma-sep.")
    ] = "idempotent",
    data_dir: Annotated[
        Path | None, typer.Option(help="Run directory (default: a new temporary one).")
    ] = None,
    override: Annotated[
        list[str] | None, typer.Option("--override", "-o", help="key=value for every node.")
    ] = None,
) -> None:
    """Run a workload against a fresh local cluster while faults strike, then check the history:
    operations, acknowledged, lost, duplicated, each anomaly with an example, availability
    during faults. Exits 1 when any check fails."""
    from confluent_kafka import KafkaException

    from cluster.cli import parse_overrides
    from cluster.verify.resources import VerifyError
    from cluster.verify.run import build_config, run_verify, table

    if meta not in (1, 3):
        raise typer.BadParameter("--meta must be 1 or 3")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("verify.rdkafka").setLevel(logging.CRITICAL)  # disconnects while faulted
    kinds = tuple(k.strip() for k in nemesis.split(",") if k.strip())
    root = data_dir or Path(tempfile.mkdtemp(prefix="rafka-verify-"))
    runs = [(k, (k,)) for k in kinds] if each else [(",".join(kinds), kinds)]
    rows = []
    for name, run_kinds in runs:
        try:
            cfg = build_config(
                run_kinds,
                rounds=rounds,
                duration_s=time_s,
                seed=seed,
                brokers=brokers,
                metas=meta,
                replication_factor=rf,
                min_insync_replicas=min_isr,
                partitions=partitions,
                rate=rate,
                down_s=down,
                quiet_s=quiet,
                producers=tuple(p.strip() for p in producers.split(",") if p.strip()),
                overrides=parse_overrides(override),
                workload=workload,
                group_protocol=group_protocol,
            )
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
        run_dir = root / name.replace(",", "+") if each else root
        try:
            rows.append((name, run_verify(run_dir, cfg, out=typer.echo)))
        except (VerifyError, RuntimeError, TimeoutError, KafkaException) as e:
            # KafkaException: the cluster refused the workload's setup (its topic, say)
            typer.echo(f"rafka verify: {e} (run directory {run_dir})", err=True)
            raise typer.Exit(2) from None
    if each:
        typer.echo(table(rows))
    failed = [name for name, r in rows if not r.ok]
    if failed:
        typer.echo(f"rafka verify: anomalies under {', '.join(failed)}; see {root}", err=True)
        raise typer.Exit(1)
