"""Our component provider (``provider/__main__.py``, DeepSeekService) as the plugin
``pulumi-resource-deepseek-eks`` on the engine's ``PATH`` (the real engine).

``provider/PulumiPlugin.yaml`` names the Python runtime, so the engine would start the provider
through the Python language host, which the Go module proxy does not serve (twin/build-engine.sh).
The engine looks for ``pulumi-resource-<package>`` on ``PATH`` before anything else, so a launcher
there that execs this file serves the same provider class, the same schema and the same Construct.

With ``DEEPSEEK_EKS_TWIN_CHARTS`` set (a folder for the stub charts) each constructed service also
gets the twin's transform (``transform.py``): the program's stack transform does not reach into a
component that another process constructs.

Run as ``python component.py <engine address>``; ``write_launcher`` writes the launcher.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pulumi

ROOT = Path(__file__).resolve().parents[2]
PROVIDER_MAIN = ROOT / "provider" / "__main__.py"
PLUGIN_NAME = "pulumi-resource-deepseek-eks"
CHARTS_ENV = "DEEPSEEK_EKS_TWIN_CHARTS"


def provider_class() -> type[Any]:
    """``DeepSeekProvider`` from provider/__main__.py (loaded by path: it is a script, not a module)."""
    spec = importlib.util.spec_from_file_location("deepseek_eks_component_provider", PROVIDER_MAIN)
    assert spec is not None and spec.loader is not None, PROVIDER_MAIN
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    provider: type[Any] = module.DeepSeekProvider
    return provider


def make_provider(charts: Path | None) -> Any:
    """The shipped provider; with ``charts``, one that adds the twin's transform to each service."""
    base = provider_class()
    if charts is None:
        return base()
    from twin.providers.transform import twin_transform

    transform = twin_transform(charts)

    class TwinProvider(base):  # type: ignore[misc, valid-type]
        """The shipped provider, each constructed component transformed for the twin."""

        def construct(
            self, name: str, resource_type: str, inputs: Any, options: pulumi.ResourceOptions | None = None
        ) -> Any:
            # A component's transforms apply to every child it registers.
            twin = pulumi.ResourceOptions(transforms=[transform])
            return super().construct(name, resource_type, inputs, pulumi.ResourceOptions.merge(options, twin))

    return TwinProvider()


def write_launcher(bin_dir: Path, installed: Path, python: str = sys.executable) -> Path:
    """Write the executable ``pulumi-resource-deepseek-eks`` into ``bin_dir``. ``installed`` is the
    deepseek-eks wheel unpacked (the provider reads its version from the distribution's metadata,
    as it does in the virtualenv PulumiPlugin.yaml builds); the checkout comes after it, for
    ``twin.providers``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / PLUGIN_NAME
    launcher = f'PYTHONPATH="{installed}:{ROOT}" exec "{python}" "{Path(__file__).resolve()}" "$@"'
    path.write_text(f"#!/bin/sh\n{launcher}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def main() -> None:
    """Serve the provider (``pulumi.provider.main`` reads the engine address from ``sys.argv``)."""
    from pulumi.provider import main as serve

    charts = os.environ.get(CHARTS_ENV)
    serve(make_provider(Path(charts) if charts else None), sys.argv[1:])


if __name__ == "__main__":
    main()
