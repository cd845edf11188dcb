"""Stage a Hugging Face model repository into an S3 prefix for vLLM's ``runai_streamer`` loader.

A Kubernetes Job runs this inside the pinned vLLM image (Python 3, ``huggingface_hub``, ``boto3``):
it downloads one repo revision to local disk, uploads the files under ``s3://BUCKET/PREFIX``, and
writes a completion marker ``PREFIX.staged.json`` last. vLLM then streams the weights straight from
S3 with ``--load-format runai_streamer``, so no pod ever pulls from the Hub.

Why it is shaped this way:

* One commit: a branch or tag (``--revision main``) is resolved to its commit once, through the Hub
  API, before anything is copied; every file is read at that commit, and the commit is what the
  markers record. The deployment pins commits where the model catalog records one
  (sizing/data/revisions.json) and then stages into a prefix named after the commit.
* Never two revisions in one prefix: ``PREFIX.staging.json`` names the commit being copied before
  the first upload; a prefix whose markers name another commit is refused, not overwritten.
* Verified: the Hub's file listing at that commit (sizes, and the sha256 of every LFS file) is read
  first; each downloaded file is checked against it before upload, every object in S3 is checked
  for its size after, and the listing is recorded in the completion marker.
* Idempotent: when the marker exists and names the same repo and commit, the Job exits 0 before
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
import hashlib
import json
import os
import re
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
IN_PROGRESS_NAME = ".staging.json"
GIB = 1024**3
COMMIT = re.compile(r"[0-9a-f]{40}")


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


def in_progress_key(prefix: str) -> str:
    return f"{normalise_prefix(prefix)}{IN_PROGRESS_NAME}"


def _wanted(name: str) -> bool:
    from fnmatch import fnmatch

    return any(fnmatch(name, pattern) or fnmatch(Path(name).name, pattern) for pattern in ALLOW_PATTERNS)


def resolve(repo: str, revision: str, api: Any) -> tuple[str, dict[str, dict[str, Any]]]:
    """The commit ``revision`` (a branch, tag or commit) points at now, and the Hub's listing of the
    servable files at that commit: {path: {"size": bytes, "sha256": hex or None}} (sha256 is known
    for LFS files, which the weights are). ``api`` is a ``huggingface_hub.HfApi``."""
    token = os.environ.get("HF_TOKEN") or None
    info = api.model_info(repo, revision=revision, files_metadata=True, token=token)
    commit = str(info.sha or "")
    if not COMMIT.fullmatch(commit):
        raise StageError(f"the Hub gave no commit for {repo}@{revision} (got {commit!r})")
    if COMMIT.fullmatch(revision) and commit != revision:
        raise StageError(f"{repo}@{revision} resolved to another commit, {commit}")
    listing = {
        f.rfilename: {"size": f.size, "sha256": f.lfs.sha256 if f.lfs else None}
        for f in info.siblings or []
        if _wanted(f.rfilename)
    }
    if not listing:
        raise StageError(f"no files to stage in {repo}@{commit} (do the allow patterns match the repo?)")
    return commit, listing


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(8 * 1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def check_file(name: str, path: Path, listing: dict[str, dict[str, Any]]) -> None:
    """Refuse a downloaded file whose size or sha256 differs from the Hub's listing at the commit."""
    expected = listing.get(name)
    if expected is None:
        raise StageError(f"{name} is not in the Hub's listing of the commit")
    size = path.stat().st_size
    if expected["size"] is not None and size != expected["size"]:
        raise StageError(f"{name}: {size} bytes downloaded, the Hub lists {expected['size']}")
    if expected["sha256"] and sha256_of(path) != expected["sha256"]:
        raise StageError(f"{name}: sha256 differs from the Hub's listing ({expected['sha256']})")


def verify_staged(bucket: str, prefix: str, listing: dict[str, dict[str, Any]], s3_client: S3Client) -> int:
    """Every listed file is in S3 under ``prefix`` with the listed size; returns the total bytes."""
    prefix = normalise_prefix(prefix)
    missing, wrong, total = [], [], 0
    for name, expected in sorted(listing.items()):
        size = _remote_size(s3_client, bucket, prefix + name)
        if size is None:
            missing.append(name)
        elif expected["size"] is not None and size != expected["size"]:
            wrong.append(f"{name} ({size} bytes, listed {expected['size']})")
        total += size or 0
    if missing or wrong:
        detail = "; ".join([*(f"missing {m}" for m in missing), *(f"wrong size {w}" for w in wrong)])
        raise StageError(f"s3://{bucket}/{prefix} does not match the Hub's listing: {detail}")
    return total


