"""Small statistics shared by the load tester and the simulator."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from fractions import Fraction


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` percentile (0..100) of ``values``; NaN for no values.

    One definition for the simulator and the load tester, so their p95s compare: linear
    interpolation between the closest ranks, position ``q / 100 * (n - 1)`` in the sorted values
    (Hyndman and Fan's type 7). That is ``numpy.percentile``'s default (``method="linear"``), which
    ``vllm bench serve`` reports its pP_ttft_ms etc. with (vLLM 0.33.0, ``vllm/benchmarks/serve.py``
    ``calculate_metrics``: ``np.percentile(ttfts or 0, p)``; summarised in
    reference/upstream/vllm-bench-serve/definitions.json), and the standard library's
    ``statistics.quantiles(..., method="inclusive")`` computes it: ``q / 100`` as a fraction
    k/n picks cut point k of n. ``q`` is read as the nearest fraction with a denominator of at most
    1000 (exact for 95, 99.9 or 12.5; 100/3 for 33.333), which bounds the cut points computed.
    q = 0 and q = 100 are the minimum and the maximum.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    if not values:
        return math.nan
    share = Fraction(q).limit_denominator(1000) / 100
    if len(values) == 1 or share == 0:
        return float(min(values))
    if share == 1:
        return float(max(values))
    return statistics.quantiles(values, n=share.denominator, method="inclusive")[share.numerator - 1]
