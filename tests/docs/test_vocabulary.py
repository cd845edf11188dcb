"""The hand-written pages a user reads speak the user's words, not the project's internal labels
(tests/docs/vocabulary.py): no issue numbers or section tags, "the published guides" rather than
the name the work gave them, the twin, the real engine and capacity rather than tier numbers. The
example stacks and programs are read as documentation too. The generated reference pages, the
schema and the CLI help are checked against the same patterns where they are generated."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.vocabulary import findings

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *(ROOT / "docs").glob("*.md"),  # docs/reference/ is generated
        *ROOT.glob("Pulumi*.yaml"),
        *(p for p in (ROOT / "examples").rglob("*") if p.is_file() and "node_modules" not in p.parts),
    ]
)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_user_page_carries_no_internal_label(page: Path) -> None:
    found = findings(page.read_text(encoding="utf-8"))
    assert not found, f"{page.relative_to(ROOT)}: " + "; ".join(map(str, found))


@pytest.mark.parametrize(
    "text",
    [
        "meets issue 22's goal",
        "(issue 32 §5)",
        "ALB access logs (sec23b).",
        "both seed guides at their settings",
        "the twin (Tier 0)",
        "Tiers 1 and 2",
        "the change to DESIGN.md the page proposes",
    ],
)
def test_the_patterns_catch_the_labels_seen_in_pages(text: str) -> None:
    assert findings(text), text


@pytest.mark.parametrize(
    "text",
    [
        "the published guides; `runs[]` labels stay guide:keda-queue",
        "NVIDIA/dcgm-exporter#500 resets only when the exporter restarts",
        "reference/upstream/seed-guides/guides.json",
        "an issue with the second tier of nodes; section 3 of the EKS guide",
    ],
)
def test_the_patterns_leave_user_words_alone(text: str) -> None:
    assert not findings(text), text


# The code of the package, its tools and its build: a comment or docstring is read by whoever changes
# the code, and an internal label there means nothing to them either.
CODE_FOLDERS = (
    "automation",
    "components",
    "deepseek_eks",
    "guardrails",
    "perf",
    "policy",
    "promql",
    "provider",
    "settings",
    "sizing",
    "tools",
    "twin",
)
CODE = sorted(
    [
        *(ROOT / name for name in (".ci/run", "Makefile", "setup.py", "pyproject.toml", "__main__.py")),
        *(
            path
            for folder in CODE_FOLDERS
            for path in (ROOT / folder).rglob("*")
            if path.suffix in {".py", ".sh", ".mod", ".go", ".yaml"} and "__pycache__" not in path.parts
        ),
    ]
)


@pytest.mark.parametrize("path", CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_code_carries_no_internal_label(path: Path) -> None:
    found = findings(path.read_text(encoding="utf-8"))
    assert not found, f"{path.relative_to(ROOT)}: " + "; ".join(map(str, found))
