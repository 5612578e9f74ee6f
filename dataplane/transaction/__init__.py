"""Transactions (issue 12)."""
