"""The twin's replacements for missing language-host pieces, checked against what the real ones do
(reference/upstream/pulumi-engine-twin.json) and, for the STS stand-in, against botocore's own STS
model and parser; no engine needed."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import botocore.session
import yaml
from botocore.parsers import create_parser

from deepseek_eks.testing.mocks import ACCOUNT_ID
from tests.engine.test_engine_yaml_component import YAML_EXAMPLE
from twin.providers import policy_analyzer, sts

FACTS = json.loads(
    (Path(__file__).resolve().parents[2] / "reference" / "upstream" / "pulumi-engine-twin.json").read_text()
)


def _post(url: str, action: str) -> tuple[int, bytes]:
    body = f"Action={action}&Version=2011-06-15".encode()
    request = urllib.request.Request(url, data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_sts_stand_in_answers_get_caller_identity_as_botocore_reads_it() -> None:
    model = botocore.session.get_session().get_service_model("sts")
    fact = FACTS["sts_get_caller_identity"]["value"]
    assert (model.metadata["protocol"], model.api_version) == (fact["protocol"], fact["api_version"])
    operation = model.operation_model("GetCallerIdentity")
    with sts.running_sts() as url:
        status, body = _post(url, "GetCallerIdentity")
        refused, _ = _post(url, "AssumeRole")
    parsed = create_parser(model.metadata["protocol"]).parse(
        {"status_code": status, "headers": {}, "body": body}, operation.output_shape
    )
    assert status == 200 and parsed["Account"] == ACCOUNT_ID, parsed
    assert parsed["Arn"].startswith(f"arn:aws:iam::{ACCOUNT_ID}:") and parsed["UserId"]
    assert refused == 400  # a call the stand-in does not model is never a silent success


def test_policy_launcher_runs_what_pulumis_python_analyzer_runs(tmp_path: Path) -> None:
    assert list(policy_analyzer.RUNNER) == FACTS["policy_packs"]["python_runner"]
    launcher = policy_analyzer.write_launcher(tmp_path / "bin", tmp_path / "pack")
    script = launcher.read_text()
    assert " ".join(policy_analyzer.RUNNER) + ' "$1" ' in script and str(tmp_path / "pack") in script
    assert launcher.stat().st_mode & 0o111


def test_yaml_example_keeps_to_what_the_cli_and_pulumi_yaml_accept() -> None:
    program = yaml.safe_load((YAML_EXAMPLE / "Pulumi.yaml").read_text())
    for key, declaration in program["config"].items():
        assert declaration["type"] in FACTS["project_config_types"]["value"], key
    for name, resource in program["resources"].items():
        providers = (resource.get("options") or {}).get("providers")
        assert providers is None or isinstance(providers, list), name  # pulumi-yaml takes a list


def test_random_stand_in_serves_a_schema_for_every_random_type_it_answers() -> None:
    from deepseek_eks.testing.mocks import COMPUTED_OUTPUTS
    from twin.providers.standin import SCHEMAS

    schema = json.loads(SCHEMAS["random"].read_text())
    answered = {token for token in COMPUTED_OUTPUTS if token.startswith("random:")}
    assert schema["name"] == "random" and set(schema["resources"]) == answered
    for token in answered:  # each with the inputs and outputs pulumi-random declares
        assert schema["resources"][token]["inputProperties"] and schema["resources"][token]["properties"]
