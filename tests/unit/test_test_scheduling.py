"""How `make test` shares the suite between its processes (tests/conftest.py): what must not run at
once is kept on one process, and a module's tests stay together."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import LONG_FIRST, SHARED_GROUPS, schedule_group

ROOT = Path(__file__).resolve().parents[2]
# What builds the loop's host network (twin/netns.py's bridge, removed by prefix when one starts):
# the loop's entry points and the bridge itself.
HOST_NETWORK = re.compile(r"run_loop\(|netns\.bridge\(|\"twin\", \"loop\"")


def _test_files() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py"))


def test_every_module_that_builds_the_host_network_runs_in_one_group() -> None:
    users = [f for f in _test_files() if HOST_NETWORK.search((ROOT / f).read_text(encoding="utf-8"))]
    assert "tests/twin/test_loop.py" in users and "tests/twin/test_metrics_programs.py" in users
    assert {schedule_group(f) for f in users} == {"host-network"}, users


def test_shared_folders_are_one_group_and_other_modules_their_own() -> None:
    engine = [f for f in _test_files() if f.startswith("tests/engine/")]
    package = [f for f in _test_files() if f.startswith("tests/package/")]
    assert len(engine) > 1 and {schedule_group(f) for f in engine} == {"engine"}
    assert len(package) > 1 and {schedule_group(f) for f in package} == {"package"}
    assert schedule_group("tests/unit/test_stackfile.py") == "tests/unit/test_stackfile.py"


def test_every_long_first_prefix_names_a_group_or_a_module_that_exists() -> None:
    files = _test_files()
    for prefix in LONG_FIRST:
        assert prefix in SHARED_GROUPS or any(f.startswith(prefix) for f in files), prefix
