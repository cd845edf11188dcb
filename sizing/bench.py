"""``python -m sizing.bench [--json]``: the replica model's error on its cited measurements."""

import sys

from .fit import bench_main

if __name__ == "__main__":
    sys.exit(bench_main())
