"""The simulator's request and length types and its trace error, apart from the traces that make
them (traffic.py, prefixes.py, replay.py), so each can use them without importing the others."""

from __future__ import annotations

import random
from dataclasses import dataclass

from deepseek_eks.sizing.performance import PLAN_OUTPUT_TOKENS, PLAN_PROMPT_TOKENS

# The default mean lengths are the ones the plan quotes its throughput at (sourced there).
DEFAULT_OUTPUT_TOKENS = PLAN_OUTPUT_TOKENS
DEFAULT_PROMPT_TOKENS = PLAN_PROMPT_TOKENS


class TraceError(ValueError):
    """A trace file or profile the simulator cannot use (the command line reports it as bad input)."""


@dataclass(frozen=True)
class Request:
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    # Prefix-cache identity: (key, cumulative tokens) from the first shared segment to the
    # request's own prompt; empty when the prompt shares nothing (every profile but shared-prefix).
    prefix: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class LengthProfile:
    """Mean lengths; ``exponential`` draws (memoryless, as queueing theory assumes) or ``fixed``."""

    prompt_tokens: int = DEFAULT_PROMPT_TOKENS
    output_tokens: int = DEFAULT_OUTPUT_TOKENS
    distribution: str = "exponential"

    def draw(self, rng: random.Random, max_total: int) -> tuple[int, int]:
        if self.distribution == "fixed":
            prompt, output = self.prompt_tokens, self.output_tokens
        else:
            prompt = max(1, round(rng.expovariate(1 / self.prompt_tokens)))
            output = max(1, round(rng.expovariate(1 / self.output_tokens)))
        prompt = min(prompt, max_total - 1)
        return prompt, max(1, min(output, max_total - prompt))
