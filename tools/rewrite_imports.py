"""Rewrite imports of the project's packages to the one import package, ``deepseek_eks``.

``from sizing import plan`` -> ``from deepseek_eks.sizing import plan``, ``import promql`` ->
``from deepseek_eks import promql``, and module paths passed as text to the calls that import
them (``monkeypatch.setattr("sizing.cli.x", ...)``, ``mock.patch``, ``import_module``) likewise.
Inside a package, its own absolute imports become relative
(``from sizing.catalog import`` in sizing/ -> ``from .catalog import``), so ``python -m sizing``
runs the checkout's ``sizing`` folder without loading it a second time as ``deepseek_eks.sizing``.

Idempotent: re-run it after merging a branch written in the old style.

    python tools/rewrite_imports.py            # rewrite in place, list the files changed
    python tools/rewrite_imports.py --check    # exit 1 if any file still needs it
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "deepseek_eks"
SUBPACKAGES = ("components", "settings", "sizing", "promql", "automation")
SKIP = {".venv", ".venv-checkov", "build", PACKAGE, ".git", "reference", "node_modules"}

_NAMES = "|".join(SUBPACKAGES)
_FROM = re.compile(rf"^(?P<indent>[ \t]*)from (?P<pkg>{_NAMES})(?P<rest>(\.[A-Za-z_][\w.]*)?) import ", re.M)
_IMPORT = re.compile(rf"^(?P<indent>[ \t]*)import (?P<pkg>{_NAMES})[ \t]*$", re.M)
# ``import sizing.cli`` binds ``sizing`` and loads ``sizing.cli``: keep both, under the one package.
_IMPORT_SUB = re.compile(
    rf"^(?P<indent>[ \t]*)import (?P<pkg>{_NAMES})(?P<rest>(\.[A-Za-z_]\w*)+)[ \t]*$", re.M
)
# A module path given as text to the calls that import it (monkeypatch.setattr, mock.patch, ...).
_STRING = re.compile(
    rf"(?P<call>(setattr|patch|import_module|find_spec)\(\s*)(?P<quote>[\"'])(?P<pkg>{_NAMES})"
    rf"(?P<rest>(\.[A-Za-z_][\w.]*)?)(?P=quote)"
)


def owning_package(path: Path) -> str | None:
    """The subpackage ``path`` belongs to (its own imports become relative), if any."""
    parts = path.relative_to(ROOT).parts
    return parts[0] if len(parts) > 1 and parts[0] in SUBPACKAGES else None


def rewrite(text: str, own: str | None, depth: int) -> str:
    def from_(m: re.Match[str]) -> str:
        if m["pkg"] == own:
            return f"{m['indent']}from {'.' * depth}{m['rest'].lstrip('.')} import "
        return f"{m['indent']}from {PACKAGE}.{m['pkg']}{m['rest']} import "

    def import_(m: re.Match[str]) -> str:
        return f"{m['indent']}from {PACKAGE} import {m['pkg']}"

    def import_sub(m: re.Match[str]) -> str:
        i = m["indent"]
        # The submodule import loads it (kept from F401); the code refers to it through the package name.
        loaded = f"{i}import {PACKAGE}.{m['pkg']}{m['rest']}  # noqa: F401"
        return f"{loaded}\n{i}from {PACKAGE} import {m['pkg']}"

    def string(m: re.Match[str]) -> str:
        return f"{m['call']}{m['quote']}{PACKAGE}.{m['pkg']}{m['rest']}{m['quote']}"

    text = _IMPORT_SUB.sub(import_sub, _IMPORT.sub(import_, _FROM.sub(from_, text)))
    return _STRING.sub(string, text)


def files() -> list[Path]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        # Also the virtualenvs Pulumi makes for provider/ and examples/*/ (PulumiPlugin.yaml, Pulumi.yaml).
        if rel.parts[0] in SKIP or "venv" in rel.parts or path.resolve() == Path(__file__).resolve():
            continue
        found.append(path)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report files that need rewriting")
    args = parser.parse_args(argv)
    changed = []
    for path in files():
        own = owning_package(path)
        # `from .x` in a package's __init__/module at depth 1; one more dot per nested folder.
        depth = len(path.relative_to(ROOT).parts) - 1 if own else 0
        text = path.read_text()
        new = rewrite(text, own, depth)
        if new != text:
            changed.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new)
    for rel in changed:
        print(rel)
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
