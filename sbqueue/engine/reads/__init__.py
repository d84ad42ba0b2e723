"""Reads (S9, S16.2): the view, peek, counts and time travel; never a commit."""
