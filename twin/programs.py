"""Programs run beside the twin: how each is started with its log, how a caller waits on what it
makes, and the admin kubeconfig they reach the twin's API server with."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .server import Api, TwinError, _start, _tail


def kubeconfig(api: Api, folder: Path) -> Path:
    """An admin kubeconfig for the programs run beside the twin (certificate files by path)."""
    files = api.certificates
    if files is None:
        raise TwinError("this Api was not made by running_twin: no certificates for a kubeconfig")
    cluster = {"server": str(api.http.base_url).rstrip("/"), "certificate-authority": str(files.ca)}
    user = {"client-certificate": str(files.client_cert), "client-key": str(files.client_key)}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "twin", "cluster": cluster}],
        "users": [{"name": "admin", "user": user}],
        "contexts": [{"name": "twin", "context": {"cluster": "twin", "user": "admin"}}],
        "current-context": "twin",
    }
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass(frozen=True)
class Program:
    """A program run beside the twin, and its log."""

    process: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, command: Sequence[str], log: Path, env: dict[str, str] | None = None) -> Program:
        """``command`` started with its output in ``log`` (server._start, the twin's own way)."""
        return cls(_start(list(command), log, env), log)


def wait_for(what: str, found: Any, programs: Sequence[Program], timeout_s: float) -> Any:
    """``found()`` once it is truthy (an ``OSError`` or ``TwinError`` counts as not yet), within
    ``timeout_s``; a TwinError with the logs' tails when a program exits first or time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        for program in programs:
            if program.process.poll() is not None:
                code = program.process.returncode
                raise TwinError(f"{program.log.stem} exited with {code} before {what}:\n{_tail(program.log)}")
        with contextlib.suppress(OSError, TwinError):
            value = found()
            if value:
                return value
        if time.monotonic() > deadline:
            tails = "\n".join(f"{p.log.stem}:\n{_tail(p.log, 10)}" for p in programs)
            raise TwinError(f"no {what} within {timeout_s:.0f} s\n{tails}")
        time.sleep(0.3)
