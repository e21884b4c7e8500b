"""Models of the saturation app (see README.md for what it owns)."""
