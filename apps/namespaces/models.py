"""Models of the namespaces app (see README.md for what it owns)."""
