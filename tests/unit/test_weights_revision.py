"""Weights at a pinned revision, and a weights bucket that outlives the stack: the model catalog's
commits against their cited sources, what vLLM and the stager are given, and the bucket's lifecycle."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pytest

from deepseek_eks.automation.api import read_config
from deepseek_eks.automation.render import Rendered, render
from deepseek_eks.sizing.checkpoints import pinned_revision

ROOT = Path(__file__).resolve().parents[2]
REVISIONS = json.loads((ROOT / "sizing" / "data" / "revisions.json").read_text())["revisions"]
MODELS = json.loads((ROOT / "sizing" / "data" / "models.json").read_text())["models"]
SERVE_FLAGS = json.loads((ROOT / "reference" / "upstream" / "vllm-0.33.0" / "serve-flags.json").read_text())


@pytest.mark.parametrize("variant", sorted(REVISIONS))
def test_each_pinned_commit_is_the_one_its_cited_source_records(variant: str) -> None:
    entry = REVISIONS[variant]
    assert re.fullmatch("[0-9a-f]{40}", entry["revision"])
    assert entry["repository"] == MODELS[variant]["hf_repo"]
    # The citation is one the model catalog already relies on for the variant's config.json, and
    # it names the deepseek-ai snapshot (huggingface_hub's folder per commit) it was saved from.
    assert entry["source"] in MODELS[variant]["sources"]
    assert f"snapshot {entry['revision']}" in entry["source"]
    assert pinned_revision(variant, entry["repository"]) == entry["revision"]
    assert pinned_revision(variant, "someone/else") is None  # a repository override is not pinned


@cache
def _render(stack: str, **overrides: str) -> Rendered:
    return render(read_config(stack, overrides))


def _kind(rendered: Rendered, kind: str) -> dict[str, Any]:
    (found,) = [o for o in rendered.objects() if o["kind"] == kind]
    return found


def _args(obj: dict[str, Any]) -> list[str]:
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def _value(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def test_vllm_downloads_the_pinned_commit_with_flags_vllm_has() -> None:
    commit = REVISIONS["r1-distill-qwen-7b"]["revision"]  # dev's variant
    args = _args(_kind(_render("dev", **{"weights.source": "huggingface"}), "Deployment"))
    assert _value(args, "--revision") == commit and _value(args, "--tokenizer-revision") == commit
    assert {"--revision", "--tokenizer-revision"} <= SERVE_FLAGS.keys()


def test_staged_weights_go_to_a_prefix_of_their_commit_and_vllm_reads_that_prefix() -> None:
    commit = REVISIONS["r1-distill-qwen-7b"]["revision"]
    rendered = _render("dev", **{"weights.source": "s3"})
    job_args = _args(_kind(rendered, "Job"))
    assert _value(job_args, "--revision") == commit
    assert _value(job_args, "--prefix") == f"r1-distill-qwen-7b/{commit}/"
    server = _args(_kind(rendered, "Deployment"))
    assert (_value(server, "--model") or "").endswith(f"/r1-distill-qwen-7b/{commit}/")
    assert "--revision" not in server  # the staged copy is that commit already


def test_a_variant_without_a_recorded_commit_is_resolved_by_the_stager() -> None:
    assert "r1-distill-llama-8b" not in REVISIONS
    rendered = _render("dev", **{"weights.source": "s3", "model.variant": "r1-distill-llama-8b"})
    job_args = _args(_kind(rendered, "Job"))
    assert _value(job_args, "--revision") == "main" and _value(job_args, "--prefix") == "r1-distill-llama-8b/"
    assert "--revision" not in _args(
        _kind(
            _render("dev", **{"model.variant": "r1-distill-llama-8b", "weights.source": "huggingface"}),
            "Deployment",
        )
    )


BUCKET_PARTS = (
    aws.s3.Bucket,
    aws.s3.BucketServerSideEncryptionConfiguration,
    aws.s3.BucketPublicAccessBlock,
    aws.s3.BucketOwnershipControls,
    aws.s3.BucketPolicy,
)


def _bucket_options(monkeypatch: pytest.MonkeyPatch, **overrides: str) -> tuple[dict[str, bool], Rendered]:
    """Render dev staging to S3; which resource options each part of the bucket was created with."""
    retained: dict[str, bool] = {}
    for cls in BUCKET_PARTS:
        original = cls.__init__

        def recording(self: Any, name: str, *a: Any, __init: Any = original, **kw: Any) -> None:
            opts = kw.get("opts") or pulumi.ResourceOptions()
            retained[f"{type(self).__name__}/{name}"] = bool(opts.retain_on_delete)
            __init(self, name, *a, **kw)

        monkeypatch.setattr(cls, "__init__", recording)
    rendered = render(read_config("dev", {"weights.source": "s3", **overrides}))
    return retained, rendered


def test_the_weights_bucket_and_its_settings_survive_destroy_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    retained, rendered = _bucket_options(monkeypatch)
    assert len(retained) == len(BUCKET_PARTS) and all(retained.values()), retained
    (bucket,) = [r for r in rendered.aws if r["type"] == "aws:s3/bucket:Bucket"]
    assert not bucket["inputs"].get("forceDestroy")  # objects are never deleted with it


def test_retain_bucket_false_deletes_the_bucket_with_its_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    retained, rendered = _bucket_options(monkeypatch, **{"weights.retainBucket": "false"})
    assert not any(retained.values()), retained
    (bucket,) = [r for r in rendered.aws if r["type"] == "aws:s3/bucket:Bucket"]
    assert bucket["inputs"]["forceDestroy"] is True


def test_an_unpinned_repository_downloaded_by_each_pod_is_warned_about() -> None:
    from deepseek_eks.sizing import PlanRequest, plan

    def warnings(variant: str, source: str = "huggingface") -> list[str]:
        sized = plan(PlanRequest(variant, ("g6e",), weights_source=source))
        return [w for w in getattr(sized, "warnings", ()) if "no pinned commit" in w]

    assert "r1-distill-llama-8b" not in REVISIONS and warnings("r1-distill-llama-8b")
    assert not warnings("r1-distill-llama-8b", "s3")  # one staged commit for every replica
    assert not warnings("r1-distill-qwen-7b")  # pinned: vLLM gets --revision


def _key_options(monkeypatch: pytest.MonkeyPatch, **overrides: str) -> dict[str, bool]:
    """Render dev with cluster.createKmsKey; whether the key and its alias are kept on destroy."""
    retained: dict[str, bool] = {}
    for cls in (aws.kms.Key, aws.kms.Alias):
        original = cls.__init__

        def recording(self: Any, resource_name: str, *a: Any, __init: Any = original, **kw: Any) -> None:
            opts = kw.get("opts") or pulumi.ResourceOptions()
            retained[type(self).__name__] = bool(opts.retain_on_delete)
            __init(self, resource_name, *a, **kw)

        monkeypatch.setattr(cls, "__init__", recording)
    render(read_config("dev", {"cluster.createKmsKey": "true", **overrides}))
    return retained


def test_the_key_of_a_kept_weights_bucket_is_kept_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Destroying the key would schedule its deletion: 30 days on, the kept weights are unreadable
    (issue 37 §1). Kept with the bucket; deleted with it when the bucket goes too or holds nothing."""
    assert _key_options(monkeypatch, **{"weights.source": "s3"}) == {"Key": True, "Alias": True}
    gone = _key_options(monkeypatch, **{"weights.source": "s3", "weights.retainBucket": "false"})
    assert gone == {"Key": False, "Alias": False}
    assert _key_options(monkeypatch, **{"weights.source": "huggingface"}) == {"Key": False, "Alias": False}


