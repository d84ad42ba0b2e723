"""Transactions (S12): one commit on one partition."""
