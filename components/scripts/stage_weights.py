"""Stage a Hugging Face model repository into an S3 prefix for vLLM's ``runai_streamer`` loader.

A Kubernetes Job runs this inside the pinned vLLM image (Python 3, ``huggingface_hub``, ``boto3``):
it downloads one repo revision to local disk, uploads the files under ``s3://BUCKET/PREFIX``, and
writes a completion marker ``PREFIX.staged.json`` last. vLLM then streams the weights straight from
S3 with ``--load-format runai_streamer``, so no pod ever pulls from the Hub.

Why it is shaped this way:

* Idempotent: when the marker exists and names the same repo and revision, the Job exits 0 before
  downloading anything, so re-running (or re-applying) the Job is free.
* Resumable: the marker is written only after every upload succeeded, and a file whose object already
  exists with the same size is skipped, so a re-run after a partial failure uploads only what is
  missing.
* Token only from the environment: the Hugging Face token is read from ``HF_TOKEN`` (a Secret mounted
  as an env var), never taken as an argument (which would show in ``ps`` and the pod spec) and never
  printed; error messages are scrubbed of it too.

Encryption is left to the bucket's default encryption unless ``sse`` is given. The Job's role has
``s3:ListBucket`` for listings under the prefix only (an ``s3:prefix`` condition) and
``s3:GetObject``/``s3:PutObject`` under the prefix, so whether the bucket and an object exist is
learnt by listing under the prefix: HeadBucket and HeadObject on a missing key would read 403.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeAlias

import boto3
from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import BotoCoreError, ClientError

# boto3 clients are generated at runtime; the image carries no mypy_boto3 stubs.
S3Client: TypeAlias = Any

# Enough to serve the model (config, tokenizer, safetensors shards, custom modeling code) and
# nothing else: no .bin/.pth duplicates of the same weights, no GGUF, no images.
ALLOW_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.py", "tokenizer*"]
MARKER_NAME = ".staged.json"
GIB = 1024**3


class StageError(Exception):
    """A condition the Job reports in one line and exits 1 on (not a bug, so no traceback)."""


def normalise_prefix(prefix: str) -> str:
    """``"/a/b"`` -> ``"a/b/"``: S3 keys have no leading slash, and the trailing one keeps
    ``a/b`` from also matching ``a/bc`` when the streamer lists the prefix."""
    stripped = prefix.strip("/")
    if not stripped:
        # Staging into the bucket root would mix models and put the marker at the root.
        raise ValueError("prefix must name a folder, e.g. 'r1-distill-qwen-7b/'")
    return stripped + "/"


def marker_key(prefix: str) -> str:
    return f"{normalise_prefix(prefix)}{MARKER_NAME}"


def download(repo: str, revision: str, workdir: Path) -> Path:
    """Download the servable files of ``repo`` at ``revision`` into a folder under ``workdir``."""
    # Imported here so the module (and its tests) need only boto3; the vLLM image has it.
    from huggingface_hub import snapshot_download

    local_dir = Path(workdir) / repo.replace("/", "--")
    snapshot_download(
        repo_id=repo,
        revision=revision,
        local_dir=local_dir,
        allow_patterns=ALLOW_PATTERNS,
        # `or None`: an empty HF_TOKEN means anonymous, not "send an empty bearer token".
        token=os.environ.get("HF_TOKEN") or None,
    )
    return local_dir


def local_files(local_dir: Path) -> list[tuple[str, Path]]:
    """(relative POSIX path, path) of every regular file under ``local_dir``, sorted.

    Any path part starting with "." is skipped: huggingface_hub keeps lock and metadata files in
    ``.cache/huggingface/`` inside ``local_dir``, and those must not end up next to the weights.
    """
    found = []
    for path in Path(local_dir).rglob("*"):
        rel = path.relative_to(local_dir)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        found.append((rel.as_posix(), path))
    return sorted(found)


def _remote_size(s3_client: S3Client, bucket: str, key: str) -> int | None:
    """The object's size, or None when it does not exist; any error propagates. Listed with the
    key as prefix: the key itself sorts first among the keys it prefixes."""
    listed = s3_client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1).get("Contents", [])
    return int(listed[0]["Size"]) if listed and listed[0]["Key"] == key else None


def upload(
    local_dir: Path, bucket: str, prefix: str, s3_client: S3Client, sse: str | None = None
) -> list[str]:
    """Upload every file under ``local_dir`` to ``s3://bucket/prefix``; return the keys uploaded.

    A file whose object already exists with the same size is skipped, so a re-run after a partial
    failure resumes cheaply. ``sse=None`` relies on the bucket's default encryption.
    """
    prefix = normalise_prefix(prefix)
    files = local_files(local_dir)
    extra_args = {"ServerSideEncryption": sse} if sse else None
    uploaded: list[str] = []
    for index, (rel, path) in enumerate(files, start=1):
        key = prefix + rel
        size = path.stat().st_size
        if _remote_size(s3_client, bucket, key) == size:
            print(f"[{index}/{len(files)}] skip {rel} (already there, {size / GIB:.2f} GiB)", flush=True)
            continue
        # upload_file does managed multipart uploads, which multi-GiB safetensors shards need.
        s3_client.upload_file(str(path), bucket, key, ExtraArgs=extra_args)
        uploaded.append(key)
        print(f"[{index}/{len(files)}] uploaded {rel} ({size / GIB:.2f} GiB)", flush=True)
    return uploaded


def write_marker(
    bucket: str,
    prefix: str,
    repo: str,
    revision: str,
    files: int,
    total_bytes: int,
    s3_client: S3Client,
    sse: str | None = None,
) -> None:
    """Record that ``prefix`` holds ``repo@revision`` in full; written last, so it implies success."""
    body = json.dumps({"repo": repo, "revision": revision, "files": files, "bytes": total_bytes})
    extra = {"ServerSideEncryption": sse} if sse else {}
    s3_client.put_object(
        Bucket=bucket, Key=marker_key(prefix), Body=body.encode(), ContentType="application/json", **extra
    )


def is_staged(bucket: str, prefix: str, repo: str, revision: str, s3_client: S3Client) -> bool:
    """True when the marker exists and names this repo and revision (another model or revision
    in the same prefix means the prefix must be staged again)."""
    if _remote_size(s3_client, bucket, marker_key(prefix)) is None:
        return False
    obj = s3_client.get_object(Bucket=bucket, Key=marker_key(prefix))
    try:
        marker = json.loads(obj["Body"].read())
    except ValueError:
        return False  # a garbled marker proves nothing; staging again is the safe answer
    return isinstance(marker, dict) and marker.get("repo") == repo and marker.get("revision") == revision


def stage(
    local_dir: Path,
    bucket: str,
    prefix: str,
    repo: str,
    revision: str,
    s3_client: S3Client,
    sse: str | None = None,
) -> list[str]:
    """Upload ``local_dir`` and then write the marker; return the keys uploaded."""
    files = local_files(local_dir)
    if not files:
        # A marker over an empty prefix would make every later run skip a model that is not there.
        raise StageError(f"no files to stage in {local_dir} (do the allow patterns match the repo?)")
    total = sum(path.stat().st_size for _, path in files)
    print(f"staging {len(files)} files ({total / GIB:.2f} GiB) to s3://{bucket}/{prefix}", flush=True)
    uploaded = upload(local_dir, bucket, prefix, s3_client, sse=sse)
    write_marker(bucket, prefix, repo, revision, len(files), total, s3_client, sse=sse)
    print(f"staged: {len(uploaded)} uploaded, {len(files) - len(uploaded)} already there", flush=True)
    return uploaded


def stream(
    repo: str,
    revision: str,
    workdir: Path,
    bucket: str,
    prefix: str,
    s3_client: S3Client,
    sse: str | None = None,
) -> list[str]:
    """Copy the repo one file at a time (download, upload, delete), then write the marker.

    The disk only ever holds the largest file (a few GiB), not the checkpoint (641 GiB for
    r1-671b), so the Job fits on an ordinary node. An object already in S3 is skipped: S3 shows an
    object only once its upload completed, so a re-run resumes where the last one stopped.
    """
    from fnmatch import fnmatch

    from huggingface_hub import HfApi, hf_hub_download

    token = os.environ.get("HF_TOKEN") or None
    names = sorted(
        name
        for name in HfApi().list_repo_files(repo, revision=revision, token=token)
        if any(fnmatch(name, pattern) or fnmatch(Path(name).name, pattern) for pattern in ALLOW_PATTERNS)
    )
    if not names:
        raise StageError(f"no files to stage in {repo}@{revision} (do the allow patterns match the repo?)")
    prefix = normalise_prefix(prefix)
    extra_args = {"ServerSideEncryption": sse} if sse else None
    uploaded: list[str] = []
    total = 0
    for index, name in enumerate(names, start=1):
        key = prefix + name
        remote = _remote_size(s3_client, bucket, key)
        if remote is not None:
            total += remote
            print(f"[{index}/{len(names)}] skip {name} (already there)", flush=True)
            continue
        path = Path(hf_hub_download(repo, name, revision=revision, local_dir=workdir, token=token))
        size = path.stat().st_size
        s3_client.upload_file(str(path), bucket, key, ExtraArgs=extra_args)
        path.unlink()
        total += size
        uploaded.append(key)
        print(f"[{index}/{len(names)}] uploaded {name} ({size / GIB:.2f} GiB)", flush=True)
    write_marker(bucket, prefix, repo, revision, len(names), total, s3_client, sse=sse)
    print(f"staged: {len(uploaded)} uploaded, {len(names) - len(uploaded)} already there", flush=True)
    return uploaded


def _one_line(err: BaseException, with_type: bool = True) -> str:
    """The error as one line, with the HF token scrubbed in case a library echoed it."""
    text = " ".join((f"{type(err).__name__}: {err}" if with_type else str(err)).split())
    token = os.environ.get("HF_TOKEN")
    return text.replace(token, "***") if token else text


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repo", required=True, help="Hugging Face repo id, e.g. org/name")
    parser.add_argument("--revision", default="main", help="branch, tag or commit (pin a commit)")
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", required=True, help="key prefix, e.g. r1-distill-qwen-7b/")
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("STAGE_DIR", "/stage")))
    parser.add_argument("--region", default=os.environ.get("AWS_REGION"))
    parser.add_argument("--sse", default=None, help="e.g. AES256; default: the bucket's encryption")
    parser.add_argument(
        "--stream", action="store_true", help="one file at a time: the disk holds one shard, not the model"
    )
    # No --token on purpose: HF_TOKEN comes only from the environment.
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        prefix = normalise_prefix(args.prefix)
    except ValueError as err:
        parser.error(str(err))
    where = f"s3://{args.bucket}/{prefix}"
    try:
        s3_client = boto3.client("s3", region_name=args.region)
        # Checked before the download, so a wrong bucket fails in seconds, not after hours.
        try:
            s3_client.list_objects_v2(Bucket=args.bucket, Prefix=prefix, MaxKeys=1)
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "?")
            raise StageError(f"bucket {args.bucket!r} not found or not accessible ({code})") from None
        if is_staged(args.bucket, prefix, args.repo, args.revision, s3_client):
            print(f"already staged: {args.repo}@{args.revision} at {where}", flush=True)
            return 0
        if args.stream:
            try:
                stream(args.repo, args.revision, args.workdir, args.bucket, prefix, s3_client, sse=args.sse)
            except (StageError, ClientError, BotoCoreError, S3UploadFailedError, OSError):
                raise  # reported below like every other staging failure
            except Exception as err:  # Hub errors have many types; all end the Job the same way
                raise StageError(f"copy of {args.repo}@{args.revision} failed: {_one_line(err)}") from None
            return 0
        print(f"downloading {args.repo}@{args.revision} to {args.workdir}", flush=True)
        try:
            local_dir = download(args.repo, args.revision, args.workdir)
        except Exception as err:  # Hub errors have many types; all end the Job the same way
            raise StageError(f"download of {args.repo}@{args.revision} failed: {_one_line(err)}") from None
        stage(local_dir, args.bucket, prefix, args.repo, args.revision, s3_client, sse=args.sse)
    except StageError as err:
        print(f"error: {_one_line(err, with_type=False)}", file=sys.stderr)
        return 1
    except (ClientError, BotoCoreError, S3UploadFailedError, OSError) as err:
        print(f"error: staging to {where} failed: {_one_line(err)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
