"""Regenerate the benchmark tables of docs/autoscaling-simulation.md:

    python tools/bench_autoscaling.py            # dev and prod, four traces, seed 1

Runs deepseek_eks.perf.simulate.bench (see its docstring for the options) under the
package's one module name, as ``python -m automation`` does.
"""

from __future__ import annotations

import sys

from deepseek_eks.perf.simulate.bench import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
