"""stage_weights against moto's S3: what lands under the prefix, resuming, the marker, the token."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from deepseek_eks.components.serving.scripts import stage_weights as sw

BUCKET = "weights-bucket"
PREFIX = "r1-distill-qwen-7b/"
REPO = "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"
REVISION = "916b56a44061fd5cd7d6a8fb632557ed4f724f60"
SENTINEL = "hf_SENTINEL_do_not_print_0123456789"
SCRIPT = Path(sw.__file__)

FILES = {
    "config.json": b'{"model_type": "qwen2"}',
    "model-00001-of-00002.safetensors": b"\x00\x01\x02\x03\x04\x05\x06\x07",
    "tokenizer/tokenizer.json": b'{"version": "1.0"}',
}


def listing(files: dict[str, bytes]) -> dict[str, dict[str, Any]]:
    """What the Hub lists for ``files``: sizes, and the sha256 of the LFS (safetensors) ones."""
    return {
        name: {
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest() if name.endswith(".safetensors") else None,
        }
        for name, data in files.items()
    }


def hub_api(files: dict[str, bytes], sha: str = REVISION, tokens: set[str | None] | None = None) -> type:
    """huggingface_hub.HfApi as the stager calls it: model_info with files_metadata (the commit a
    revision points at, and each file's size and LFS sha256), and list_repo_files."""

    class HfApi:
        def model_info(self, repo: str, revision: str, files_metadata: bool, token: str | None) -> Any:
            assert files_metadata
            if tokens is not None:
                tokens.add(token)
            extra = {"README.md": b"readme", "original/consolidated.pth": b"pth"}
            siblings = [
                types.SimpleNamespace(
                    rfilename=name,
                    size=meta["size"],
                    lfs=types.SimpleNamespace(sha256=meta["sha256"]) if meta["sha256"] else None,
                )
                for name, meta in listing({**files, **extra}).items()
            ]
            return types.SimpleNamespace(sha=sha, siblings=siblings)

        def list_repo_files(self, repo: str, revision: str, token: str | None) -> list[str]:
            if tokens is not None:
                tokens.add(token)
            return [*files, "README.md", "original/consolidated.pth"]

    return HfApi


@pytest.fixture(autouse=True)
def hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Hub lists FILES at REVISION (tests that download replace the module with their own)."""
    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(HfApi=hub_api(FILES)))


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    # Fake credentials and region come from the autouse hermetic_aws fixture (tests/conftest.py).
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A snapshot_download-shaped folder, including the lock files huggingface_hub leaves."""
    root = tmp_path / "snapshot"
    for rel, body in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(body)
    lock = root / ".cache" / "huggingface" / "x.lock"
    lock.parent.mkdir(parents=True)
    lock.write_bytes(b"lock")
    return root


def keys(s3: Any) -> set[str]:
    return {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])}


def body(s3: Any, key: str) -> bytes:
    data: bytes = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    return data


def argv(**overrides: str) -> list[str]:
    args = {"repo": REPO, "revision": REVISION, "bucket": BUCKET, "prefix": PREFIX, "region": "us-east-1"}
    args.update(overrides)
    return [item for name, value in args.items() for item in (f"--{name}", value)]


def no_download(*_: object) -> Path:
    raise AssertionError("download must not be called")


@pytest.mark.parametrize(
    ("given", "expected"),
    [("/a/b", "a/b/"), ("a/b/", "a/b/"), ("a/b", "a/b/"), ("//a//", "a/"), ("r1-distill-qwen-7b/", PREFIX)],
)
def test_prefix_is_normalised(given: str, expected: str) -> None:
    assert sw.normalise_prefix(given) == expected


@pytest.mark.parametrize("given", ["", "/", "//"])
def test_empty_prefix_is_refused(given: str) -> None:
    with pytest.raises(ValueError):
        sw.normalise_prefix(given)


def test_upload_puts_every_file_under_the_prefix_and_skips_dot_dirs(s3: Any, tree: Path) -> None:
    uploaded = sw.upload(tree, BUCKET, "/r1-distill-qwen-7b", s3)

    expected = sorted(PREFIX + rel for rel in FILES)
    assert uploaded == expected
    assert keys(s3) == set(expected)
    assert not any(".cache" in key or key.endswith(".lock") for key in keys(s3))
    for rel, content in FILES.items():
        assert body(s3, PREFIX + rel) == content


