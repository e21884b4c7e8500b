"""Models of the ranks app (see README.md for what it owns)."""
