"""Pack `affinity`: Ascend performance anti-patterns (ASC1xx-ASC5xx)."""
from .asc101_contiguous import ContiguousAfterView

RULES = [
    ContiguousAfterView,
]
