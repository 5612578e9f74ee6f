"""Jepsen-style verification of a Rafka cluster (``rafka verify``, README "Verifying a cluster").

- history.py           every send and its outcome, every read, every fault, with times
- workload/produce.py  acks=all producers (confluent-kafka; the Java client when given its
                       driver) and a reader of every partition, writing into one History
- workload/txn.py      transactional producers over several partitions (some transactions
                       aborted on purpose), a read_committed and a read_uncommitted reader
- workload/ctp.py      the txn workload plus consume-transform-produce transformers (consume,
                       write, commit the consumed offsets, in one transaction)
- workload/group.py    an idempotent producer and a consumer group (classic or KIP-848) whose
                       members join, leave and are killed (kill -9) while it consumes; each
                       member a process of its own (workload/member.py)
- nemesis/             the faults: process.py (kill -9, SIGSTOP), network.py (nftables cuts and
                       loss between namespaces), disk.py (full, EIO), clock.py (libfaketime);
                       base.py what they share (the cluster as clients and the meta service see
                       it, "whole again")
- schedule.py          the faults in rounds, with a seed, each healed before the next
- cluster.py           a LocalCluster whose nodes each run in a network namespace of their own
                       (netns.py), with loop-mounted log dirs (loopfs.py); resources.py names,
                       records and removes what a run creates outside its directory
- checker/produce.py   the final read, the replicas' files, and the verdict with its figures
- checker/txn.py       the transactions' verdict: aborted and dirty reads, committed
                       transactions lost, duplicated or visible in part
- checker/ctp.py       the pipeline's verdict: offsets committed without their writes, writes
                       without their offsets, records transformed twice, transforms of records
                       never committed
- checker/cycles.py    G0 / G1c: ww and wr dependencies between committed transactions, Tarjan
- checker/group.py     the group's verdict: records never consumed, commits ahead of
                       processing, two owners of a partition at once
- run.py               one run end to end, and the table of several
"""
