"""Write provider/schema.json: the Pulumi package schema of DeepSeekService, inferred from its typed
args by Pulumi's own analyzer (the one the provider runs when the engine loads it) and completed
from the settings model (deepseek_eks/schema.py: descriptions, enums, defaults), so what other
languages see is what the Python component accepts.

    python tools/generate_schema.py            # rewrite provider/schema.json
    python tools/generate_schema.py --check    # exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.schema import generate_schema

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "provider" / "schema.json"

from deepseek_eks import DeepSeekService, __version__  # noqa: E402
from deepseek_eks.schema import enrich  # noqa: E402
from deepseek_eks.settings import PROJECT  # noqa: E402


def schema() -> dict[str, Any]:
    """The schema ``ComponentProvider`` serves (pulumi/provider/experimental/component.py)."""
    result = Analyzer(PROJECT).analyze([DeepSeekService])
    dependencies = sorted(result["dependencies"], key=lambda d: f"{d.name}{d.version}")
    spec = generate_schema(
        PROJECT, __version__, None, result["component_definitions"], result["type_definitions"], dependencies
    )
    document: dict[str, Any] = spec.to_json()
    return enrich(document)


def text() -> str:
    return json.dumps(schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if provider/schema.json is stale")
    args = parser.parse_args(argv)
    if args.check:
        if not SCHEMA.exists() or SCHEMA.read_text() != text():
            print(f"{SCHEMA.relative_to(ROOT)} is stale: run python tools/generate_schema.py")
            return 1
        return 0
    SCHEMA.write_text(text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
