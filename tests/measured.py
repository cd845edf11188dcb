"""Load-test reports of a replica whose speed the test knows, for the refit's tests
(``sizing/measured.py``): the points are what the replica model says that replica delivers, written
as ``python -m automation loadtest`` writes them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from deepseek_eks.sizing.performance import Hardware, SchedulerLimits, steady_state

CONCURRENCIES = (1, 4, 16, 32)


def slower_replica(hw: Hardware) -> Hardware:
    """``hw`` as a load test might find it: HBM at 70 % of the bundled fit's efficiency and twice
    its host cost per step."""
    e = hw.efficiencies
    return hw.with_efficiencies(
        replace(e, bandwidth=e.bandwidth * 0.7, step_overhead_s=e.step_overhead_s * 2)
    )


def load_test_points(
    truth: Hardware,
    limits: SchedulerLimits,
    prompt_tokens: int,
    output_tokens: int,
    exponential_lengths: bool = False,
) -> list[dict[str, Any]]:
    """A report's ``points`` for ``truth`` at these mean lengths, drawn fixed or exponentially."""
    return [
        {
            "concurrency": c,
            "output_tokens_per_s": steady_state(
                truth, limits, c, prompt_tokens, output_tokens, exponential_lengths
            ).output_tokens_per_second,
            "prompt_tokens": prompt_tokens,
            "output_tokens": output_tokens,
            "length_distribution": "exponential" if exponential_lengths else "fixed",
        }
        for c in CONCURRENCIES
    ]
