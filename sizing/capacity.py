"""Capacity planning: how many replicas keep TTFT within the SLO at a given request rate.

    python -m sizing capacity --variant V --families f1,f2 --rate R [--peak-rate P]
        --ttft-slo S [--prompt-tokens P --output-tokens O] [--quantization Q]
        [--load-test REPORT] [--json]

Each replica is ``max_num_seqs`` slots (vLLM's running batch) fed from one queue; a slot holds a
request for its output tokens x the inter-token latency at a full batch (the replica model, a
conservative service time). With Poisson arrivals and exponential service this is M/M/c, whose wait
tail is Erlang C: P(wait > t) = C(c, a) exp(-(c mu - lambda) t). A replica count meets the SLO when
P(prefill + wait > SLO) <= 5 % (the p95). The autoscaling signal is the simulator's choice
(``python -m automation simulate --compare``); this only sizes the floor and ceiling:
``minReplicas`` for ``--rate``, ``maxReplicas`` for ``--peak-rate``. ``--load-test`` takes a load
test of one replica of the plan (``python -m automation loadtest --out``) and refits the replica
model to it (``sizing/measured.py``), so the counts rest on the measured speed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

from .catalog import GPU_FAMILIES, VARIANTS
from .measured import LoadTestReportError, Measurement, read_load_test, refit_report
from .memory import Quantization
from .performance import (
    PLAN_OUTPUT_TOKENS,
    PLAN_PROMPT_TOKENS,
    Hardware,
    SchedulerLimits,
    resident_tokens,
    steady_state,
)
from .planner import PlanError, PlanRequest, SizingPlan, plan

SLO_QUANTILE = 0.95
MAX_REPLICAS_SEARCHED = 1000


def erlang_c(servers: int, offered: float) -> float:
    """Probability an arrival waits in M/M/c with ``offered`` = lambda / mu erlangs (< servers)."""
    # Iterative Erlang B, then C: stable for hundreds of servers.
    b = 1.0
    for k in range(1, servers + 1):
        b = offered * b / (k + offered * b)
    rho = offered / servers
    return b / (1 - rho + rho * b)


def p_ttft_above(slo_s: float, prefill_s: float, rate: float, service_s: float, servers: int) -> float:
    """P(TTFT > slo) for M/M/``servers`` with mean service ``service_s`` plus a fixed prefill."""
    mu = 1.0 / service_s
    if rate >= servers * mu:
        return 1.0
    budget = slo_s - prefill_s
    if budget < 0:
        return 1.0
    return erlang_c(servers, rate / mu) * math.exp(-(servers * mu - rate) * budget)


@dataclass(frozen=True)
class Capacity:
    """The replica counts that meet the SLO, and what they rest on."""

    min_replicas: int
    max_replicas: int
    replica_requests_per_second: float
    service_s: float
    prefill_s: float
    slots_per_replica: int
    # Where the replica's speed comes from: the bundled fit, or the load test it was refitted to.
    throughput_source: str
    # At saturation (every one of slots_per_replica busy with the lengths sized for: max_num_seqs
    # unless the KV cache holds fewer), and its price per million.
    output_tokens_per_second: float = 0.0
    usd_per_million_output_tokens: float = 0.0

    def to_dict(self) -> dict:
        return {
            "min_replicas": self.min_replicas,
            "max_replicas": self.max_replicas,
            "replica_requests_per_second_at_saturation": round(self.replica_requests_per_second, 4),
            "service_seconds": round(self.service_s, 2),
            "prefill_seconds": round(self.prefill_s, 3),
            "slots_per_replica": self.slots_per_replica,
            "slo_quantile": SLO_QUANTILE,
            "throughput_source": self.throughput_source,
            "output_tokens_per_second_at_saturation": round(self.output_tokens_per_second, 1),
            "usd_per_million_output_tokens": round(self.usd_per_million_output_tokens, 3),
        }


class NoReplicaCount(ValueError):
    """No replica count meets the TTFT SLO at this load: the load is infeasible for the plan (exit
    1, as an infeasible plan), not a bad option."""


def replicas_for(rate: float, slo_s: float, prefill_s: float, service_s: float, slots: int) -> int:
    """Fewest replicas whose p95 TTFT at ``rate`` requests/s is within ``slo_s``."""
    if rate <= 0:
        return 0
    for n in range(1, MAX_REPLICAS_SEARCHED + 1):
        if p_ttft_above(slo_s, prefill_s, rate, service_s, n * slots) <= 1 - SLO_QUANTILE:
            return n
    raise NoReplicaCount(f"more than {MAX_REPLICAS_SEARCHED} replicas needed for {rate} requests/s")


def highest_rate(
    replicas: int,
    slo_s: float,
    prefill_s: float,
    service_s: float,
    slots: int,
    quantile: float = SLO_QUANTILE,
) -> float:
    """The highest request rate (requests/s) ``replicas`` serve with the ``quantile`` TTFT within
    ``slo_s``: the inverse of ``replicas_for`` (0 when even an idle fleet misses the SLO)."""
    allowed = 1 - quantile
    if replicas < 1 or p_ttft_above(slo_s, prefill_s, 0.0, service_s, replicas * slots) > allowed:
        return 0.0
    lo, hi = 0.0, replicas * slots / service_s  # above saturation P(TTFT > SLO) is 1
    for _ in range(60):  # bisection: P(TTFT > SLO) grows with the rate
        mid = (lo + hi) / 2
        if p_ttft_above(slo_s, prefill_s, mid, service_s, replicas * slots) <= allowed:
            lo = mid
        else:
            hi = mid
    return lo


def kv_slots(limits: SchedulerLimits, prompt_tokens: int, output_tokens: int) -> int:
    """Sequences one replica runs at once: ``max_num_seqs``, or fewer when the KV blocks would
    overflow, so that vLLM preempts instead of admitting more (reference/upstream/vllm-scheduler).

    With exponential lengths (the M/M/c model's service) a running sequence holds its prompt plus
    what it has generated so far. The running batch is length-biased (a request stays in it in
    proportion to its output), and the generated part of a length-biased exponential output,
    seen at a random moment, is again exponential with the mean output (its age). So each running
    sequence holds P + G tokens, P ~ Exp(prompt), G ~ Exp(output): mean prompt + output (not
    prompt + output / 2, what ``steady_state``'s fixed-length clients hold) and variance
    prompt^2 + output^2. ``n`` sequences fit when their sum stays within the cache at the SLO
    quantile (normal approximation of the sum): n m + z sqrt(n v) <= KV tokens.
    """
    mean = resident_tokens(prompt_tokens, output_tokens, exponential_lengths=True)
    var = prompt_tokens**2 + output_tokens**2
    z = NormalDist().inv_cdf(SLO_QUANTILE)
    kv = limits.kv_blocks * limits.block_size
    n = limits.max_num_seqs
    while n > 1 and n * mean + z * math.sqrt(n * var) > kv:
        n -= 1
    if mean + z * math.sqrt(var) > kv:
        raise NoReplicaCount(
            f"one request of {prompt_tokens} prompt and {output_tokens} output tokens on average "
            f"outgrows the replica's KV cache ({kv:,} tokens) for more than {1 - SLO_QUANTILE:.0%} of "
            "the time: vLLM would preempt it over and over, whatever the replica count; shorten the "
            "requests or plan a replica with a larger cache"
        )
    return n


def service_model(
    hw: Hardware, limits: SchedulerLimits, prompt_tokens: int, output_tokens: int
) -> tuple[float, float, int]:
    """(prefill s, service s, slots) of one replica at these mean lengths: what the M/M/c model
    queues. Slots are ``kv_slots``; each is held for the output at the inter-token latency of that
    many sequences decoding together, the lengths drawn exponentially as the queue model's service
    is (``steady_state``'s exponential_lengths: each running sequence holds its prompt and a whole
    mean output, as ``kv_slots`` reasons)."""
    slots = kv_slots(limits, prompt_tokens, output_tokens)
    full = steady_state(hw, limits, slots, prompt_tokens, output_tokens, exponential_lengths=True)
    alone = steady_state(hw, limits, 1, prompt_tokens, output_tokens, exponential_lengths=True)
    return alone.ttft_s, output_tokens * full.itl_s, slots


def capacity(
    sized: SizingPlan,
    rate: float,
    peak_rate: float,
    slo_s: float,
    prompt_tokens: int = PLAN_PROMPT_TOKENS,
    output_tokens: int = PLAN_OUTPUT_TOKENS,
    measured: Hardware | None = None,
) -> Capacity:
    """Recommended minReplicas (for ``rate``) and maxReplicas (for ``peak_rate``); ``measured``
    is the plan's replica refitted to a load test (``sizing/measured.py`` ``refit``), used in place
    of the bundled fit."""
    context = sized.request.max_model_len
    if prompt_tokens + output_tokens > context:
        raise LoadError(
            [
                f"--prompt-tokens {prompt_tokens} + --output-tokens {output_tokens} = "
                f"{prompt_tokens + output_tokens} exceeds the replica's context, max_model_len {context} "
                "(the stack's model.maxModelLen; --max-model-len of python -m sizing capacity): vLLM "
                "refuses longer requests; shorten them or raise it"
            ]
        )
    hw, limits = measured or sized.hardware, sized.scheduler_limits
    prefill, service, slots = service_model(hw, limits, prompt_tokens, output_tokens)
    if prefill >= slo_s:
        raise NoReplicaCount(
            f"a TTFT SLO of {slo_s:g} s is below one request's prefill alone ({prefill:.3f} s at "
            f"{prompt_tokens} prompt tokens on {sized.instance_type}): no replica count meets it; "
            "raise --ttft-slo (observability.ttftSloSeconds) or shorten the prompts"
        )
    lo = replicas_for(rate, slo_s, prefill, service, slots)
    hi = max(lo, replicas_for(peak_rate, slo_s, prefill, service, slots))
    # At saturation: every slot the queue model counts busy, so the figures agree with the counts
    # (at the planning lengths the slots are the plan's max_num_seqs, and the price the plan's).
    saturated = steady_state(hw, limits, slots, prompt_tokens, output_tokens, exponential_lengths=True)
    tokens = saturated.output_tokens_per_second
    return Capacity(
        max(1, lo),
        max(1, hi),
        saturated.requests_per_second,
        service,
        prefill,
        slots,
        hw.efficiencies.source,
        tokens,
        sized.usd_per_million(tokens),
    )


def add_load_arguments(p: argparse.ArgumentParser, ttft_slo_default: str | None = None) -> None:
    """The options of the load to size for, shared by ``python -m sizing capacity`` and
    ``python -m automation capacity``; ``ttft_slo_default`` names where --ttft-slo defaults from
    (None: it is required)."""
    p.add_argument("--rate", type=float, required=True, help="baseline requests/s (sets minReplicas)")
    p.add_argument("--peak-rate", type=float, help="busiest requests/s (sets maxReplicas; default --rate)")
    p.add_argument(
        "--ttft-slo",
        type=float,
        required=ttft_slo_default is None,
        help="p95 time to first token in seconds (observability.ttftSloSeconds"
        + (f"; default {ttft_slo_default})" if ttft_slo_default else ")"),
    )
    p.add_argument(
        "--prompt-tokens",
        type=int,
        default=PLAN_PROMPT_TOKENS,
        help=f"mean prompt tokens per request (default {PLAN_PROMPT_TOKENS}, the planning length)",
    )
    p.add_argument(
        "--output-tokens",
        type=int,
        default=PLAN_OUTPUT_TOKENS,
        help=f"mean output tokens per request (default {PLAN_OUTPUT_TOKENS}, the planning length)",
    )
    p.add_argument(
        "--load-test",
        type=Path,
        metavar="REPORT",
        help="a load test of one replica of this plan (python -m automation loadtest --out REPORT): "
        "the replica model is refitted to its points instead of the bundled fit",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")


@dataclass(frozen=True)
class Load:
    """What to size for, checked: the request rates, the SLO, the lengths and the load test."""

    rate: float
    peak_rate: float
    ttft_slo_s: float
    prompt_tokens: int
    output_tokens: int
    report: Path | None
    # The report's points (read before any plan, so a bad file is named first); None without one.
    measurements: tuple[Measurement, ...] | None

    @classmethod
    def from_args(cls, args: argparse.Namespace, ttft_slo_s: float | None = None) -> Load:
        """The load ``add_load_arguments``'s options describe (``ttft_slo_s``: --ttft-slo's
        default), with the report read; LoadError naming every option that is wrong."""
        slo = args.ttft_slo if args.ttft_slo is not None else ttft_slo_s
        peak = args.peak_rate if args.peak_rate is not None else args.rate
        problems = [
            f"--{flag} {value}: must be a positive number"
            for flag, value in (
                ("rate", args.rate),
                ("peak-rate", args.peak_rate),
                ("ttft-slo", slo),
                ("prompt-tokens", args.prompt_tokens),
                ("output-tokens", args.output_tokens),
            )
            if value is not None and not 0 < value < math.inf
        ]
        if peak < args.rate:
            problems.append(f"--peak-rate {peak}: below --rate {args.rate}")
        if problems:
            raise LoadError(problems)
        if slo is None:
            raise LoadError(["--ttft-slo: required"])
        measurements = None
        if args.load_test is not None:
            try:
                measurements = read_load_test(args.load_test, "--load-test")
            except LoadTestReportError as e:
                raise LoadError([str(e)]) from None
        return cls(args.rate, peak, slo, args.prompt_tokens, args.output_tokens, args.load_test, measurements)

    def size(self, sized: SizingPlan) -> tuple[Capacity, tuple[str, ...]]:
        """The replica counts for ``sized`` at this load, on the load test's speed where there is
        one, and the lines to print on stderr about what the refit assumed (``refit_report``;
        LoadTestReportError when the report is another model's or another instance type's)."""
        measured: Hardware | None = None
        messages: tuple[str, ...] = ()
        if self.measurements and self.report is not None:
            refitted = refit_report(
                sized.hardware,
                sized.scheduler_limits,
                self.measurements,
                "--load-test",
                self.report,
                sized.instance_type,
            )
            measured, messages = refitted.hardware, refitted.messages
        cap = capacity(
            sized,
            self.rate,
            self.peak_rate,
            self.ttft_slo_s,
            self.prompt_tokens,
            self.output_tokens,
            measured,
        )
        return cap, messages

    def summary(self, cap: Capacity, instance_type: str) -> str:
        """The answer in one line. Its figures are the JSON's (``to_dict``), whole-rounded from
        there, as the plan's text rounds its own JSON: the same replica reads the same in both."""
        rounded = cap.to_dict()
        return (
            f"autoscaling.minReplicas {cap.min_replicas} (at {self.rate:g} req/s), "
            f"autoscaling.maxReplicas {cap.max_replicas} (at {self.peak_rate:g} req/s) for p95 TTFT "
            f"<= {self.ttft_slo_s:g} s on {instance_type}: each replica {cap.slots_per_replica} slots "
            f"of {cap.service_s:.0f} s, {cap.replica_requests_per_second:.3f} req/s and "
            f"{rounded['output_tokens_per_second_at_saturation']:.0f} output tok/s at saturation "
            f"(${cap.usd_per_million_output_tokens:.2f} per million output tokens)"
        )


class LoadError(ValueError):
    """Options of the load that cannot be sized for; each problem names its option."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sizing capacity", description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", required=True, choices=VARIANTS)
    p.add_argument("--families", required=True, help=f"comma-separated: {', '.join(GPU_FAMILIES)}")
    p.add_argument("--quantization", default="auto", choices=[q.value for q in Quantization])
    p.add_argument("--max-model-len", type=int, default=32768)
    add_load_arguments(p)
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        load = Load.from_args(args)
    except LoadError as e:
        for problem in e.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    families = tuple(f.strip() for f in args.families.split(",") if f.strip())
    try:
        sized = plan(
            PlanRequest(
                args.variant, families, Quantization(args.quantization), max_model_len=args.max_model_len
            )
        )
        if not isinstance(sized, SizingPlan):
            print("error: no feasible plan: " + "; ".join(sized.reasons), file=sys.stderr)
            return 1
        cap, messages = load.size(sized)
    except NoReplicaCount as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (PlanError, LoadTestReportError, LoadError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for message in messages:
        print(message, file=sys.stderr)
    doc = {"variant": args.variant, "instance_type": sized.instance_type, **cap.to_dict()}
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(load.summary(cap, sized.instance_type))
        if load.measurements:
            print(f"replica speed from {load.report} (the replica model refitted to its points)")
    return 0
