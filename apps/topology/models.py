"""Models of the topology app (see README.md for what it owns)."""
