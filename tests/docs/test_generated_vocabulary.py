"""What is generated from the code for users to read carries none of the project's internal labels
(tests/docs/vocabulary.py: issue numbers, section tags, "seed guides", tier numbers): the component
schema other languages see, the generated reference pages, every command's ``--help`` and
``help(DeepSeekService)``. A label written into a field docstring, a settings description or an
argparse help string fails here, where it is generated, not only in the committed copies."""

from __future__ import annotations

import ast
import pydoc
import sys
from pathlib import Path

import pytest

from deepseek_eks import DeepSeekService
from tests.docs.vocabulary import findings

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import generate_docs  # noqa: E402
from generate_schema import text as schema_text  # noqa: E402

sys.path.pop(0)

GENERATED = {
    "provider/schema.json (as generated)": schema_text,
    "docs/reference/configuration.md (as generated)": generate_docs.configuration,
    "docs/reference/cli.md: every command's --help": generate_docs.cli,
    "docs/reference/plan-json.md (as generated)": generate_docs.plan_json,
    "help(DeepSeekService)": lambda: pydoc.render_doc(DeepSeekService, renderer=pydoc.plaintext),
}
COMMITTED = sorted([ROOT / "provider" / "schema.json", *(ROOT / "docs" / "reference").glob("*.md")])


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_text_carries_no_internal_label(name: str) -> None:
    found = findings(GENERATED[name]())
    assert not found, f"{name}: " + "; ".join(map(str, found))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_generated_file_carries_no_internal_label(path: Path) -> None:
    found = findings(path.read_text(encoding="utf-8"))
    assert not found, f"{path.relative_to(ROOT)}: " + "; ".join(map(str, found))


# The packages the wheel ships: their docstrings reach users through help() and the CLI, their
# string literals through messages. Comments (``#``) are for the project's readers and may cite
# the tracker.
SHIPPED = ("automation", "components", "settings", "sizing", "policy", "promql", "deepseek_eks")


def _shipped_texts() -> list[tuple[str, str]]:
    """(where, text) for every docstring and string literal of the shipped packages' modules."""
    texts = []
    for package in SHIPPED:
        for path in sorted((ROOT / package).rglob("*.py")):
            if not path.is_file() or path.is_symlink():
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    texts.append((f"{path.relative_to(ROOT)}:{node.lineno}", node.value))
    return texts


def test_shipped_docstrings_and_messages_carry_no_internal_label() -> None:
    found = [f"{where}: {finding}" for where, text in _shipped_texts() for finding in findings(text)]
    assert not found, "\n".join(found)
