"""Keep vLLM's compile caches in the weights bucket, so a replica on a new node loads its compiled
graphs instead of compiling them again (sizing/startup.py COMPILE_CACHED_S).

Runs in the vLLM image (Python 3 and boto3), in two modes:

* ``restore``, an init container before vLLM: every object under ``s3://BUCKET/PREFIX`` is written
  under ``--root`` (vLLM's HOME) at its key's path below the prefix, at most ``MAX_BYTES`` in all.
* ``save``, a sidecar: waits until vLLM answers ``/health`` (its engine has compiled and captured
  its graphs by then), uploads every file of the cache directories that the bucket lacks or holds
  at another size, then idles until the pod stops.

vLLM 0.33.0 names its torch.compile cache directory after a hash of the engine's config, the
environment, the traced source and the compiler, whose factors include the GPU's name
(vllm/compilation/backends.py, compiler_interface.py get_inductor_factors), so one prefix serves
every GPU model and parallel size: a replica finds its own directory there, or none and compiles.
The prefix is the variant's and a key of the image and the vLLM arguments
(components/serving/vllm.py ``compile_cache_key``): a change of either starts a new folder, so
the directories an upgrade leaves behind are never downloaded again, nor counted in ``MAX_BYTES``.

Best effort: on any error it says so and goes on (restore exits 0, save idles), so a pod never fails
to serve because of its cache; the worst case is the uncached start.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

# vLLM's compiled graphs and Triton kernels, relative to HOME (components/serving/vllm.py _env:
# VLLM_CACHE_ROOT is $HOME/.cache/vllm, TRITON_CACHE_DIR $HOME/.triton).
CACHE_DIRS = (".cache/vllm/torch_compile_cache", ".triton")
# The compiled artifacts of a 60 GB model are ~15 MB (EKS user guide, ml-inference-fast-model-loading);
# this bound keeps a cache gone wrong from filling the pod's HOME volume.
MAX_BYTES = 2 * 1024**3
HEALTH_POLL_S = 10


def s3_client(region: str | None) -> Any:
    import boto3  # the vLLM image has it; imported here so the pure parts load without it

    return boto3.client("s3", region_name=region)


def listing(s3: Any, bucket: str, prefix: str) -> dict[str, int]:
    """Key -> size of every object under ``prefix``."""
    found: dict[str, int] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            found[obj["Key"]] = int(obj["Size"])
    return found


def local_path(root: Path, prefix: str, key: str) -> Path | None:
    """Where ``key`` goes below ``root``: only inside one of CACHE_DIRS, never above it."""
    relative = PurePosixPath(key[len(prefix) :])
    if not key.startswith(prefix) or relative.is_absolute() or ".." in relative.parts:
        return None
    if not any(relative.is_relative_to(d) and relative != PurePosixPath(d) for d in CACHE_DIRS):
        return None
    return root.joinpath(*relative.parts)


def cache_files(root: Path) -> Iterator[tuple[str, Path]]:
    """(path relative to ``root``, file) of every regular file in the cache directories."""
    for directory in CACHE_DIRS:
        base = root / directory
        if not base.is_dir():
            continue
        for dirpath, _dirs, files in os.walk(base):
            for file in sorted(files):
                path = Path(dirpath) / file
                if path.is_file() and not path.is_symlink():
                    yield path.relative_to(root).as_posix(), path


def restore(s3: Any, bucket: str, prefix: str, root: Path) -> int:
    """Download the cache; returns the files written."""
    objects = listing(s3, bucket, prefix)
    total = sum(objects.values())
    if total > MAX_BYTES:
        print(f"compile cache: {total} bytes under s3://{bucket}/{prefix}, over {MAX_BYTES}: not restored")
        return 0
    written = 0
    for key in sorted(objects):
        target = local_path(root, prefix, key)
        if target is None:
            print(f"compile cache: skipped {key!r} (outside the cache directories)")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, key, str(target))
        written += 1
    print(f"compile cache: restored {written} files from s3://{bucket}/{prefix}")
    return written


def save(s3: Any, bucket: str, prefix: str, root: Path) -> int:
    """Upload the files the bucket lacks (or holds at another size); returns the files uploaded."""
    known = listing(s3, bucket, prefix)
    files = list(cache_files(root))
    if sum(path.stat().st_size for _, path in files) > MAX_BYTES:
        print(f"compile cache: the local cache exceeds {MAX_BYTES} bytes: not saved")
        return 0
    uploaded = 0
    for relative, path in files:
        key = prefix + relative
        if known.get(key) == path.stat().st_size:
            continue
        s3.upload_file(str(path), bucket, key)
        uploaded += 1
    print(f"compile cache: saved {uploaded} new files to s3://{bucket}/{prefix}")
    return uploaded


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:  # loopback, a fixed URL
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def wait_for(url: str, deadline_s: float, poll_s: float = HEALTH_POLL_S) -> bool:
    """Whether ``url`` answered 200 within ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if healthy(url):
            return True
        time.sleep(poll_s)
    return False


def idle() -> None:
    """Stay up as a sidecar until the pod stops (SIGTERM ends it at once)."""
    while True:
        time.sleep(3600)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["restore", "save"])
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--root", default=os.environ.get("HOME", "/home/vllm"))
    parser.add_argument("--health-url", default="http://127.0.0.1:8000/health")
    parser.add_argument("--deadline", type=float, default=3600.0, help="seconds to wait for vLLM")
    args = parser.parse_args(argv)
    # PID 1 ignores SIGTERM unless it handles it: end at once when the pod stops.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    root = Path(args.root)
    region = os.environ.get("AWS_REGION")
    if args.mode == "restore":
        try:
            restore(s3_client(region), args.bucket, args.prefix, root)
        except Exception as error:  # best effort: vLLM then compiles
            print(f"compile cache: not restored ({type(error).__name__}: {error}); vLLM compiles")
        return 0
    if wait_for(args.health_url, args.deadline):
        try:
            save(s3_client(region), args.bucket, args.prefix, root)
        except Exception as error:  # best effort: the next replica compiles
            print(f"compile cache: not saved ({type(error).__name__}: {error})")
    else:
        print(f"compile cache: vLLM was not healthy within {args.deadline:.0f} s: nothing saved")
    idle()
    return 0


if __name__ == "__main__":
    sys.exit(main())
