"""Differences from Apache Kafka that a user would accept, each with its reason. A case listed
here still runs and is reported ("allowlisted"), so the table shows every difference."""

ALLOWED: dict[str, str] = {}
