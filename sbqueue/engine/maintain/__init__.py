"""Maintenance: expiry, lock release, compaction of the ledger."""
