"""Prefix caching on each replica and llm-d's router in front of them, for the simulator's routing
what-if (``routing.kind llm-d``). The engine (perf/simulate/engine.py) calls into this module;
every fact about another system names its source.

vLLM's automatic prefix caching (on by default in vLLM 0.33.0's V1 engine: its serve flags have
both ``--enable-prefix-caching`` and ``--disable-prefix-caching``, reference/upstream/vllm-0.33.0/
serve-flags.json, and the plan passes neither): a replica keeps the KV blocks of prompts it computed
and reuses the longest cached prefix of a new prompt, in whole blocks of 16 tokens
(sizing/performance.py BLOCK_SIZE), computing at least the prompt's last token. Modelled as an LRU
of prefix segments per replica whose room is the KV cache less what the running sequences hold now
(freed blocks stay cached until an allocation needs them). Behind round robin a request finds its
prefix only if the replica it lands on computed it.

The router: the Gateway API Inference Extension endpoint picker (EPP) at v1.5.0 (commit df9f8909,
read from the stored snapshot of kubernetes-sigs/gateway-api-inference-extension; facts in
reference/upstream/llm-d/), configured as components/serving/router.py renders it:

- scorers (components/serving/router.py SCORER_WEIGHTS: queue 2, kv-cache-utilization 2,
  prefix-cache 3), each in [0, 1]; the endpoint with the highest weighted sum wins, ties at random
  (max-score picker);
  - queue-scorer: (max waiting - waiting) / (max waiting - min waiting) over the candidates, 1 when
    all equal (pkg/epp/framework/plugins/scheduling/scorer/queuedepth/queue.go);
  - kv-cache-utilization-scorer: 1 - KV-cache usage (scorer/kvcacheutilization/kvcache_utilization.go);
  - prefix-cache-scorer: matched blocks / total blocks of the prompt (scorer/prefix/plugin.go), from
    the EPP's *approximate* index of what it routed to each endpoint, not the replica's real cache
    (requestcontrol/dataproducer/approximateprefix: blocks of 16 tokens, at most 256 blocks matched,
    an LRU of 31,250 blocks per endpoint: types.go defaultBlockSizeTokens, defaultMaxPrefixBlocks,
    defaultLRUCapacityPerServer);
- flow control (the queue ``router-queue`` scales on): a request is dispatched only while the pool's
  saturation is below the usage limit 1.0 (flowcontrol/usagelimits/usagelimitpolicy.go
  DefaultPolicy; pkg/epp/flowcontrol/controller/internal/processor.go ``saturation >= usageLimit``
  holds the queue); saturation is the mean over ready endpoints of max(waiting / 5, KV usage / 0.8),
  and 1.0 with no endpoint (saturationdetector/utilization/config.go DefaultQueueDepthThreshold,
  DefaultKVCacheUtilThreshold; detector.go ``Saturation``; the utilization detector is the default:
  pkg/epp/config/loader/defaults.go ``ensureSaturationDetector``); a request held longer than
  ``defaultRequestTTL`` gets 503 (reference/upstream/llm-d/README.md), and the queue holds at most
  ``maxRequests`` (components/serving/router.py ``endpoint_picker_config``: KEDA polling + the
  plan's rollout seconds, maxReplicas x max_num_seqs).

Simplifications (stated): the EPP reads each replica's metrics as they are now (it refreshes them
every 50 ms, far below a request's time); the router adds no latency of its own; a request past
``maxRequests`` is refused like one past its TTL (counted as timed out).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deepseek_eks.components.monitoring.autoscaling import POLLING_INTERVAL_S
from deepseek_eks.components.serving.router import SCORER_WEIGHTS
from deepseek_eks.sizing.performance import BLOCK_SIZE

# GIE v1.5.0 defaults (module docstring).
QUEUE_DEPTH_THRESHOLD = 5
KV_CACHE_UTIL_THRESHOLD = 0.8
USAGE_LIMIT = 1.0
INDEX_BLOCK_TOKENS = 16
INDEX_MAX_BLOCKS = 256
INDEX_LRU_BLOCKS = 31250


@dataclass(frozen=True)
class RouterSpec:
    """llm-d's router as the simulator runs it."""

    request_ttl_s: float
    max_requests: int
    weights: tuple[tuple[str, float], ...] = tuple(SCORER_WEIGHTS.items())

    @classmethod
    def from_plan(cls, plan: Mapping[str, Any], max_replicas: int) -> RouterSpec:
        """The flow-control bounds components/serving/router.py renders for a plan.json dict:
        defaultRequestTTL = KEDA's polling + the plan's rollout seconds, maxRequests =
        maxReplicas x max_num_seqs."""
        ttl = POLLING_INTERVAL_S + float(plan["rollout_seconds"])
        return cls(ttl, max_replicas * int(plan["max_num_seqs"]))

    def weight(self, name: str) -> float:
        return dict(self.weights).get(name, 0.0)


