"""Every test file that starts a real engine, tracking server or rehearsal carries the ``engine`` marker.

A cheap static check of each test file's source: one that passes ``run.mode=serve``/``attach``/``rehearse`` or
``tracking=server`` as an argument starts slow real processes, so ``-m "not engine"`` must leave it out.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
STARTS = re.compile(r"""["'](run\.mode=(serve|attach|rehearse)|tracking=server)["']""")
MARKED = re.compile(r"pytest\.mark\.(engine|e2e)\b")
#: Files that name those arguments only for runs that are refused before anything starts.
STARTS_NOTHING = {"test_bad_inputs.py", "test_refused_before_start.py", "test_size_bounds.py"}


def test_files_that_start_engines_carry_the_engine_marker():
    unmarked = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py")
                      if p.name not in STARTS_NOTHING and STARTS.search(p.read_text()) and not MARKED.search(p.read_text()))
    assert unmarked == [], f"these test files start an engine but lack @pytest.mark.engine: {unmarked}"
