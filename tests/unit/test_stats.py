"""The one percentile the simulator and the load tester share (numpy.percentile's default)."""

from __future__ import annotations

import math

import pytest

from deepseek_eks.perf.stats import percentile


def test_linear_interpolation_between_closest_ranks() -> None:
    # Ten values 1..10: the p-th percentile sits at rank p/100 * 9 (0-based), interpolated.
    values = [7.0, 3.0, 10.0, 1.0, 5.0, 2.0, 9.0, 4.0, 8.0, 6.0]  # order does not matter
    assert percentile(values, 95) == pytest.approx(1 + 0.95 * 9)  # 9.55 (nearest rank gave 10)
    assert percentile(values, 50) == pytest.approx(5.5)  # the median of an even count
    assert percentile(values, 90) == pytest.approx(9.1)
    assert percentile(values, 99.9) == pytest.approx(1 + 0.999 * 9)
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 10.0


def test_small_inputs() -> None:
    assert math.isnan(percentile([], 95))
    assert percentile([4.2], 95) == 4.2
    assert percentile([0.0, 1.0], 95) == pytest.approx(0.95)
    with pytest.raises(ValueError, match=r"outside 0\.\.100"):
        percentile([1.0], 0.95 * 1000)


def test_matches_numpy_default() -> None:
    numpy = pytest.importorskip("numpy")
    values = [0.3, 0.1, 0.7, 0.2, 0.9, 0.4, 12.0]
    for q in (1, 25, 50, 90, 95, 99, 99.9):
        assert percentile(values, q) == pytest.approx(float(numpy.percentile(values, q)))
