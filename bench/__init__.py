"""Benchmarks: each prints its figures and never fails on a timing (README, Benchmarks)."""
