"""Pack `migration`."""

RULES: list = []
