"""The front door and the documentation site (issue 16): the README stays short, every page its capabilities table
links exists, and the MkDocs site builds with ``--strict`` (a broken link, a missing anchor or a nav entry without
its page fails). A real ``mkdocs build`` in a subprocess, about 1 s."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The front door's budget in lines (issue 16: "README.md <= 200 lines").
README_MAX_LINES = 200


def test_mkdocs_builds_strict(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert (site / "index.html").is_file()
    for page in ("configuration", "engine_rules", "faults", "plan", "serve", "sweeps"):
        assert (site / page / "index.html").is_file(), page


def test_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"


def test_every_page_the_capabilities_table_links_exists_and_is_in_the_nav():
    text = (ROOT / "README.md").read_text()
    table = text[text.index("| capability |"):]
    table = table[: table.index("\n\n")]
    pages = re.findall(r"\]\((docs/[\w/.-]+\.md)\)", table)
    assert len(pages) >= 10, pages
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in pages:
        assert (ROOT / page).is_file(), f"README links {page}, which does not exist"
        assert f": {page.removeprefix('docs/')}" in nav, f"{page} is not in mkdocs.yml's nav"
