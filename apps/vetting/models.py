"""Models of the vetting app (see README.md for what it owns)."""
