"""The NPU measurement corpus: public vllm-ascend measurements the NPU step model is fitted to and scored on.

``ci_rows.json``: written by ``scripts/import_ci_config.py`` from vllm-ascend's nightly/weekly CI configs (every
performance baseline at every commit where it changed, ``path@commit`` cited; rows ascendflow cannot express are kept
under ``unexpressible`` with the missing knob). ``pr_rows.yaml``: curated rows from PR descriptions, issues and
tutorials. Neither holds a kept-out source (``scripts/import_ci_config.py`` ``KEPT_OUT``): those are the check.

:func:`fit_rows` is I/O (reads the two files); every row it returns has ``id``, ``family`` (the grouping key of
leave-one-family-out), ``citation``, ``measured`` ({metric: value}) and ``overrides`` (``python -m ascendflow``
arguments).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

CORPUS_DIR = Path(__file__).parent
CI_ROWS = CORPUS_DIR / "ci_rows.json"
PR_ROWS = CORPUS_DIR / "pr_rows.yaml"


def _family(overrides: str) -> str:
    m = re.search(r"\bmodel=(\S+)", overrides)
    return m[1] if m else "?"


def fit_rows() -> list[dict[str, Any]]:
    """Every expressible corpus row (CI rows first, then the curated ones), as ``{"id", "family", "kind",
    "citation", "measured", "overrides", "hardware"}``; ``family`` is the ascendflow model option (one config
    family per model architecture: rows of the same model are left out together)."""
    ci = json.loads(CI_ROWS.read_text())
    rows = []
    for r in ci["rows"]:
        ov = " ".join(r["overrides"])
        rows.append({"id": r["id"], "family": _family(ov), "kind": "CI baseline", "citation": r["citation"],
                     "measured": {r["metric"]: r["value"]}, "overrides": ov, "date": r["date"],
                     "proxy": r.get("proxy")})
    for r in yaml.safe_load(PR_ROWS.read_text())["rows"]:
        rows.append({**r, "family": _family(r["overrides"])})
    return rows


def corpus_counts() -> dict[str, Any]:
    """Rows, models and hardware of the whole corpus (expressible and not)."""
    ci = json.loads(CI_ROWS.read_text())
    pr = yaml.safe_load(PR_ROWS.read_text())["rows"]
    all_ci = ci["rows"] + ci["unexpressible"]
    hw = {r["hardware"] for r in all_ci} | {m[1] for r in pr if (m := re.search(r"hardware=(\S+)", r["overrides"]))}
    models = {r["family"] for r in all_ci} | {_family(r["overrides"]) for r in pr}
    return {"rows": len(all_ci) + len(pr), "ci_rows": len(all_ci), "ci_expressible": len(ci["rows"]),
            "pr_rows": len(pr), "models": len(models), "hardware": sorted(h for h in hw if h)}
