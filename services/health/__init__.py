"""health service: the node's Messaging API health (Unhealthy, MinimallyHealthy, Healthy), with hysteresis."""
