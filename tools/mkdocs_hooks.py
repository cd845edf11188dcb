"""MkDocs hooks (mkdocs.yml ``hooks:``): the repository's README.md is the site's home page and
CHANGELOG.md its changelog page, without a copy of either under docs/. Links in them are written
for the repository (``docs/operations.md``), so they are rewritten to the site's layout."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
PAGES = {"README.md": "index.md", "CHANGELOG.md": "changelog.md"}
_DOCS_LINK = re.compile(r"\]\(docs/")


def on_files(files: Files, config: Any) -> Files:
    """Add README.md and CHANGELOG.md as generated pages."""
    for source, target in PAGES.items():
        text = _DOCS_LINK.sub("](", (ROOT / source).read_text(encoding="utf-8"))
        text = text.replace("](CHANGELOG.md)", "](changelog.md)")
        files.append(File.generated(config, target, content=text))
    return files
