"""Issue 25 row 11: the docs drifted from each other and from what the tools print.

Before: the README and docs/index.md gave different suite times (55 vs 40 minutes); docs/configuration.md had an
orphan sentence fragment after the recipes table and its modes list lacked ``attach``; docs/upgrade.md's example
lacked the ``mla_heads_per_rank`` row the upgrade advisor prints.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import typing

from ascendflow.schema.run import RunOptions
from tests.conftest import REPO

DOCS = REPO / "docs"


def _minutes(text: str, pattern: str) -> list[int]:
    return [int(m) for m in re.findall(pattern, text, flags=re.S)]


def test_readme_and_the_docs_index_give_the_same_suite_times():
    """One place gives the suite's time (the README); docs/index.md repeats the README's and CI's test command and
    gives no time of its own, so the two cannot drift apart again."""
    readme = (REPO / "README.md").read_text()
    index = (DOCS / "index.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    (command,) = re.findall(r"^(python -m pytest -q -n \S+ .*)$", readme, flags=re.M)
    assert command in ci.splitlines() and f"{command}  # the whole suite, as CI runs it" in index
    tests_section = index[index.index("## Tests"):]
    assert _minutes(tests_section, r"about (\d+) minutes") == []

def test_configuration_has_no_paragraph_that_starts_mid_sentence():
    """A paragraph after a table or a heading starts with a capital, a backtick, a link or markup, never in the middle
    of a sentence (the orphan: "activation, non-torch, graph, KV, free) and the KV capacity line ...")."""
    text = (DOCS / "configuration.md").read_text()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    starts = [p.lstrip().split("\n", 1)[0] for p in re.split(r"\n\s*\n", text) if p.strip()]
    assert [s for s in starts if re.match(r"[a-z]", s) and not s.startswith("ascendflow ")] == []


def test_the_modes_list_names_every_run_mode():
    text = (DOCS / "configuration.md").read_text()
    listed = re.search(r"\| `run` \| `default` \| `mode` \(([^)]*)\)", text).group(1)
    modes = typing.get_args(RunOptions.model_fields["mode"].annotation)
    assert re.findall(r"`(\w+)`", listed) == list(modes)


def test_the_upgrade_example_is_what_the_advisor_prints():
    text = (DOCS / "upgrade.md").read_text()
    shown = text.split("```text\n", 1)[1].split("```", 1)[0]
    cmd = ("--to 0.21.0rc1 +recipe=deepseek_r1_a3_tp4dp4 hardware.software=vllm-ascend-0.20.2rc1").split()
    env = {**os.environ, "COLUMNS": "120", "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-m", "ascendflow.upgrade", *cmd], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout == shown
    assert "│ rules    │ mla_heads_per_rank        │ power_of_two │ any          │" in shown
