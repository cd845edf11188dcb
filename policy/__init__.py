"""The deepseek-eks policy pack: rules in :mod:`policy.rules`, the pack in ``policy/__main__.py``,
``python -m policy check`` in :mod:`policy.cli`.

This package imports nothing at import time (pack_dir() is all it offers), so the automation CLI
can locate the pack without loading the rules.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

MANIFEST = "PulumiPolicy.yaml"


def pack_dir() -> Path:
    """The folder to pass to ``pulumi preview|up --policy-pack``: this package's own directory,
    which holds PulumiPolicy.yaml, the pack's ``__main__.py`` and its requirements.txt; the same
    call works from a checkout (``policy/``) and from the installed wheel (``deepseek_eks/policy/``)."""
    here = Path(__file__).resolve().parent
    if not (here / MANIFEST).is_file():  # pragma: no cover - a wheel built without its package data
        raise FileNotFoundError(f"the policy pack is incomplete: {here / MANIFEST} is missing")
    return here


def pack_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with this interpreter's folder first on PATH,
    so that the Pulumi CLI starts the pack (PulumiPolicy.yaml names no virtualenv) under the Python
    that has pulumi-policy installed: the one running the automation CLI."""
    env = dict(os.environ if base is None else base)
    scripts = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([scripts, *(p for p in env.get("PATH", "").split(os.pathsep) if p)])
    return env
