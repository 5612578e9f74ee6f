"""Jepsen-style verification of a Rafka cluster (``rafka verify``, README "Verifying a cluster").

- history.py           every send and its outcome, every read, every fault, with times
- workload/produce.py  acks=all producers (confluent-kafka; the Java client when given its
                       driver) and a reader of every partition, writing into one History
- nemesis/             the faults: process.py (kill -9, SIGSTOP), network.py (nftables cuts and
                       loss between namespaces), disk.py (full, EIO), clock.py (libfaketime);
                       base.py what they share (the cluster as clients and the meta service see
                       it, "whole again")
- schedule.py          the faults in rounds, with a seed, each healed before the next
- cluster.py           a LocalCluster whose nodes each run in a network namespace of their own
                       (netns.py), with loop-mounted log dirs (loopfs.py); resources.py names,
                       records and removes what a run creates outside its directory
- checker/produce.py   the final read, the replicas' files, and the verdict with its figures
- run.py               one run end to end, and the table of several
"""
