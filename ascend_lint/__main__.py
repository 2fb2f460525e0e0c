"""`python -m ascend_lint` runs the CLI."""
import sys

from .cli import main

sys.exit(main())
