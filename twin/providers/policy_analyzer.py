"""Our policy pack (``policy/``) as a binary analyzer plugin, for the twin's engine (the
real engine), which has no ``pulumi-language-python`` host to start a Python pack with.

Facts (reference/upstream/pulumi-engine-twin.json ``policy_packs``): the v3.274.0 CLI starts a pack
folder only through its runtime's language host (pulumi pkg/v3 ``resource/plugin/analyzer_plugin.go``
``NewPolicyAnalyzer``; the older ``pulumi-analyzer-policy-<runtime>`` fallback is gone), but a
``--policy-pack`` path that is an executable file is launched directly as an analyzer plugin with the
engine's address as its argument. ``write_launcher`` writes such an executable: it runs the SDK's
own pack runner (``python3 -u -m pulumi.policy <address> <pack>``, what Pulumi's
``pulumi-analyzer-policy-python`` script runs for a pack without a virtualenv) in the pack folder,
so the pack, ``pulumi.policy`` and ``pulumi_policy`` are the real ones; only the launcher is ours.
"""

from __future__ import annotations

import shlex
import stat
from pathlib import Path

LAUNCHER_NAME = "deepseek-eks-policy-pack"
# What Pulumi's pulumi-analyzer-policy-python runs for a pack without a virtualenv (python3 from PATH).
RUNNER = ("python3", "-u", "-m", "pulumi.policy")


def write_launcher(bin_dir: Path, pack_dir: Path) -> Path:
    """Write an executable in ``bin_dir`` that serves the pack in ``pack_dir`` as an analyzer
    plugin; pass its path as the policy pack (``--policy-pack PATH``)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / LAUNCHER_NAME
    pack = shlex.quote(str(pack_dir.resolve()))
    path.write_text(f'#!/bin/sh\ncd {pack} && exec {" ".join(RUNNER)} "$1" {pack}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path
