"""The one published routing benchmark whose workload the simulator can rebuild: llm-d's "KV-Cache
Wins You Can See" (llm-d.ai blog, 2025-09-24; llm-d/llm-d.github.io
blog/2025-09-24_kvcache-wins-you-can-see.md, Appendix A.1-A.2). Run with
``python -m deepseek_eks.perf.simulate.published``; docs/autoscaling-simulation.md quotes the
result next to the published one.

Published setup and results (from the post):

- 8 vLLM pods of Qwen 32B, each on 2 H100s (16 in all), each holding a 307,328-token KV cache;
- 150 customers (groups), each with a 6,000-token shared context, 5 users per customer asking
  1,200-token questions; Poisson arrivals ramping from 3 to 60 QPS;
- output tokens/s, TTFT p90 and mean (s): random scheduling 4,428.7 / 92.551 / 45.281; load-aware
  (queue + KV-cache scorers) 4,428.7 / 94.865 / 46.987; approximate prefix-cache scheduling (the
  routing-history scorer this project's router runs) 6,944.4 / 31.083 / 13.316; precise (KV-event)
  scheduling 8,730.0 / 0.542 / 0.298.

What the rebuild cannot take from the post, so assumes (stated in the output too):

- the model: DeepSeek-R1-Distill-Qwen-32B (a Qwen2.5-32B architecture, the catalog's nearest), bf16,
  TP 2 on p5.48xlarge's H100s, through this project's replica model (sizing/performance.py);
- output length 1,000 tokens, every request (ignore_eos), as the sibling inference-perf report in
  the same benchmarking folder uses (llm-d/llm-d-kv-cache-manager benchmarking/37-capacity/README.md);
- the ramp: 3, 10, 20, 30, 40, 50, 60 QPS for RAMP_STAGE_S each (the post gives the range only);
- each request is one of the 750 (customer, user) prompts, drawn uniformly (seeded);
- vLLM's defaults for an 80 GB H100 (max-num-seqs 1024, max-num-batched-tokens 8192:
  sizing/performance.py ``default_max_num_seqs``, ``default_max_num_batched_tokens``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from deepseek_eks.sizing.catalog import instance_catalog, model_catalog
from deepseek_eks.sizing.memory import Quantization
from deepseek_eks.sizing.performance import default_max_num_batched_tokens, default_max_num_seqs, hardware

from ..stats import percentile
from .engine import SimConfig, Simulation
from .replica import ReplicaModel, ThroughputCurve
from .router import RouterSpec
from .stack import RANDOM
from .traffic import Request

PODS = 8
KV_CACHE_TOKENS = 307_328
GROUPS = 150
USERS_PER_GROUP = 5
PREFIX_TOKENS = 6000
QUESTION_TOKENS = 1200
OUTPUT_TOKENS = 1000
RAMP_QPS = (3, 10, 20, 30, 40, 50, 60)
RAMP_STAGE_S = 60.0
SEED = 1
PUBLISHED = {
    "random": (4428.7, 92.551, 45.281),
    "load-aware": (4428.7, 94.865, 46.987),
    "approximate prefix (llm-d)": (6944.4, 31.083, 13.316),
    "precise prefix": (8730.0, 0.542, 0.298),
}
LOAD_SCORERS = (("queue-scorer", 2.0), ("kv-cache-utilization-scorer", 2.0))
INSTANCE = "p5.48xlarge"
VARIANT = "r1-distill-qwen-32b"


def trace() -> tuple[list[Request], float]:
    """The B2B workload, ramped."""
    rng = random.Random(SEED)
    out: list[Request] = []
    start = 0.0
    for qps in RAMP_QPS:
        t = start
        while True:
            t += rng.expovariate(qps)
            if t >= start + RAMP_STAGE_S:
                break
            group, user = rng.randrange(GROUPS), rng.randrange(USERS_PER_GROUP)
            own = 1_000_000 + group * USERS_PER_GROUP + user
            chain = ((group + 1, PREFIX_TOKENS), (own, PREFIX_TOKENS + QUESTION_TOKENS))
            out.append(Request(t, PREFIX_TOKENS + QUESTION_TOKENS, OUTPUT_TOKENS, chain))
        start += RAMP_STAGE_S
    return out, start


def config(router: RouterSpec | None) -> SimConfig:
    instance = instance_catalog().instances[INSTANCE]
    hw = hardware(model_catalog()[VARIANT], Quantization.BF16, instance, 2)
    seqs = default_max_num_seqs(instance.cuda_memory_mib, instance.gpu_model)
    batched = default_max_num_batched_tokens(instance.cuda_memory_mib, instance.gpu_model)
    curve = ThroughputCurve(((1, 1.0),), "unused: the hardware model times each step")
    return SimConfig.fixed_fleet(
        ReplicaModel(curve, seqs, KV_CACHE_TOKENS, PREFIX_TOKENS * 4, hw, batched),
        PODS,
        gpus_per_replica=2,
        routing=RANDOM,
        router=router,
    )


@dataclass(frozen=True)
class Result:
    label: str
    output_tokens_per_s: float
    p90_ttft_s: float
    mean_ttft_s: float
    prefix_hit_rate: float
    completed: int
    requests: int


def run() -> list[Result]:
    """Random, load-aware and llm-d's router on the rebuilt workload, until every request finished
    (the published throughput is output tokens over the benchmark's span)."""
    requests, duration = trace()
    unbounded = 10**9
    # The post's load-aware scheduler: queue and KV-cache scorers, no prefix scorer.
    routers: list[tuple[str, RouterSpec | None]] = [
        ("random", None),
        ("load-aware", RouterSpec(unbounded, unbounded, LOAD_SCORERS)),
        ("approximate prefix (llm-d)", RouterSpec(unbounded, unbounded)),
    ]
    results = []
    for label, router in routers:
        # Run past the last arrival until the queue drains (at most 20 more minutes).
        out = Simulation(config(router), requests, duration + 1200.0, label).run()
        finished = [t for t in out.ttft]
        span = max(out.e2e[i] + out.served_arrivals[i] for i in range(len(out.e2e))) if out.e2e else duration
        results.append(
            Result(
                label,
                out.output_tokens / span,
                percentile(finished, 90),
                sum(finished) / len(finished) if finished else float("nan"),
                out.cached_prompt_tokens / out.prompt_tokens if out.prompt_tokens else 0.0,
                out.completed,
                out.requests,
            )
        )
    return results


def main() -> None:
    results = run()
    print(
        f"llm-d 'KV-Cache Wins You Can See' workload rebuilt: {PODS} replicas of {VARIANT} "
        f"(TP 2, {INSTANCE}), "
        f"{GROUPS} groups x {PREFIX_TOKENS}-token prefix, {USERS_PER_GROUP} users x {QUESTION_TOKENS}-token "
        f"questions, {OUTPUT_TOKENS} output tokens, {'/'.join(map(str, RAMP_QPS))} QPS x {RAMP_STAGE_S:g} s"
    )
    print(
        f"{'scheduler':28} {'sim out tok/s':>13} {'pub':>8} {'sim p90 s':>9} {'pub':>7} "
        f"{'sim mean s':>10} {'pub':>7} {'prefix hit':>10} {'done':>11}"
    )
    for r in results:
        pub = PUBLISHED[r.label]
        print(
            f"{r.label:28} {r.output_tokens_per_s:13.0f} {pub[0]:8.0f} {r.p90_ttft_s:9.1f} {pub[1]:7.1f} "
            f"{r.mean_ttft_s:10.1f} {pub[2]:7.1f} {r.prefix_hit_rate:10.1%} {r.completed:>5}/{r.requests}"
        )
    pub = PUBLISHED["precise prefix"]
    blank = ""
    print(
        f"{'precise prefix':28} {'(not modelled)':>13} {pub[0]:8.0f} {blank:>9} {pub[1]:7.1f} "
        f"{blank:>10} {pub[2]:7.1f}"
    )


if __name__ == "__main__":
    main()
