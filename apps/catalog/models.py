"""Models of the catalog app (see README.md for what it owns)."""
