"""Chaos tests: a recorded produce/consume history under injected faults, checked afterwards
against Kafka's promise for acks=all (Jepsen-style; see test_chaos.py for the entry points).

- history.py   every produce attempt and outcome, every consumed record, every fault, with times
- workload.py  producers (confluent-kafka idempotent / non-idempotent, Java with its defaults)
               and a group-less consumer, all writing into one History
- nemesis.py   kill -9 of a partition leader / a random broker / the meta Raft leader, SIGSTOP of a
               follower past replica.lag.time.max.ms, restarts, in rounds
- checker.py   the final read, each replica's on-disk log, and the verdict with its figures
"""
