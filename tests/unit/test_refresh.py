"""refresh_hardware against moto's copy of EC2 DescribeInstanceTypes.

The bundled catalog was built from the same moto snapshot, so any drift reported here is one the
test put there on purpose.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from moto import mock_aws

from deepseek_eks.sizing import refresh
from deepseek_eks.sizing.catalog import InstanceCatalog, instance_catalog
from deepseek_eks.sizing.refresh import Drift, ec2_client, refresh_hardware

HARDWARE = ("gpu_model", "gpu_count", "gpu_memory_mib", "vcpu", "memory_mib", "efa_supported")


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    # Fake credentials and region come from the autouse hermetic_aws fixture (tests/conftest.py).
    with mock_aws():
        yield ec2_client("us-east-1")


def _with(catalog: InstanceCatalog, **changed: Any) -> InstanceCatalog:
    """The catalog with instances added or replaced, keyed by name."""
    return catalog.replace_instances({**catalog.instances, **changed})


def _hardware(catalog: InstanceCatalog, name: str) -> tuple[object, ...]:
    return tuple(getattr(catalog.instances[name], f) for f in HARDWARE)


def test_bundled_catalog_matches_ec2(ec2: Any) -> None:
    bundled = instance_catalog()
    answer = ec2.describe_instance_types(InstanceTypes=list(bundled.instances))
    known = {t["InstanceType"] for t in answer["InstanceTypes"]}
    assert known == set(bundled.instances)  # moto 5.2.5 knows every bundled type, p5e and p6-b200 too

    refreshed, drifts = refresh_hardware(bundled, ec2)

    assert drifts == []
    assert list(refreshed.instances) == list(bundled.instances)
    for name, old in bundled.instances.items():
        new = refreshed.instances[name]
        assert _hardware(refreshed, name) == _hardware(bundled, name), name
        assert new.on_demand_usd_per_hour == old.on_demand_usd_per_hour
        assert new.offered_in_region == old.offered_in_region
    g5 = refreshed.instances["g5.xlarge"]
    assert (g5.gpu_model, g5.gpu_count, g5.gpu_memory_mib, g5.efa_supported) == ("A10G", 1, 22888, False)
    assert refreshed.instances["p5.48xlarge"].efa_supported is True
    assert refreshed.hardware_source.startswith("EC2 DescribeInstanceTypes in us-east-1 (")
    assert refreshed.price_sources == bundled.price_sources


def test_corrupted_entry_is_corrected_and_reported(ec2: Any) -> None:
    bundled = instance_catalog()
    corrupt = _with(bundled, **{"g6e.xlarge": replace(bundled.instances["g6e.xlarge"], gpu_memory_mib=1000)})

    refreshed, drifts = refresh_hardware(corrupt, ec2)

    assert refreshed.instances["g6e.xlarge"].gpu_memory_mib == 45776
    assert drifts == [Drift("g6e.xlarge", "gpu_memory_mib", 1000, 45776)]
    assert str(drifts[0]) == "g6e.xlarge gpu_memory_mib: bundled 1000, EC2 says 45776"
    assert corrupt.instances["g6e.xlarge"].gpu_memory_mib == 1000  # input catalog left alone


def test_unknown_instance_type_stays_bundled_and_is_missing(ec2: Any) -> None:
    bundled = instance_catalog()
    fake = replace(bundled.instances["g5.xlarge"], name="g5.nonexistent", gpu_memory_mib=12345)
    catalog = _with(bundled, **{"g5.nonexistent": fake})
    with pytest.raises(Exception, match="InvalidInstanceType"):  # why refresh_hardware has to split requests
        ec2.describe_instance_types(InstanceTypes=list(catalog.instances))

    refreshed, drifts = refresh_hardware(catalog, ec2)

    assert drifts == [Drift("g5.nonexistent", "missing", True, None)]
    assert refreshed.instances["g5.nonexistent"] == fake
    assert len(refreshed.instances) == len(catalog.instances)
    assert _hardware(refreshed, "g5.xlarge") == _hardware(bundled, "g5.xlarge")
    assert "g5.nonexistent" in str(drifts[0]) and "does not know" in str(drifts[0])
    assert refreshed.hardware_source.endswith(bundled.hardware_source)


def test_only_unknown_instance_types(ec2: Any) -> None:
    bundled = instance_catalog()
    fake = replace(bundled.instances["g5.xlarge"], name="g5.nonexistent")
    catalog = bundled.replace_instances({"g5.nonexistent": fake})

    refreshed, drifts = refresh_hardware(catalog, ec2)

    assert refreshed.instances == {"g5.nonexistent": fake}
    assert drifts == [Drift("g5.nonexistent", "missing", True, None)]


def test_unknown_gpu_model_keeps_bundled_model(ec2: Any) -> None:
    # moto knows g5g.xlarge (NVIDIA T4g, ARM host); GPU_ARCHS does not know T4g.
    bundled = instance_catalog()
    pretend = replace(bundled.instances["g4dn.xlarge"], name="g5g.xlarge", family="g5g")
    catalog = bundled.replace_instances({"g5g.xlarge": pretend})

    refreshed, drifts = refresh_hardware(catalog, ec2)

    assert refreshed.instances["g5g.xlarge"].gpu_model == "T4"
    assert refreshed.instances["g5g.xlarge"].arch.name == "T4"
    assert Drift("g5g.xlarge", "gpu_model", "T4", "T4g") in drifts
    assert all(d.field != "missing" for d in drifts)


def test_type_without_gpu_keeps_bundled_gpu_fields(ec2: Any) -> None:
    bundled = instance_catalog()
    pretend = replace(bundled.instances["g5.xlarge"], name="m5.large", family="m5")
    catalog = bundled.replace_instances({"m5.large": pretend})

    refreshed, drifts = refresh_hardware(catalog, ec2)

    got = refreshed.instances["m5.large"]
    assert (got.gpu_model, got.gpu_count, got.gpu_memory_mib) == ("A10G", 1, 22888)
    assert (got.vcpu, got.memory_mib) == (2, 8192)
    # m5.large is "Up to 10 Gigabit" on a 0.75 Gbps baseline (g5.xlarge: 2.5).
    assert (got.network_baseline_gbps, got.network_peak_gbps) == (0.75, 10.0)
    assert drifts == [
        Drift("m5.large", "vcpu", 4, 2),
        Drift("m5.large", "memory_mib", 16384, 8192),
        Drift("m5.large", "network_baseline_gbps", 2.5, 0.75),
        Drift("m5.large", "gpu_info", "1x A10G", None),
    ]


def test_requests_are_chunked(ec2: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(refresh, "MAX_NAMES_PER_CALL", 10)
    sizes: list[int] = []
    ec2.meta.events.register(
        "provide-client-params.ec2.DescribeInstanceTypes",
        lambda params, **_: sizes.append(len(params["InstanceTypes"])),
    )
    bundled = instance_catalog()

    refreshed, drifts = refresh_hardware(bundled, ec2)

    assert drifts == []
    assert sizes == [10, 10, 10, 8]
    assert len(refreshed.instances) == 38


def test_default_chunk_is_ec2_limit() -> None:
    assert refresh.MAX_NAMES_PER_CALL == 100


def test_sizing_cli_refreshes_from_ec2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m sizing --refresh-hardware` sizes on EC2's facts and reports drift on stderr."""
    from deepseek_eks.sizing import catalog as catalog_module
    from deepseek_eks.sizing.cli import main

    bundled = catalog_module.instance_catalog()
    corrupted = bundled.replace_instances(
        {
            **bundled.instances,
            "g6.xlarge": replace(bundled.instances["g6.xlarge"], gpu_memory_mib=4096, cuda_memory_mib=4096),
        }
    )
    monkeypatch.setattr("deepseek_eks.sizing.cli.instance_catalog", lambda: corrupted)
    args = ["--variant", "r1-distill-qwen-7b", "--families", "g6", "--json"]
    assert main(args) == 0  # 4 GiB cannot hold 14 GiB of weights: the corrupted catalog avoids g6.xlarge
    assert '"instance_type": "g6.xlarge"' not in capsys.readouterr().out
    with mock_aws():
        assert main([*args, "--refresh-hardware"]) == 0
    out, err = capsys.readouterr()
    assert '"instance_type": "g6.xlarge"' in out
    assert "g6.xlarge gpu_memory_mib: bundled 4096, EC2 says 22888" in err
