"""Sessions (S10): session locks, session receives and state."""
