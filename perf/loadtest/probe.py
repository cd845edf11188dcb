"""What the vLLM server under test says about itself: its release (``GET /version``) and the
counters a run is checked against (``GET /metrics``). Read the same way by the local load tester,
which imports this module, and by the in-cluster Job, which runs this file's source with
``python3 -c`` (the vLLM image has Python, not this package): standard library only, no import
from the project.

vLLM 0.33.0 answers both without the API key (its middleware guards /v1 and a few other prefixes
only: reference/upstream/vllm-0.33.0/auth-prefixes.json). ``/version`` returns
``{"version": "<release>"}`` (version-route.json). ``/metrics`` is prometheus_client's text
exposition; a counter named ``vllm:generation_tokens`` is exposed as
``vllm:generation_tokens_total``, one series per engine (vllm/v1/metrics/loggers.py,
``create_metric_per_engine``), so a run's total is the sum over the series.

Usage in the Job: ``python3 -c "$PROBE" version URL`` prints the release (or nothing);
``python3 -c "$PROBE" counters URL NAME...`` prints the named counters' totals as JSON (or
nothing). The names are the caller's (promql/__init__.py holds the project's metric names).
"""

import json
import sys
import urllib.request

VERSION_PATH = "/version"
METRICS_PATH = "/metrics"


def counter_totals(exposition: str, names: tuple[str, ...]) -> dict[str, float]:
    """The sum over every series of each counter ``names`` names (their exposed names, with
    ``_total``) in a Prometheus text exposition, for those it holds. A sample line is
    ``name{labels} value [timestamp]`` or ``name value [timestamp]``; label values may hold
    spaces, so the value is read after the closing brace."""
    totals: dict[str, float] = {}
    for line in exposition.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        head = line.split(" ", 1)[0]
        if "{" in head:
            name, rest = line.split("{", 1)[0], line.rsplit("}", 1)[1]
        else:
            name, rest = head, line[len(head) :]
        if name in names:
            totals[name] = totals.get(name, 0.0) + float(rest.split()[0])
    return totals


def run_deltas(
    before: dict[str, float], after: dict[str, float], client_output_tokens: float, keys: dict[str, str]
) -> dict[str, float]:
    """What the server counted during a run: each counter's rise from ``before`` to ``after``,
    under the key ``keys`` gives its name, beside the output tokens the test itself received; {}
    where either reading is missing."""
    if not before or not after:
        return {}
    deltas = {key: after[name] - before.get(name, 0.0) for name, key in keys.items() if name in after}
    return {**deltas, "client_output_tokens": client_output_tokens}


def release(answer: object) -> str:
    """The release a /version answer names, or "" where it names none."""
    version = answer.get("version") if isinstance(answer, dict) else None
    return version if isinstance(version, str) else ""


def main(argv: list) -> None:
    mode, url, names = argv[1], argv[2].rstrip("/"), tuple(argv[3:])
    path = VERSION_PATH if mode == "version" else METRICS_PATH
    body = urllib.request.urlopen(url + path, timeout=10).read().decode()
    if mode == "version":
        print(release(json.loads(body)))
    else:
        print(json.dumps(counter_totals(body, names)))


if __name__ == "__main__":
    main(sys.argv)
