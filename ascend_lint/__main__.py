"""`python -m ascend_lint` runs the CLI."""
from .cli import entry

entry()
