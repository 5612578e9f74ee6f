"""Chaos tests: the verify harness (cluster/verify: history, workload, nemesis, checker) with
the Java client among the producers, under kill -9 and SIGSTOP; select them with ``-m chaos``.
The short schedule CI runs through ``rafka verify``'s code is tests/integration/test_verify.py.
"""
