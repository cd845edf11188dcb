"""Every plan says where alerts go (issue 32 §4): Alertmanager is off by default, so the rules
fire into nothing; kube-prometheus-stack's own Alertmanager config routes to a 'null' receiver."""

from __future__ import annotations

import pytest

from deepseek_eks.automation import cli
from tests.upstream import helm_chart_defaults


def test_the_charts_alertmanager_routes_to_a_null_receiver_by_default() -> None:
    config = helm_chart_defaults("kube-prometheus-stack", "88.5.3").values["alertmanager"]["config"]
    assert config["route"]["receiver"] == "null"


@pytest.mark.parametrize(
    ("overrides", "said"),
    [((), "routed nowhere"), (("observability.alertmanager=true",), "give it your receivers")],
)
def test_plan_says_where_alerts_go(
    overrides: tuple[str, ...], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", "--stack", "dev", *(a for o in overrides for a in ("--set", o))]
    assert cli.main(argv) == 0
    assert said in capsys.readouterr().out


def test_plan_says_what_dev_scales_on_if_dcgm_exporter_cannot_start(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 31 §5: NVIDIA/dcgm-exporter#636 applies to the pin on Auto Mode's Bottlerocket nodes
    at 1.34 (reference/upstream/dcgm-exporter-636.json); the plan says what the signal then does."""
    import json

    from tests.upstream import UPSTREAM

    facts = json.loads((UPSTREAM / "dcgm-exporter-636.json").read_text())
    assert facts["pinned_release_affected"]["value"].startswith("yes")
    assert "Bottlerocket" in facts["issue"]["environment"] and "1.34" in facts["issue"]["environment"]
    on_gpu = ["--set", "autoscaling.signal=gpu-utilization", "--set", "autoscaling.seasonal=false"]
    assert cli.main(["plan", "--stack", "dev", *on_gpu]) == 0  # auto-mode
    out = capsys.readouterr().out
    assert "dcgm-exporter/issues/636" in out and "neither scales out nor in" in out
    for other in ("autoscaling.signal=concurrency", "computeMode=karpenter"):
        assert cli.main(["plan", "--stack", "dev", "--set", other]) == 0
        assert "issues/636" not in capsys.readouterr().out, other
