"""`.ci/run` keeps CI within its 90 minutes on a machine where the twin's programs are not built
yet: every build that may be missing runs in a slot bounded by one deadline, which leaves the docs
and the suite their time."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def _slot(seconds: int, cap: int) -> int:
    """What `.ci/run`'s slot function answers ``seconds`` after the script began."""
    definitions = "\n".join(line for line in CI.splitlines() if line.startswith(("DEADLINE_S=", "slot()")))
    script = f"{definitions}\nSECONDS={seconds}\nslot {cap}\n"
    return int(subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout)


def test_every_timeout_takes_what_the_deadline_leaves() -> None:
    timeouts = re.findall(r"timeout (\"\$\(slot \d+\)\"|\S+)", CI)
    assert len(timeouts) >= 6
    assert all(re.fullmatch(r'"\$\(slot \d+\)"', t) for t in timeouts), timeouts
    # and a slot of a minute or less is not started
    assert CI.count('-gt 60 ] && timeout "$(slot') == len(timeouts)


def test_a_slot_is_its_cap_or_what_is_left_before_the_deadline() -> None:
    deadline = int(re.search(r"^DEADLINE_S=(\d+)$", CI, re.M).group(1))
    # 90 minutes less the suite's ~36 with every program built (README) and a margin.
    assert deadline + 36 * 60 <= 85 * 60
    assert _slot(0, 900) == 900
    assert _slot(deadline - 300, 900) == 300
    assert _slot(deadline + 10, 900) <= 0