def test_upload_uses_requested_sse_only_when_asked(s3: Any, tree: Path) -> None:
    sw.upload(tree, BUCKET, PREFIX, s3, sse="AES256")
    assert s3.head_object(Bucket=BUCKET, Key=PREFIX + "config.json")["ServerSideEncryption"] == "AES256"


def test_rerun_skips_same_size_files_and_reuploads_only_a_changed_one(s3: Any, tree: Path) -> None:
    assert len(sw.upload(tree, BUCKET, PREFIX, s3)) == len(FILES)

    assert sw.upload(tree, BUCKET, PREFIX, s3) == []

    shard = tree / "model-00001-of-00002.safetensors"
    shard.write_bytes(b"a longer shard than before")
    assert sw.upload(tree, BUCKET, PREFIX, s3) == [PREFIX + "model-00001-of-00002.safetensors"]
    assert body(s3, PREFIX + "model-00001-of-00002.safetensors") == b"a longer shard than before"


def test_main_stages_and_writes_a_marker_for_that_repo_and_revision(
    s3: Any, tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sw, "download", lambda repo, revision, workdir: tree)

    assert sw.main(argv(prefix="/r1-distill-qwen-7b")) == 0

    assert keys(s3) == {PREFIX + rel for rel in FILES} | {PREFIX + ".staged.json"}
    marker = json.loads(body(s3, PREFIX + ".staged.json"))
    assert marker == {
        "repo": REPO,
        "revision": REVISION,
        "requested": REVISION,
        "files": len(FILES),
        "bytes": sum(len(b) for b in FILES.values()),
        "listing": listing(FILES),  # what it was verified against
    }
    assert sw.is_staged(BUCKET, PREFIX, REPO, REVISION, s3)
    assert not sw.is_staged(BUCKET, PREFIX, REPO, "main", s3)
    assert not sw.is_staged(BUCKET, PREFIX, "deepseek-ai/other", REVISION, s3)
    assert not sw.is_staged(BUCKET, "elsewhere/", REPO, REVISION, s3)
    assert "3 files" in capsys.readouterr().out


