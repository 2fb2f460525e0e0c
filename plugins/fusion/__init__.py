"""Pack `fusion`."""

RULES: list = []
