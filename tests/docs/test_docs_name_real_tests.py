"""The pages name tests and files that exist, and an expected failure only where a test is marked
so: a page that keeps describing an xfail a commit removed, a test file that was renamed or a
repository path that moved fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
TEST_FILE = re.compile(r"`((?:tests/[\w/]+/)?test_\w+\.py)`")
XFAIL_WORDS = re.compile(r"\bxfail\b|expected failure", re.IGNORECASE)


def _test_files() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        found.setdefault(path.name, []).append(path)
    return found


def paragraphs(page: Path) -> list[str]:
    """Blank-line separated blocks, list items split: each is one statement about some tests."""
    blocks = re.split(r"\n\s*\n|\n(?=[-*] |\d+\. )", page.read_text())
    return [b for b in blocks if b.strip()]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_test_file_a_page_names_exists(page: Path) -> None:
    files = _test_files()
    missing = []
    for name in TEST_FILE.findall(page.read_text()):
        exists = (ROOT / name).is_file() if "/" in name else name in files
        if not exists:
            missing.append(name)
    assert not missing, f"{page.name} names test files that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_an_expected_failure_a_page_describes_is_marked_in_the_test_it_names(page: Path) -> None:
    files = _test_files()
    wrong = []
    for block in paragraphs(page):
        if not XFAIL_WORDS.search(block):
            continue
        named = TEST_FILE.findall(block)
        paths = [p for n in named for p in ([ROOT / n] if "/" in n else files.get(n, []))]
        if not any("pytest.mark.xfail" in p.read_text() for p in paths if p.is_file()):
            wrong.append(block.strip()[:160])
    assert not wrong, f"{page.name} describes expected failures no named test marks: {wrong}"


# Folders of the repository a page's paths start with (build outputs and virtualenvs are not pages'
# subject: `build/rendered/dev/plan.json` is what a command writes).
TOP_FOLDERS = sorted(
    p.name
    for p in ROOT.iterdir()
    if p.is_dir() and not p.name.startswith(".") and p.name != "build" and not p.name.endswith(".egg-info")
)
# A path into one of them, not part of a longer path, a URL or a glob/placeholder (`test_capacity*.py`,
# `vllm-<version>/`).
_TOPS = "|".join(map(re.escape, TOP_FOLDERS))
REPO_PATH = re.compile(rf"(?<![\w/.:-])((?:{_TOPS})/[\w./-]*\w)(?![\w*<-])")
# Words shaped like a repository path that name something else.
NOT_REPO_PATHS = {"provider/v4": "pulumi-kubernetes's Go module path"}


@pytest.mark.parametrize("page", [*PAGES, ROOT / "CHANGELOG.md"], ids=lambda p: p.name)
def test_every_repository_path_a_page_names_exists(page: Path) -> None:
    """A file or folder a page points the reader to is still there (relative links from docs/ too)."""
    missing = [
        path
        for path in REPO_PATH.findall(page.read_text())
        if path not in NOT_REPO_PATHS and not (ROOT / path).exists() and not (page.parent / path).exists()
    ]
    assert not missing, f"{page.name} names paths that do not exist: {missing}"
