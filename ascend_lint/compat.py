"""What differs between the Python versions the package supports."""
from __future__ import annotations

import sys
from dataclasses import dataclass

# A dataclass whose instances have no __dict__ (on Python 3.10+): for the records a run keeps one of per
# file (results, lint outcomes, discovery targets), ~100 bytes less each.
slotted_dataclass = dataclass(slots=True) if sys.version_info >= (3, 10) else dataclass
