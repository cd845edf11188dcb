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
