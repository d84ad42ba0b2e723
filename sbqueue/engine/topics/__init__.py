"""Topics (S15): fan-out of a send to the subscriptions whose rules match."""
