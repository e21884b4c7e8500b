"""Models of the jobs app (see README.md for what it owns)."""
