"""`.ci/run` keeps CI within its 90 minutes on a machine where the twin's programs are not built
yet: every build that may be missing runs in a slot bounded by one deadline, which leaves the docs
and the suite their time."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def _run(seconds: int, call: str) -> subprocess.CompletedProcess[str]:
    """``call`` run after `.ci/run`'s deadline functions, ``seconds`` after the script began."""
    definitions = "\n".join(
        line for line in CI.splitlines() if line.startswith(("DEADLINE_S=", "slot()", "bounded()"))
    )
    script = f"{definitions}\nSECONDS={seconds}\n{call}\n"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)


def _slot(seconds: int, cap: int) -> int:
    """What `.ci/run`'s slot function answers ``seconds`` after the script began."""
    return int(_run(seconds, f"slot {cap}").stdout)


def test_every_timeout_takes_what_the_deadline_leaves() -> None:
    commands = [line for line in CI.splitlines() if not line.lstrip().startswith("#")]
    # the one timeout is bounded()'s own; every build after the plain twin's goes through it
    assert [c for c in commands if "timeout" in c] == [next(c for c in commands if c.startswith("bounded()"))]
    builds = [c for c in commands if "twin/build" in c and not c.startswith("twin/build.sh")]
    assert len(builds) >= 6
    assert all(re.search(r"bounded \d+ ", c) for c in builds), builds
    # and a slot of a minute or less is not started
    ran = "echo started"
    assert _run(0, f"bounded 900 {ran}").stdout.strip() == "started"
    late = _run(int(re.search(r"^DEADLINE_S=(\d+)$", CI, re.M).group(1)) - 30, f"bounded 900 {ran}")
    assert late.returncode != 0 and late.stdout == ""


def test_a_slot_is_its_cap_or_what_is_left_before_the_deadline() -> None:
    deadline = int(re.search(r"^DEADLINE_S=(\d+)$", CI, re.M).group(1))
    # 90 minutes less the suite's ~36 with every program built (README) and a margin.
    assert deadline + 36 * 60 <= 85 * 60
    assert _slot(0, 900) == 900
    assert _slot(deadline - 300, 900) == 300
    assert _slot(deadline + 10, 900) <= 0
