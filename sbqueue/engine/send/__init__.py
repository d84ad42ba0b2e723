"""Send (S2-S4): a DataFrame send, a client's small send on the driver, the numbers a
send stored."""
