"""Writes the plan's files into the run directory, atomically (no half-written plan)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ascendflow.compiler import Plan, launch_scripts


def write_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace`` (readers never see a partial file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    if mode is not None:
        tmp.chmod(mode)
    os.replace(tmp, path)


def write_plan(plan: Plan, run_dir: Path) -> dict[str, Path]:
    """Write ``plan.json`` and ``launch/node<k>.sh`` under ``run_dir``.

    Returns:
        ``{"plan": path, "node0.sh": path, ...}``.
    """
    written = {}
    for name, text in launch_scripts(plan).items():
        written[name] = run_dir / "launch" / name
        write_atomic(written[name], text, mode=0o755)
    written["plan"] = run_dir / "plan.json"
    write_atomic(written["plan"], plan.to_json() + "\n")
    return written


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as indented JSON, atomically."""
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