def test_destroy_says_what_it_keeps_and_why() -> None:
    from deepseek_eks.automation.api import kept_lines, kept_on_destroy

    class Exported:
        def __init__(self) -> None:
            self.deployment = {
                "resources": [
                    {
                        "type": "aws:s3/bucket:Bucket",
                        "urn": "urn:pulumi:prod::p::aws:s3/bucket:Bucket::w",
                        "id": "w-1",
                        "retainOnDelete": True,
                        "custom": True,
                    },
                    {
                        "type": "aws:kms/key:Key",
                        "urn": "urn:pulumi:prod::p::aws:kms/key:Key::k",
                        "id": "k-1",
                        "retainOnDelete": True,
                        "custom": True,
                    },
                    {
                        "type": "aws:ec2/vpc:Vpc",
                        "urn": "urn:pulumi:prod::p::aws:ec2/vpc:Vpc::v",
                        "id": "vpc-1",
                    },
                ]
            }

    class Stack:
        def export_stack(self) -> Exported:
            return Exported()

    kept = kept_on_destroy(Stack())
    assert [k["type"] for k in kept] == ["aws:s3/bucket:Bucket", "aws:kms/key:Key"]
    text = "\n".join(kept_lines(kept))
    assert "w-1" in text and "k-1" in text and "stays readable" in text and "vpc-1" not in text
