"""How accurately does the load tester measure? A benchmark script, not a test (it takes a minute).

It starts the fake streaming server (perf/loadtest/fake_server.py) in a process of its own,
with a known TTFT and inter-token latency, runs the tester against it in closed loop at each
concurrency, and prints measured against true throughput, TTFT and TPOT. "True" is the schedule
(streams x tokens / end-to-end); "served" is what the server actually wrote over the run, which is
lower when the machine is too busy for the server itself to keep its schedule (its worst slip is
printed as "server late").

    .venv/bin/python tools/bench_loadtest.py --streams 16,32,64,128 [--json out.json]

guidellm and aiperf were measured against the same server by hand (commands in
docs/load-testing.md): they need a tokenizer, which this machine cannot download.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from deepseek_eks.perf.loadtest.fake_server import Pacing, serve
from deepseek_eks.perf.loadtest.runner import Arrivals, Lengths, LoadTestConfig, run


def _server(pacing: Pacing, pipe: Connection) -> None:
    """The fake server's process: sends its URL, serves until told to stop, sends its log."""

    async def go() -> None:
        async with serve(pacing) as (url, log):
            pipe.send(url)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, pipe.recv)  # the stop signal
            pipe.send(
                {
                    "served_tokens_per_s": log.served_tokens_per_s(),
                    "server_late_s": log.late_s(pacing),
                    "peak_in_flight": log.peak_in_flight,
                    "requests": len(log.requests),
                }
            )

    asyncio.run(go())


def _ours(url: str, streams: int, requests: int, tokens: int) -> dict[str, Any]:
    config = LoadTestConfig(
        url=url,
        model="fake",
        arrivals=Arrivals("closed", concurrency=streams),
        lengths=Lengths(prompt_tokens=32, output_tokens=tokens),
        max_requests=requests,
        timeout_s=600,
    )
    report = asyncio.run(run(config))
    return {
        "output_tokens_per_s": report["output_tokens_per_s"],
        "ttft_mean_s": report["ttft_s"]["mean"],
        "tpot_mean_s": report["tpot_s"]["mean"] if "tpot_s" in report else None,
        "failed": report["requests"]["failed"],
    }


def measure(streams: int, pacing: Pacing, tokens: int, rounds: int) -> dict[str, Any]:
    """One closed-loop run at ``streams`` against a fresh server; measured and true figures."""
    parent, child = mp.Pipe()
    server = mp.get_context("spawn").Process(target=_server, args=(pacing, child), daemon=True)
    server.start()
    url = parent.recv()
    requests = streams * rounds
    started = time.monotonic()
    measured = _ours(url, streams, requests, tokens)
    wall = time.monotonic() - started
    parent.send("stop")
    served = parent.recv()
    server.join(10)
    true_rate = pacing.closed_loop_tokens_per_s(streams, tokens)
    rate = measured.get("output_tokens_per_s") or 0.0
    return {
        "streams": streams,
        "true_tokens_per_s": round(true_rate, 1),
        "measured_tokens_per_s": round(rate, 1),
        "measured_over_true": round(rate / true_rate, 3),
        "measured_over_served": round(rate / served["served_tokens_per_s"], 3)
        if served["served_tokens_per_s"]
        else None,
        "true_ttft_s": pacing.ttft_s,
        "true_tpot_s": pacing.itl_s,
        "wall_s": round(wall, 1),
        **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in served.items()},
        **{f"measured_{k}": v for k, v in measured.items() if k != "output_tokens_per_s"},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--streams", default="16,32,64,128")
    p.add_argument("--tokens", type=int, default=256, help="output tokens per request")
    p.add_argument("--rounds", type=int, default=2, help="requests per stream")
    p.add_argument("--ttft", type=float, default=0.2)
    p.add_argument("--itl", type=float, default=0.02)
    p.add_argument("--json", type=Path, help="write the rows as JSON")
    args = p.parse_args()
    pacing = Pacing(args.ttft, args.itl)
    rows = []
    for streams in (int(s) for s in args.streams.split(",")):
        row = measure(streams, pacing, args.tokens, args.rounds)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
