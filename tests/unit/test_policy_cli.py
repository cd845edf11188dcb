"""``python -m policy check FILE|-`` as a black box: a subprocess fed JSON by file and by stdin,
judged by its stdout lines, stderr and exit status (0 clean, 1 violations, 2 bad input)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OPEN_SG = {
    "type": "aws:ec2/securityGroup:SecurityGroup",
    "name": "lb",
    "urn": "urn:pulumi:dev::p::aws:ec2/securityGroup:SecurityGroup::lb",
    "props": {
        "ingress": [
            {"protocol": "tcp", "fromPort": 443, "toPort": 443, "cidrBlocks": ["0.0.0.0/1", "128.0.0.0/1"]}
        ]
    },
}
BUCKET = {
    "type": "aws:s3/bucket:Bucket",
    "name": "weights",
    "urn": "urn:pulumi:dev::p::aws:s3/bucket:Bucket::weights",
    "props": {},
}


def policy_check(argument: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "policy", "check", argument],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def lines(result: subprocess.CompletedProcess[str]) -> list[list[str]]:
    return [line.split("\t") for line in result.stdout.splitlines()]


def test_violations_are_printed_as_rule_urn_message_and_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "resources.json"
    path.write_text(json.dumps([OPEN_SG]))
    result = policy_check(str(path))
    assert result.returncode == 1, result.stderr
    [[rule, urn, message]] = lines(result)
    assert (rule, urn) == ("no-world-open-ingress", OPEN_SG["urn"])
    assert "admits the whole internet" in message
    assert result.stderr == ""


def test_stdin_and_stack_rules_over_the_whole_list() -> None:
    result = policy_check("-", json.dumps([BUCKET]))
    assert result.returncode == 1
    rules = {rule for rule, _, _ in lines(result)}
    assert rules == {"s3-encrypted-tls-only", "s3-not-public"}
    assert {urn for _, urn, _ in lines(result)} == {BUCKET["urn"]}
    # The access block, named by the bucket dependency, satisfies s3-not-public: the rule saw both.
    block = {
        "type": "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
        "name": "pab",
        "urn": "urn:pab",
        "props": {
            "bucket": "weights-1",
            **dict.fromkeys(
                ("blockPublicAcls", "ignorePublicAcls", "blockPublicPolicy", "restrictPublicBuckets"), True
            ),
        },
        "propertyDependencies": {"bucket": [BUCKET["urn"]]},
    }
    with_block = policy_check("-", json.dumps([BUCKET, block]))
    assert {rule for rule, _, _ in lines(with_block)} == {"s3-encrypted-tls-only"}


def test_a_clean_list_exits_0_with_no_output() -> None:
    narrowed = {**OPEN_SG, "props": {"ingress": [{"cidrBlocks": ["10.0.0.0/16"]}]}}
    result = policy_check("-", json.dumps([narrowed]))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert policy_check("-", "[]").returncode == 0


def test_the_offline_render_of_an_example_stack_passes(tmp_path: Path) -> None:
    """What `automation render` builds, in the CLI's input shape: no violation (as the pack test)."""
    from deepseek_eks.automation.render import _prune, construct, unwrap_secrets
    from deepseek_eks.automation.stackfile import read_stack

    records = construct(read_stack("r1")).mocks.resources
    document = [
        {
            "type": r.type,
            "name": r.name,
            "urn": r.urn,
            "props": _prune(unwrap_secrets(r.inputs)),
            "propertyDependencies": {k: list(v) for k, v in r.dependencies.items()},
            "parent": r.parent,
        }
        for r in records
    ]
    path = tmp_path / "r1.json"
    path.write_text(json.dumps(document, default=str))
    result = policy_check(str(path))
    assert (result.returncode, result.stdout) == (0, ""), result.stdout + result.stderr


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ("{not json", "not JSON"),
        (json.dumps({"type": "x"}), "is a JSON dict, not a list of resources"),
        (json.dumps([{"type": "aws:s3/bucket:Bucket", "urn": "u"}]), "item 0 lacks name, props"),
        (json.dumps([OPEN_SG, {**OPEN_SG, "props": []}]), "item 1.props must be an object"),
        (json.dumps([{**OPEN_SG, "inputs": {}}]), "item 0 has unknown key(s) inputs"),
        (json.dumps([7]), "item 0 is int"),
    ],
)
def test_bad_input_exits_2_with_every_reason_on_stderr(document: str, says: str) -> None:
    result = policy_check("-", document)
    assert result.returncode == 2
    assert result.stdout == ""
    assert says in result.stderr and "is not a list of resources" in result.stderr


def test_several_problems_are_reported_together() -> None:
    result = policy_check("-", json.dumps([{"type": 1}, {"name": "x", "urn": "u", "props": {}}]))
    assert result.returncode == 2
    assert "item 0 lacks name, urn, props" in result.stderr
    assert "item 0.type must be a string" in result.stderr
    assert "item 1 lacks type" in result.stderr


def test_a_missing_file_or_no_command_exits_2(tmp_path: Path) -> None:
    missing = policy_check(str(tmp_path / "absent.json"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    bare = subprocess.run(
        [sys.executable, "-m", "policy"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert bare.returncode == 2 and "check" in bare.stderr


def test_a_shape_no_provider_sends_is_bad_input_not_a_crash() -> None:
    result = policy_check(
        "-",
        json.dumps(
            [
                {
                    "type": "aws:ec2/launchTemplate:LaunchTemplate",
                    "name": "lt",
                    "urn": "u",
                    "props": {
                        "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": "one"}
                    },
                }
            ]
        ),
    )
    assert result.returncode == 2 and "a rule could not read the inputs" in result.stderr
    assert "Traceback" not in result.stderr
