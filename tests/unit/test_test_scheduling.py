"""How `make test` shares the suite between its processes (tests/conftest.py): what must not run at
once is kept on one process, and a module's tests stay together."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.conftest import LONG_FIRST, SHARED_GROUPS, pytest_xdist_make_scheduler, schedule_group

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
    assert schedule_group("tests/unit/test_stackfile.py::test_a[x]") == "tests/unit/test_stackfile.py"


def _config(dist: str) -> Any:
    values = {"dist": dist, "tx": ["2*popen"]}
    return SimpleNamespace(getvalue=values.__getitem__, option=SimpleNamespace(loadscopereorder=True))


def test_the_suites_scheduler_hands_out_groups_in_the_long_first_order() -> None:
    config = _config("load")  # what `-n 2` alone asks for
    scheduler = pytest_xdist_make_scheduler(config, None)
    # xdist's scheduler makes its units with this split, in the order the workers collected
    # (the workers sort by LONG_FIRST; the scheduler keeps it rather than the most tests first)
    assert not config.option.loadscopereorder
    split = scheduler._split_scope
    assert split("tests/engine/test_engine_dev_stack.py::t") == split("tests/engine/test_engine_random.py::t")
    assert split("tests/twin/test_loop.py::t[dev]") == split("tests/twin/test_metrics_programs.py::t")
    assert split("tests/unit/test_stackfile.py::a") == split("tests/unit/test_stackfile.py::b[1]")
    assert split("tests/unit/test_stackfile.py::a") != split("tests/unit/test_cli_help.py::a")
    # another --dist asked for on the command line is xdist's own
    assert pytest_xdist_make_scheduler(_config("loadfile"), None) is None


def test_every_long_first_prefix_names_a_group_or_a_module_that_exists() -> None:
    files = _test_files()
    for prefix in LONG_FIRST:
        assert prefix in SHARED_GROUPS or any(f.startswith(prefix) for f in files), prefix
