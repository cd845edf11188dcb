"""The project's internal labels, which a page, a schema description or a CLI help text a user reads
must not carry: the issue tracker's numbers and section tags, the name the work gave the published
autoscaling guides, the verification tiers' numbers, the design notes kept outside the repository.
One place, used by the hand-written pages' test
(tests/docs/test_vocabulary.py) and by the checks on the generated pages, the schema and the CLI help.

A user-facing text says what the label stood for: "the published guides" (the ``runs[]`` labels in
plan/simulate JSON stay ``guide:``), "the twin", "the real Pulumi engine", "capacity" (the real
Karpenter), the setting or goal itself rather than the issue that asked for it. An upstream project's
issue is cited as ``owner/repo#N`` (NVIDIA/dcgm-exporter#500), which no pattern here matches.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# label -> pattern. Case-insensitive except where a capital is the tell.
INTERNAL: dict[str, re.Pattern[str]] = {
    # "issue 22", "issue #24", "issues 22 and 24"; not "owner/repo#500" nor "an issue".
    "issue number": re.compile(r"\bissues? #?\d+", re.IGNORECASE),
    # "(issue 32 §5)", "§3": the tracker's section signs.
    "section sign": re.compile(r"§\s*\d"),
    # "sec23b", "sec7": the review's section tags.
    "section tag": re.compile(r"\bsec\d+[a-z]?\b", re.IGNORECASE),
    # "seed guides", "seed guide's"; the vendored folder's path (reference/upstream/seed-guides/)
    # is a path, not prose, and is allowed.
    "seed guides": re.compile(r"(?<![/\w-])seed[ _-]guides?\b(?!/)", re.IGNORECASE),
    # The project's design notes, which live outside the repository: say what they decided.
    "design notes": re.compile(r"\bDESIGN\.md\b"),
    # "Tier 0", "Tiers 1 and 2": the verification levels' numbers.
    "tier number": re.compile(r"\bTiers? \d\b"),
}


class Finding(NamedTuple):
    label: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.label}: {self.text!r}"


def findings(text: str) -> list[Finding]:
    """Every internal label in ``text``, with its (1-based) line and the words matched."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for label, pattern in INTERNAL.items():
            found.extend(Finding(label, number, m.group(0)) for m in pattern.finditer(line))
    return found
