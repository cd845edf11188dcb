"""The demand Prometheus remembers: requests running or waiting, summed over the vLLM pods, one
sample a minute (the seasonal subquery's step, promql.SEASONAL_STEP), on a run's clock. Samples
before 0 are earlier days (simulated beforehand, run.demand_history); a run adds its own as it
goes, so a run longer than a period reads itself.

What the seasonal triggers (autoscaling.seasonal) read from it is ``peak(start, end)``: the
largest sample in the window, 0 where it holds none (the query's ``or vector(0)``). The window is
left-open, as the cluster's Prometheus 3 evaluates a subquery: its first step is the first one
after ``start`` (prometheus promql/engine.go at v0.314.0, the release the pinned chart runs;
tests/promql run that release's promtool)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable


class DemandHistory:
    """Minute samples of requests running + waiting, in time order."""

    def __init__(self, samples: Iterable[tuple[float, float]] = ()) -> None:
        ordered = sorted(samples)
        self.times = [t for t, _ in ordered]
        self.values = [v for _, v in ordered]

    def record(self, t: float, value: float) -> None:
        """A sample later than every one held (a run's own, as it goes)."""
        if self.times and t < self.times[-1]:
            raise ValueError(f"demand sample at {t} s comes before the last one ({self.times[-1]} s)")
        self.times.append(t)
        self.values.append(value)

    def peak(self, start: float, end: float) -> float:
        """The largest sample in (start, end]; 0 when there is none."""
        lo, hi = bisect_right(self.times, start), bisect_right(self.times, end)
        return max(self.values[lo:hi], default=0.0)

    def copy(self) -> DemandHistory:
        """The same samples, to record a run's own on without touching these."""
        return DemandHistory(zip(self.times, self.values, strict=True))

    def shifted(self, by_s: float) -> list[tuple[float, float]]:
        """The samples moved ``by_s`` seconds (negative: into the past)."""
        return [(t + by_s, v) for t, v in zip(self.times, self.values, strict=True)]
