"""The component's closed sets are typed (components/arg_types.py): each ``Literal`` is the set the
settings model defines, every closed set of the schema has one, and mypy refuses a value outside
each (``compute_mode="automode"``) where it accepts every value inside it and the settings' enum
members."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import mypy.api
import pytest

from deepseek_eks.components import arg_types
from deepseek_eks.components.service import camel
from tests.package_tree import package_tree

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "provider" / "schema.json").read_text())
SERVICE = SCHEMA["resources"]["deepseek-eks:index:DeepSeekService"]
# The user's program is checked; deepseek_eks and pulumi are read for their types (their own
# findings are not this test's), the generated provider SDKs skipped to keep it to seconds.
MYPY_INI = """[mypy]
python_version = 3.11
ignore_missing_imports = True
[mypy-deepseek_eks.*]
follow_imports = silent
[mypy-pulumi_aws.*,pulumi_kubernetes.*,pulumi_eks.*,pulumi_random.*]
follow_imports = skip
"""


@pytest.mark.parametrize("where", sorted(arg_types.CLOSED_SETS), ids=lambda w: ".".join(filter(None, w)))
def test_each_literal_is_the_set_the_settings_define(where: tuple[str, str]) -> None:
    literal, defined = arg_types.CLOSED_SETS[where]
    assert typing.get_origin(literal) is typing.Literal
    assert typing.get_args(literal) == defined


def _schema_enums() -> set[tuple[str, str]]:
    """(group, field) of every input the schema types with an enum (``""``: top level)."""
    found = set()

    def walk(group: str, properties: dict[str, typing.Any]) -> None:
        for name, prop in properties.items():
            ref = (prop.get("items") or prop).get("$ref", "")
            target = SCHEMA["types"].get(ref.removeprefix("#/types/"), {})
            if "enum" in target:
                found.add((group, name))

    walk("", SERVICE["inputProperties"])
    for group, prop in SERVICE["inputProperties"].items():
        target = SCHEMA["types"].get(prop.get("$ref", "").removeprefix("#/types/"), {})
        walk(group, target.get("properties", {}))
    return found


def test_every_closed_set_of_the_schema_has_its_literal() -> None:
    typed = {(group, camel(name)) for group, name in arg_types.CLOSED_SETS}
    assert _schema_enums() <= typed
    # and the Python side's only extra is the Kubernetes minor, a string in the schema (its values
    # would make enum member names that start with a digit)
    assert typed - _schema_enums() == {("", "kubernetesVersion")}


def _value(where: tuple[str, str], value: str) -> str:
    group, name = where
    item = f"[{value!r}]" if name in ("instance_families", "capacity_types") else repr(value)
    return f"{{{name!r}: {item}}}" if not group else f"{{{group!r}: {{{name!r}: {item}}}}}"


def test_mypy_refuses_a_value_outside_each_closed_set(tmp_path: Path) -> None:
    lines = [
        "from deepseek_eks import DeepSeekServiceArgs",
        "from deepseek_eks.settings.model import ComputeMode, ScalingSignal, WeightsSource",
        "",
        'members: DeepSeekServiceArgs = {"compute_mode": ComputeMode.KARPENTER, '
        '"autoscaling": {"signal": ScalingSignal.CONCURRENCY}, "weights": {"source": WeightsSource.S3}}',
        'typo = DeepSeekServiceArgs(compute_mode="automode")',
    ]
    wrong = {len(lines)}
    for where, (_, values) in sorted(arg_types.CLOSED_SETS.items()):
        for value in values:
            lines.append(f"ok_{len(lines)}: DeepSeekServiceArgs = {_value(where, value)}")
        lines.append(f"bad_{len(lines)}: DeepSeekServiceArgs = {_value(where, 'not-' + values[0])}")
        wrong.add(len(lines))
    # The package as the wheel lays it out: mypy cannot follow the checkout's editable install
    # (an import hook) to the folders setup.py maps into deepseek_eks.
    site = package_tree(tmp_path / "site")
    (tmp_path / "mypy.ini").write_text(MYPY_INI.replace("[mypy]\n", f"[mypy]\nmypy_path = {site}\n", 1))
    (tmp_path / "program.py").write_text("\n".join(lines) + "\n")
    report, errors, _ = mypy.api.run(
        [
            "--config-file",
            str(tmp_path / "mypy.ini"),
            "--cache-dir",
            str(tmp_path / "cache"),
            str(tmp_path / "program.py"),
        ]
    )
    assert not errors, errors
    refused = {int(line.split(":")[1]) for line in report.splitlines() if ": error:" in line}
    assert refused == wrong, report
    assert '"automode"' in report.replace("'", '"') and "auto-mode" in report, report