def _read_json(s3_client: S3Client, bucket: str, key: str) -> dict[str, Any] | None:
    """The JSON object at ``key``; None when there is none (or it is not a JSON object). Existence
    is asked by listing: with s3:ListBucket limited to the prefix, S3 answers a GET of a missing key
    with 403, not 404 (the listing's condition key is absent from a GET)."""
    if _remote_size(s3_client, bucket, key) is None:
        return None
    try:
        obj = s3_client.get_object(Bucket=bucket, Key=key)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey"):
            return None
        raise
    try:
        value = json.loads(obj["Body"].read())
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def claim_prefix(bucket: str, prefix: str, repo: str, commit: str, s3_client: S3Client) -> None:
    """Record the commit being copied before the first upload, and refuse a prefix whose markers
    name another repo or commit: resuming would mix two revisions' files."""
    for key in (marker_key(prefix), in_progress_key(prefix)):
        found = _read_json(s3_client, bucket, key)
        if found and (found.get("repo"), found.get("revision")) != (repo, commit):
            raise StageError(
                f"s3://{bucket}/{key} records {found.get('repo')}@{found.get('revision')}, "
                f"not {repo}@{commit}: staging here would mix revisions; stage into a prefix of its "
                "own (the deployment names the prefix after the pinned commit) or empty this prefix first"
            )
    s3_client.put_object(
        Bucket=bucket,
        Key=in_progress_key(prefix),
        Body=json.dumps({"repo": repo, "revision": commit}).encode(),
        ContentType="application/json",
    )


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
    listing: dict[str, dict[str, Any]] | None = None,
    requested: str | None = None,
) -> None:
    """Record that ``prefix`` holds ``repo@revision`` (a commit) in full, with the Hub's listing it
    was verified against and the ref that was asked for; written last, so it implies success."""
    marker: dict[str, Any] = {"repo": repo, "revision": revision, "files": files, "bytes": total_bytes}
    if requested is not None:
        marker["requested"] = requested
    if listing is not None:
        marker["listing"] = listing
    extra = {"ServerSideEncryption": sse} if sse else {}
    s3_client.put_object(
        Bucket=bucket,
        Key=marker_key(prefix),
        Body=json.dumps(marker, sort_keys=True).encode(),
        ContentType="application/json",
        **extra,
    )


def is_staged(bucket: str, prefix: str, repo: str, revision: str, s3_client: S3Client) -> bool:
    """True when the marker exists and names this repo and revision (another model or revision
    in the same prefix means the prefix must be staged again)."""
    marker = _read_json(s3_client, bucket, marker_key(prefix))  # a garbled marker proves nothing
    return marker is not None and marker.get("repo") == repo and marker.get("revision") == revision


def _finish(
    bucket: str,
    prefix: str,
    repo: str,
    revision: str,
    files: int,
    s3_client: S3Client,
    sse: str | None,
    listing: dict[str, dict[str, Any]] | None,
    requested: str | None,
    total: int,
) -> None:
    """Check S3 against the listing (when there is one), then write the completion marker."""
    if listing is not None:
        total = verify_staged(bucket, prefix, listing, s3_client)
    write_marker(bucket, prefix, repo, revision, files, total, s3_client, sse, listing, requested)
    if listing is not None:  # the completion marker now names the commit; the claim is done
        s3_client.delete_object(Bucket=bucket, Key=in_progress_key(prefix))


