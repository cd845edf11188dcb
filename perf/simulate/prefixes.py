"""The ``shared-prefix`` trace: a SYNTHETIC multi-turn reasoning-chat workload whose prompts share
prefixes (system prompts and earlier turns), fitted to one published prefix-reuse figure. No
production trace of this service exists; nothing here was measured on it.

Structure (each request is one turn of a conversation):

- a conversation opens with one of ``SYSTEM_PROMPTS`` system prompts (uniform; an assumption),
  each ``SYSTEM_SHARE`` of the mean prompt long (an assumption);
- each request continues an open conversation with probability ``q`` (otherwise it opens a new
  one), so a conversation has 1 / (1 - q) turns on average; a follow-up's prompt is the previous
  turn's prompt, the previous answer's visible part and a new user message;
- DeepSeek-R1's reasoning is not sent back in the next turn, only the answer (DeepSeek API docs,
  "Reasoning Model (deepseek-reasoner)", multi-round conversation: the previous turns'
  ``reasoning_content`` is not concatenated into the context); the answer is ``ANSWER_SHARE`` of
  the output tokens (an assumption: R1 writes its chain of thought first, then a shorter answer).

The fit: the share of prompt tokens that an earlier request of the trace already computed as a
prefix (with an unbounded cache, i.e. what perfect routing could reuse) is set to
``PUBLISHED_REUSE_SHARE``: 36.64 %, the "cache efficiency" NVIDIA's Dynamo benchmark reports for
the Mooncake conversation trace (12,031 requests over about 59 minutes, 12,035 mean input and 343
mean output tokens: docs.nvidia.com/dynamo/dev/benchmarks/qwen3-32b-kv-routing.md, read
2026-12-04; the trace is kvcache-ai/Mooncake's FAST'25 release, ``conversation_trace``). Only the
share is taken from it: the mean prompt and output lengths stay the stack's own (``--prompt-tokens``,
``--output-tokens``), so the trace keeps the stack's traffic shape. In expectation (a request is the
k-th turn with probability (1 - q) q^(k-1), and a follow-up's reusable prefix is the previous
turn's whole prompt, which has the same mean as any prompt):

    reuse share = q + (1 - q) * SYSTEM_SHARE

so ``q = (share - SYSTEM_SHARE) / (1 - SYSTEM_SHARE)``. ``reuse_share`` measures the realized share
of a generated trace (tests check it lands near the published figure).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, replace

from .trace_types import LengthProfile, Request

# Published: NVIDIA Dynamo, "Qwen3-32B KV Routing A/B" benchmark page (see the module docstring).
PUBLISHED_REUSE_SHARE = 0.3664
PUBLISHED_REUSE_SOURCE = (
    "36.64 % cache efficiency of the Mooncake conversation trace "
    "(docs.nvidia.com/dynamo/dev/benchmarks/qwen3-32b-kv-routing.md, read 2026-12-04)"
)
SYSTEM_PROMPTS = 8  # assumption: a handful of applications, each with its own system prompt
SYSTEM_SHARE = 0.2  # assumption: a system prompt is a fifth of the mean prompt
ANSWER_SHARE = 0.25  # assumption: the visible answer is a quarter of R1's output tokens
# A follow-up comes after the user read the answer: at least this long after the previous turn
# arrived, and a conversation idle for longer than CONVERSATION_IDLE_S is over (assumptions).
FOLLOW_UP_AFTER_S = 60.0
CONVERSATION_IDLE_S = 1800.0
PRUNE_EVERY = 200  # requests between sweeps of idle conversations out of the pool


def continuation_probability(
    share: float = PUBLISHED_REUSE_SHARE, system_share: float = SYSTEM_SHARE
) -> float:
    """``q`` that makes the expected reuse share ``share`` (the formula in the module docstring)."""
    return max(0.0, (share - system_share) / (1 - system_share))


@dataclass
class _Conversation:
    key: int
    system: int
    turns: int
    last_arrival: float
    last_prompt: int
    last_answer: int
    chain: tuple[tuple[int, int], ...]


def shared_prefix_trace(
    requests: list[Request], seed: int, lengths: LengthProfile, max_model_len: int
) -> list[Request]:
    """``requests`` (arrival times and output lengths kept) rebuilt as turns of conversations that
    share prefixes; each request's ``prefix`` is its chain of (key, cumulative tokens), ending with
    its own prompt (the key the next turn reuses)."""
    rng = random.Random(seed * 104729 + 3)
    q = continuation_probability()
    mean = lengths.prompt_tokens
    system_tokens = max(1, round(SYSTEM_SHARE * mean))
    answer_mean = ANSWER_SHARE * lengths.output_tokens
    # E[prompt] = system + u / (1 - q) + answer * q / (1 - q) = mean, solved for the message mean u.
    message_mean = max(1.0, (1 - q) * (mean - system_tokens) - answer_mean * q)
    keys = itertools.count(SYSTEM_PROMPTS + 1)  # 1..SYSTEM_PROMPTS are the system prompts' keys
    pool: list[_Conversation] = []  # open conversations (expired ones removed when drawn)
    out: list[Request] = []
    for i, r in enumerate(requests):
        now = r.arrival_s
        if i % PRUNE_EVERY == 0:
            pool = [c for c in pool if now - c.last_arrival <= CONVERSATION_IDLE_S]
        message = max(1, round(rng.expovariate(1 / message_mean)))
        conversation = _draw(pool, rng, now) if rng.random() < q else None
        if conversation is not None:
            prompt = conversation.last_prompt + conversation.last_answer + message
            if prompt + r.output_tokens > max_model_len:
                pool.remove(conversation)
                conversation = None
        if conversation is None:
            system = rng.randrange(SYSTEM_PROMPTS) + 1
            prompt = min(system_tokens + message, max_model_len - 1)
            conversation = _Conversation(next(keys), system, 0, now, 0, 0, ((system, system_tokens),))
            pool.append(conversation)
        output = max(1, min(r.output_tokens, max_model_len - prompt))
        own = (next(keys), prompt)
        chain = (*conversation.chain, own)
        conversation.turns += 1
        conversation.last_arrival = now
        conversation.last_prompt = prompt
        conversation.last_answer = max(1, round(ANSWER_SHARE * output))
        conversation.chain = chain
        out.append(replace(r, prompt_tokens=prompt, output_tokens=output, prefix=chain))
    return out


def _draw(pool: list[_Conversation], rng: random.Random, now: float, tries: int = 8) -> _Conversation | None:
    """A random open conversation whose last turn came at least FOLLOW_UP_AFTER_S ago, or None
    (a few draws; conversations idle past CONVERSATION_IDLE_S are dropped as they are drawn)."""
    for _ in range(tries):
        if not pool:
            return None
        i = rng.randrange(len(pool))
        c = pool[i]
        if now - c.last_arrival > CONVERSATION_IDLE_S:
            pool[i] = pool[-1]
            pool.pop()
            continue
        if now - c.last_arrival >= FOLLOW_UP_AFTER_S:
            return c
    return None


def reuse_share(requests: list[Request]) -> float:
    """Share of the trace's prompt tokens an earlier request already computed as a prefix, with an
    unbounded cache (what routing could at best reuse): the published figure's definition."""
    seen: set[int] = set()
    reused = total = 0
    for r in requests:
        total += r.prompt_tokens
        hit = 0
        for key, tokens in r.prefix:
            if key not in seen:
                break
            hit = tokens
        reused += min(hit, r.prompt_tokens)
        seen.update(key for key, _ in r.prefix)
    return reused / total if total else 0.0
