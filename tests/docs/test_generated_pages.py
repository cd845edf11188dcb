"""The generated reference pages (docs/reference/) are what tools/generate_docs.py writes from the
settings model, the argument parsers and the plan type today: a changed setting, flag or plan
field without a regenerated page fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "generate_docs.py"


def test_generated_reference_pages_are_current() -> None:
    result = subprocess.run(
        [sys.executable, str(TOOL), "--check"], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert result.returncode == 0, result.stderr


def test_every_setting_has_a_row_in_the_configuration_reference() -> None:
    from deepseek_eks.settings.model import known_keys

    page = (ROOT / "docs" / "reference" / "configuration.md").read_text()
    missing = [key for key in known_keys() if f"| `{key}` |" not in page]
    assert not missing, f"settings missing from docs/reference/configuration.md: {missing}"


def test_every_plan_json_field_is_described() -> None:
    # The page is current (above), so an empty description cell is a plan field nobody documented.
    page = (ROOT / "docs" / "reference" / "plan-json.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    undescribed = [row.split("`")[1] for row in rows if row.rstrip().endswith("|  |")]
    assert rows and not undescribed, f"plan.json fields without a description: {undescribed}"
