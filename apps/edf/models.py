"""Models of the edf app (see README.md for what it owns)."""
