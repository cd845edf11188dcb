"""``python -m perf.loadtest``: the load tester alone (how the in-cluster Job runs it)."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
