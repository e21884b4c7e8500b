"""Models of the telemetry app (see README.md for what it owns)."""