def _blocks(tokens: int, block: int) -> int:
    return tokens // block


class PrefixCache:
    """One replica's cached prefix segments (vLLM's automatic prefix caching), least recently
    used first."""

    __slots__ = ("segments", "tokens")

    def __init__(self) -> None:
        self.segments: OrderedDict[int, int] = OrderedDict()  # key -> the segment's own tokens
        self.tokens = 0

    def match(self, chain: Sequence[tuple[int, int]], prompt_tokens: int) -> int:
        """Tokens of the prompt served from the cache: the longest run of cached segments from the
        chain's start, in whole blocks, leaving at least the prompt's last token to compute."""
        hit = 0
        for key, cumulative in chain:
            if key not in self.segments:
                break
            hit = cumulative
        hit = min(hit, prompt_tokens - 1)
        return max(0, hit // BLOCK_SIZE * BLOCK_SIZE)

    def insert(self, chain: Sequence[tuple[int, int]], room_tokens: int) -> None:
        """The prompt's segments are now cached (most recently used); evict the least recently used
        until the cache fits ``room_tokens``."""
        previous = 0
        for key, cumulative in chain:
            if key in self.segments:
                self.segments.move_to_end(key)
            else:
                size = max(0, cumulative - previous)
                self.segments[key] = size
                self.tokens += size
            previous = cumulative
        while self.tokens > max(0, room_tokens) and self.segments:
            _, size = self.segments.popitem(last=False)
            self.tokens -= size


class EndpointIndex:
    """The EPP's approximate prefix index for one endpoint: what it routed there, an LRU of
    INDEX_LRU_BLOCKS blocks."""

    __slots__ = ("blocks", "segments")

    def __init__(self) -> None:
        self.segments: OrderedDict[int, int] = OrderedDict()
        self.blocks = 0

    def matched_blocks(self, chain: Sequence[tuple[int, int]]) -> int:
        hit = 0
        for key, cumulative in chain:
            if key not in self.segments:
                break
            hit = cumulative
        return min(_blocks(hit, INDEX_BLOCK_TOKENS), INDEX_MAX_BLOCKS)

    def record(self, chain: Sequence[tuple[int, int]]) -> None:
        previous = 0
        for key, cumulative in chain:
            if key in self.segments:
                self.segments.move_to_end(key)
            else:
                size = max(1, _blocks(cumulative, INDEX_BLOCK_TOKENS) - _blocks(previous, INDEX_BLOCK_TOKENS))
                self.segments[key] = size
                self.blocks += size
            previous = cumulative
        while self.blocks > INDEX_LRU_BLOCKS and self.segments:
            _, size = self.segments.popitem(last=False)
            self.blocks -= size


@dataclass(frozen=True)
class EndpointView:
    """What the EPP reads of one ready endpoint."""

    waiting: int
    kv_usage: float


def saturation(views: Sequence[EndpointView]) -> float:
    """The utilization detector's pool saturation: 1.0 with no endpoint."""
    if not views:
        return 1.0
    return sum(
        max(v.waiting / QUEUE_DEPTH_THRESHOLD, v.kv_usage / KV_CACHE_UTIL_THRESHOLD) for v in views
    ) / len(views)


def pick(
    spec: RouterSpec,
    views: Sequence[EndpointView],
    indexes: Sequence[EndpointIndex],
    chain: Sequence[tuple[int, int]],
    prompt_tokens: int,
    rng: random.Random,
) -> int:
    """The index of the endpoint the EPP picks: the highest weighted score, ties at random."""
    waits = [v.waiting for v in views]
    low, high = min(waits), max(waits)
    total_blocks = max(1, min(_blocks(prompt_tokens, INDEX_BLOCK_TOKENS), INDEX_MAX_BLOCKS))
    wq, wk, wp = (
        spec.weight(n) for n in ("queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer")
    )
    best: list[int] = []
    best_score = -1.0
    for i, v in enumerate(views):
        queue = 1.0 if high == low else (high - v.waiting) / (high - low)
        kv = 1.0 - v.kv_usage
        prefix = min(1.0, indexes[i].matched_blocks(chain) / total_blocks) if chain else 0.0
        score = wq * queue + wk * kv + wp * prefix
        if score > best_score + 1e-12:
            best, best_score = [i], score
        elif abs(score - best_score) <= 1e-12:
            best.append(i)
    return best[0] if len(best) == 1 else rng.choice(best)
