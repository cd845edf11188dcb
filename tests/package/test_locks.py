"""Each venv installs a hash-locked transitive set of its declared pins (tools/lock_requirements.py):
a declared pin changed without relocking, or a lock entry without a hash, fails here. Offline: the
lock is read, not re-resolved."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from lock_requirements import LOCKS, declared_pins, header, locked_pins  # noqa: E402


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_the_lock_holds_every_declared_pin_at_its_version(lock: str) -> None:
    locked = locked_pins(lock)
    declared = declared_pins(*LOCKS[lock])
    assert declared, f"{LOCKS[lock]} declare no pins"
    moved = {name: (version, locked.get(name, ("missing", 0))[0]) for name, version in declared.items()}
    stale = {name: pair for name, pair in moved.items() if pair[0] != pair[1]}
    assert not stale, f"{lock} is stale (declared, locked): {stale}; run python tools/lock_requirements.py"


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_locked_distribution_has_a_hash(lock: str) -> None:
    text = (ROOT / lock).read_text()
    assert text.startswith(header(LOCKS[lock])), f"{lock} was not written by tools/lock_requirements.py"
    unhashed = [name for name, (_, hashes) in locked_pins(lock).items() if hashes == 0]
    assert not unhashed, f"{lock}: entries without a hash: {unhashed}"
    assert "-e " not in text and "-r " not in text


def test_the_checker_reads_versions_and_hashes() -> None:
    locked = locked_pins("requirements-lock.txt")
    assert locked["pyyaml"][0] == declared_pins("requirements-pins.txt")["pyyaml"]
    assert all(hashes >= 1 for _, hashes in locked.values())


def test_make_venv_installs_the_lock_with_hashes_then_the_project_alone() -> None:
    recipe = (ROOT / "Makefile").read_text()
    assert "--require-hashes -r requirements-lock.txt" in recipe
    assert "--no-deps --no-build-isolation -e ." in recipe
    for lock in ("requirements-checkov.txt", "requirements-docs.txt"):
        assert f"--require-hashes -r {lock}" in recipe
