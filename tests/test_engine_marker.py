"""The engine tier is a folder: every test file that starts a real engine, tracking server or rehearsal lives in
``tests/engine/``, which ``tests/conftest.py`` marks ``engine`` (so ``-m "not engine"`` and ``--ignore=tests/engine``
select the same tests), and no test elsewhere carries the marker.

A cheap static check of each test file's source: one that passes ``run.mode=serve``/``attach``/``rehearse`` or
``tracking=server`` as an argument starts slow real processes, so it belongs to the engine tier.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import CLI_TIER, EARLY_LANE, ENGINE_TIER, REPO, tier

TESTS = Path(__file__).resolve().parent
STARTS = re.compile(r"""["'](run\.mode=(serve|attach|rehearse)|tracking=server)["']""")
MARKED = re.compile(r"pytest\.mark\.(engine|e2e)\b")
#: Files that name those arguments only for runs that are refused before anything starts.
STARTS_NOTHING = {"test_bad_inputs.py", "test_refused_before_start.py", "test_size_bounds.py"}


def _outside_engine_tier() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if ENGINE_TIER not in p.parents)


def test_files_that_start_engines_live_in_the_engine_tier():
    outside = [str(p.relative_to(TESTS)) for p in _outside_engine_tier()
               if p.name not in STARTS_NOTHING and STARTS.search(p.read_text())]
    assert outside == [], f"these test files start an engine but live outside tests/engine/: {outside}"


def test_no_test_outside_the_engine_tier_is_marked_engine():
    marked = [str(p.relative_to(TESTS)) for p in _outside_engine_tier()
              if p != Path(__file__).resolve() and MARKED.search(p.read_text())]
    assert marked == [], f"engine-marked tests outside tests/engine/ (move them there): {marked}"


def test_the_folder_is_the_tier():
    assert tier(ENGINE_TIER / "faults" / "test_x.py", set()) == "engine"
    assert tier(CLI_TIER / "test_x.py", set()) == "cli"
    assert tier(TESTS / "compiler" / "test_x.py", set()) == "unit"
    with pytest.raises(pytest.UsageError) as refused:
        tier(TESTS / "compiler" / "test_x.py", {"e2e"})
    assert str(refused.value) == ("tests/compiler/test_x.py: marked engine outside tests/engine/: an engine test lives "
                                  "in tests/engine/ (the folder marks it); move the file there, or split off its "
                                  "engine tests")


def test_every_early_lane_file_exists():
    missing = sorted(name for name in EARLY_LANE if not (ENGINE_TIER / name).is_file())
    assert missing == [], f"EARLY_LANE names files that are not under {ENGINE_TIER.relative_to(REPO)}: {missing}"
