"""Settle (S6-S8): by lock, by sequence number, as completion records; one commit each."""