def stage(
    local_dir: Path,
    bucket: str,
    prefix: str,
    repo: str,
    revision: str,
    s3_client: S3Client,
    sse: str | None = None,
    listing: dict[str, dict[str, Any]] | None = None,
    requested: str | None = None,
) -> list[str]:
    """Check the download against the Hub's ``listing`` (when given), upload ``local_dir`` and then
    write the marker; return the keys uploaded."""
    files = local_files(local_dir)
    if not files:
        # A marker over an empty prefix would make every later run skip a model that is not there.
        raise StageError(f"no files to stage in {local_dir} (do the allow patterns match the repo?)")
    if listing is not None:
        for rel, path in files:
            check_file(rel, path, listing)
        if missing := sorted(set(listing) - {rel for rel, _ in files}):
            raise StageError(f"the download lacks {', '.join(missing)} of the Hub's listing")
        claim_prefix(bucket, prefix, repo, revision, s3_client)
    total = sum(path.stat().st_size for _, path in files)
    print(f"staging {len(files)} files ({total / GIB:.2f} GiB) to s3://{bucket}/{prefix}", flush=True)
    uploaded = upload(local_dir, bucket, prefix, s3_client, sse=sse)
    _finish(bucket, prefix, repo, revision, len(files), s3_client, sse, listing, requested, total)
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
    listing: dict[str, dict[str, Any]] | None = None,
    requested: str | None = None,
) -> list[str]:
    """Copy the repo one file at a time (download, check, upload, delete), then write the marker.

    The disk only ever holds the largest file (a few GiB), not the checkpoint (641 GiB for
    r1-671b), so the Job fits on an ordinary node. An object already in S3 is skipped: S3 shows an
    object only once its upload completed, and ``claim_prefix`` has made sure it is of this commit,
    so a re-run resumes where the last one stopped; its size is checked against the listing at the end.
    """
    from huggingface_hub import HfApi, hf_hub_download

    token = os.environ.get("HF_TOKEN") or None
    if listing is not None:
        names = sorted(listing)
        claim_prefix(bucket, prefix, repo, revision, s3_client)
    else:
        listed = HfApi().list_repo_files(repo, revision=revision, token=token)
        names = sorted(name for name in listed if _wanted(name))
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
        if listing is not None:
            check_file(name, path, listing)
        size = path.stat().st_size
        s3_client.upload_file(str(path), bucket, key, ExtraArgs=extra_args)
        path.unlink()
        total += size
        uploaded.append(key)
        print(f"[{index}/{len(names)}] uploaded {name} ({size / GIB:.2f} GiB)", flush=True)
    _finish(bucket, prefix, repo, revision, len(names), s3_client, sse, listing, requested, total)
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
    parser.add_argument(
        "--revision", default="main", help="commit to stage, or a branch or tag resolved to its commit once"
    )
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
        # A pinned commit that is staged already needs no call to the Hub at all.
        if COMMIT.fullmatch(args.revision) and is_staged(
            args.bucket, prefix, args.repo, args.revision, s3_client
        ):
            print(f"already staged: {args.repo}@{args.revision} at {where}", flush=True)
            return 0
        # A moving ref is resolved once: the commit it named when this prefix was staged stays.
        staged = _read_json(s3_client, args.bucket, marker_key(prefix))
        if staged and (staged.get("repo"), staged.get("requested")) == (args.repo, args.revision):
            print(
                f"already staged: {args.repo}@{args.revision} as commit {staged.get('revision')} at {where} "
                "(resolved when it was staged; pin a commit to move)",
                flush=True,
            )
            return 0
        try:
            from huggingface_hub import HfApi

            commit, listing = resolve(args.repo, args.revision, HfApi())
        except StageError:
            raise
        except Exception as err:  # Hub errors have many types; all end the Job the same way
            raise StageError(f"listing {args.repo}@{args.revision} failed: {_one_line(err)}") from None
        if commit != args.revision:
            print(f"{args.repo}@{args.revision} is commit {commit}: staging that commit", flush=True)
        if is_staged(args.bucket, prefix, args.repo, commit, s3_client):
            print(f"already staged: {args.repo}@{commit} at {where}", flush=True)
            return 0
        if args.stream:
            try:
                stream(
                    args.repo,
                    commit,
                    args.workdir,
                    args.bucket,
                    prefix,
                    s3_client,
                    args.sse,
                    listing,
                    args.revision,
                )
            except (StageError, ClientError, BotoCoreError, S3UploadFailedError, OSError):
                raise  # reported below like every other staging failure
            except Exception as err:  # Hub errors have many types; all end the Job the same way
                raise StageError(f"copy of {args.repo}@{commit} failed: {_one_line(err)}") from None
            return 0
        print(f"downloading {args.repo}@{commit} to {args.workdir}", flush=True)
        try:
            local_dir = download(args.repo, commit, args.workdir)
        except Exception as err:  # Hub errors have many types; all end the Job the same way
            raise StageError(f"download of {args.repo}@{commit} failed: {_one_line(err)}") from None
        stage(local_dir, args.bucket, prefix, args.repo, commit, s3_client, args.sse, listing, args.revision)
    except StageError as err:
        print(f"error: {_one_line(err, with_type=False)}", file=sys.stderr)
        return 1
    except (ClientError, BotoCoreError, S3UploadFailedError, OSError) as err:
        print(f"error: staging to {where} failed: {_one_line(err)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
