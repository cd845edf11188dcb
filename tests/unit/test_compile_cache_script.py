"""components/serving/scripts/compile_cache.py against moto's S3: what the save sidecar uploads the
restore init container gets back, only inside vLLM's cache directories, and never fatally."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from deepseek_eks.components.serving.scripts import compile_cache as cc

BUCKET = "weights-bucket"
PREFIX = "compile-cache/r1-distill-qwen-7b/"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def _compiled(home: Path) -> dict[str, bytes]:
    """A cache as vLLM and Triton leave it (relative path -> content)."""
    graphs = ".cache/vllm/torch_compile_cache/1a2b3c4d5e/rank_0_0/backbone"
    files = {
        f"{graphs}/cache_key_factors.json": b"{}",
        f"{graphs}/inductor_cache/ab/kernel.py": b"k" * 100,
        ".triton/cache/XYZ/triton_.cubin": b"\x7fELF" + b"\0" * 50,
    }
    for relative, content in files.items():
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    (home / ".cache/huggingface").mkdir(parents=True)
    (home / ".cache/huggingface/token").write_bytes(b"not a cache")
    return files


def test_what_one_replica_saves_the_next_one_restores(s3, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    files = _compiled(first)
    assert cc.save(s3, BUCKET, PREFIX, first) == len(files)
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert keys == {PREFIX + relative for relative in files}  # nothing else of HOME leaves the pod
    assert cc.restore(s3, BUCKET, PREFIX, second) == len(files)
    for relative, content in files.items():
        assert (second / relative).read_bytes() == content
    # A replica that found the cache adds nothing: every file is already there at its size.
    assert cc.save(s3, BUCKET, PREFIX, second) == 0


def test_restore_writes_only_inside_the_cache_directories(s3, tmp_path: Path) -> None:
    for key in (
        PREFIX + ".cache/vllm/torch_compile_cache/../../../.bashrc",
        PREFIX + ".cache/huggingface/token",
        PREFIX + ".triton",
        PREFIX + "../other-variant/.triton/x",
    ):
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
    s3.put_object(Bucket=BUCKET, Key=PREFIX + ".triton/cache/ok", Body=b"ok")
    assert cc.restore(s3, BUCKET, PREFIX, tmp_path) == 1
    written = [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()]
    assert written == [".triton/cache/ok"]


def test_a_cache_over_the_bound_is_neither_restored_nor_saved(
    s3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _compiled(tmp_path / "a")
    monkeypatch.setattr(cc, "MAX_BYTES", 10)
    assert cc.save(s3, BUCKET, PREFIX, tmp_path / "a") == 0
    s3.put_object(Bucket=BUCKET, Key=PREFIX + ".triton/cache/big", Body=b"x" * 11)
    assert cc.restore(s3, BUCKET, PREFIX, tmp_path / "b") == 0
    assert not (tmp_path / "b").exists()


def test_restore_never_fails_the_pod(s3, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cc.main(["restore", "--bucket", "no-such-bucket", "--prefix", PREFIX, "--root", str(tmp_path)])
    assert code == 0 and "not restored" in capsys.readouterr().out


def test_save_waits_for_vllm_health_and_gives_up_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter([False, False, True])
    monkeypatch.setattr(cc, "healthy", lambda url: next(answers))
    monkeypatch.setattr(cc.time, "sleep", lambda s: None)
    assert cc.wait_for("http://127.0.0.1:8000/health", deadline_s=60)
    monkeypatch.setattr(cc, "healthy", lambda url: False)
    clock = iter(range(0, 1000, 10))
    monkeypatch.setattr(cc.time, "monotonic", lambda: float(next(clock)))
    assert not cc.wait_for("http://127.0.0.1:8000/health", deadline_s=60)