def test_main_with_the_marker_present_exits_0_without_downloading(
    s3: Any, tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sw.stage(tree, BUCKET, PREFIX, REPO, REVISION, s3)
    monkeypatch.setattr(sw, "download", no_download)
    capsys.readouterr()

    assert sw.main(argv()) == 0
    assert "already staged" in capsys.readouterr().out


def test_a_prefix_holding_another_revision_is_refused_not_mixed(
    s3: Any, tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    older = "0" * 40
    sw.stage(tree, BUCKET, PREFIX, REPO, older, s3)
    monkeypatch.setattr(sw, "download", lambda repo, revision, workdir: tree)
    assert sw.main(argv()) == 1
    assert "would mix revisions" in capsys.readouterr().err
    assert sw.is_staged(BUCKET, PREFIX, REPO, older, s3) and not sw.is_staged(
        BUCKET, PREFIX, REPO, REVISION, s3
    )
    # A copy of another commit that stopped half-way (no completion marker yet) is refused too.
    s3.delete_object(Bucket=BUCKET, Key=PREFIX + ".staged.json")
    s3.put_object(
        Bucket=BUCKET, Key=PREFIX + ".staging.json", Body=json.dumps({"repo": REPO, "revision": older})
    )
    assert sw.main(argv()) == 1


def test_a_moving_ref_is_resolved_once_and_its_commit_recorded(
    s3: Any, tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    revisions: list[str] = []
    monkeypatch.setattr(sw, "download", lambda repo, revision, workdir: revisions.append(revision) or tree)
    assert sw.main(argv(revision="main")) == 0
    assert revisions == [REVISION]  # every file read at the commit, not at the moving branch
    marker = json.loads(body(s3, PREFIX + ".staged.json"))
    assert (marker["revision"], marker["requested"]) == (REVISION, "main")
    assert f"is commit {REVISION}" in capsys.readouterr().out
    assert sw.main(argv(revision="main")) == 0 and revisions == [REVISION]  # staged: nothing copied again
    # main has moved on since: the prefix keeps the commit main was resolved to when it was staged.
    monkeypatch.setitem(
        sys.modules, "huggingface_hub", types.SimpleNamespace(HfApi=hub_api(FILES, sha="1" * 40))
    )
    assert sw.main(argv(revision="main")) == 0 and revisions == [REVISION]
    assert f"as commit {REVISION}" in capsys.readouterr().out


def test_a_download_that_differs_from_the_hubs_listing_is_not_staged(
    s3: Any, tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tree / "model-00001-of-00002.safetensors").write_bytes(b"\x00\x01\x02\x03\x04\x05\x06\xff")  # same size
    monkeypatch.setattr(sw, "download", lambda repo, revision, workdir: tree)
    assert sw.main(argv()) == 1
    assert "sha256 differs" in capsys.readouterr().err
    assert not sw.is_staged(BUCKET, PREFIX, REPO, REVISION, s3)


def test_the_staged_objects_are_checked_against_the_listing(s3: Any) -> None:
    for name, data in FILES.items():
        s3.put_object(Bucket=BUCKET, Key=PREFIX + name, Body=data)
    assert sw.verify_staged(BUCKET, PREFIX, listing(FILES), s3) == sum(len(b) for b in FILES.values())
    s3.put_object(Bucket=BUCKET, Key=PREFIX + "config.json", Body=b"{}")
    s3.delete_object(Bucket=BUCKET, Key=PREFIX + "tokenizer/tokenizer.json")
    with pytest.raises(sw.StageError, match=r"missing tokenizer/tokenizer\.json; wrong size config\.json"):
        sw.verify_staged(BUCKET, PREFIX, listing(FILES), s3)


def test_download_passes_the_token_from_env_and_nothing_prints_it(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}

    def snapshot_download(**kwargs: Any) -> str:
        seen.update(kwargs)
        local = Path(kwargs["local_dir"])
        (local / ".cache" / "huggingface").mkdir(parents=True)
        (local / ".cache" / "huggingface" / "x.lock").write_text(SENTINEL)
        (local / "config.json").write_text("{}")
        return str(local)

    monkeypatch.setitem(
        sys.modules,
        "huggingface_hub",
        types.SimpleNamespace(snapshot_download=snapshot_download, HfApi=hub_api({"config.json": b"{}"})),
    )
    monkeypatch.setenv("HF_TOKEN", SENTINEL)

    assert sw.main([*argv(), "--workdir", str(tmp_path)]) == 0

    out, err = capsys.readouterr()
    assert SENTINEL not in out and SENTINEL not in err
    assert seen["token"] == SENTINEL
    assert seen["repo_id"] == REPO and seen["revision"] == REVISION
    assert seen["allow_patterns"] == sw.ALLOW_PATTERNS
    assert Path(seen["local_dir"]).parent == tmp_path
    assert keys(s3) == {PREFIX + "config.json", PREFIX + ".staged.json"}


def test_a_download_error_is_one_line_with_the_token_scrubbed(
    s3: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def snapshot_download(**kwargs: Any) -> str:
        raise RuntimeError(f"401 Unauthorized\nfor token {kwargs['token']}")

    monkeypatch.setitem(
        sys.modules,
        "huggingface_hub",
        types.SimpleNamespace(snapshot_download=snapshot_download, HfApi=hub_api(FILES)),
    )
    monkeypatch.setenv("HF_TOKEN", SENTINEL)

    assert sw.main(argv()) == 1

    out, err = capsys.readouterr()
    assert SENTINEL not in out + err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "401 Unauthorized" in err
    assert not sw.is_staged(BUCKET, PREFIX, REPO, REVISION, s3)


def test_missing_bucket_is_one_stderr_line_and_exit_1(
    s3: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sw, "download", no_download)

    assert sw.main(argv(bucket="no-such-bucket")) == 1

    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert "no-such-bucket" in err and "Traceback" not in err


def test_an_upload_error_is_one_stderr_line_and_leaves_no_marker(
    s3: Any, tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def denied(*_: object, **__: object) -> list[str]:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "PutObject")

    monkeypatch.setattr(sw, "download", lambda repo, revision, workdir: tree)
    monkeypatch.setattr(sw, "upload", denied)

    assert sw.main(argv()) == 1

    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "AccessDenied" in err and "Traceback" not in err
    assert not sw.is_staged(BUCKET, PREFIX, REPO, REVISION, s3)


def test_an_empty_download_fails_without_a_marker(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sw, "download", lambda repo, revision, workdir: tmp_path)

    assert sw.main(argv()) == 1

    assert capsys.readouterr().err.startswith("error: no files to stage")
    assert keys(s3) == set()


def test_the_script_runs_standalone_by_path_and_takes_no_token_argument() -> None:
    # The Job runs the file by path inside the vLLM image, outside this package.
    helped = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, check=False
    )
    assert helped.returncode == 0 and "--bucket" in helped.stdout
    assert "token" not in helped.stdout.lower()


class FakeHub:
    """A stand-in for huggingface_hub: a repo listing, and downloads that write small files."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.downloaded: list[str] = []
        self.tokens: set[str | None] = set()

    def module(self) -> types.SimpleNamespace:
        hub = self

        def hf_hub_download(repo: str, name: str, revision: str, local_dir: Path, token: str | None) -> str:
            hub.downloaded.append(name)
            path = Path(local_dir) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(hub.files[name])
            return str(path)

        return types.SimpleNamespace(
            HfApi=hub_api(hub.files, tokens=hub.tokens), hf_hub_download=hf_hub_download
        )


def test_stream_copies_file_by_file_and_keeps_no_copy_on_disk(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = FakeHub(FILES)
    monkeypatch.setitem(sys.modules, "huggingface_hub", hub.module())
    monkeypatch.setenv("HF_TOKEN", SENTINEL)
    work = tmp_path / "work"
    work.mkdir()
    assert sw.main([*argv(), "--workdir", str(work), "--stream"]) == 0
    assert keys(s3) == {PREFIX + name for name in FILES} | {PREFIX + ".staged.json"}  # README, .pth left out
    assert body(s3, PREFIX + "tokenizer/tokenizer.json") == FILES["tokenizer/tokenizer.json"]
    assert not [p for p in work.rglob("*") if p.is_file()]  # each file deleted after its upload
    assert hub.tokens == {SENTINEL}
    assert sw.is_staged(BUCKET, PREFIX, REPO, REVISION, s3)


def test_stream_resumes_by_skipping_objects_already_uploaded(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = FakeHub(FILES)
    monkeypatch.setitem(sys.modules, "huggingface_hub", hub.module())
    s3.put_object(Bucket=BUCKET, Key=PREFIX + "config.json", Body=FILES["config.json"])
    sw.stream(REPO, REVISION, tmp_path, BUCKET, PREFIX, s3)
    assert sorted(hub.downloaded) == ["model-00001-of-00002.safetensors", "tokenizer/tokenizer.json"]


def test_another_repository_of_the_variant_stages_beside_the_default_not_over_it(
    s3: Any, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stack that served the 8B distill from S3 and sets model.repository to a catalogued FP8
    checkpoint of it: the deployment's prefix for the new repository must not be the one the
    default's marker claims, or the stager refuses it and pulumi up fails."""
    from deepseek_eks.components.serving.weights import staged_prefix
    from deepseek_eks.sizing import PlanRequest, SizingPlan, plan
    from deepseek_eks.sizing.checkpoints import known_checkpoint

    fp8_repository = known_checkpoint("r1-distill-llama-8b", "fp8")
    assert fp8_repository
    plans = []
    for repository in (None, fp8_repository):
        request = PlanRequest("r1-distill-llama-8b", ("g6e",), weights_source="s3", repository=repository)
        planned = plan(request)
        assert isinstance(planned, SizingPlan)
        plans.append(planned)
    default, other = (staged_prefix(p) for p in plans)
    default_repository = plans[0].model.hf_repo
    # Neither is a folder of the other: each read role's <prefix>* grant covers only its own.
    assert not default.startswith(other) and not other.startswith(default)

    sw.stage(tree, BUCKET, default, default_repository, REVISION, s3)
    monkeypatch.setattr(sw, "download", lambda repo, revision, workdir: tree)
    assert sw.main(argv(repo=fp8_repository, prefix=other)) == 0
    assert sw.is_staged(BUCKET, other, fp8_repository, REVISION, s3)
    assert sw.is_staged(BUCKET, default, default_repository, REVISION, s3)
