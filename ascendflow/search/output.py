"""What a search writes: the table (rich), the Pareto front (PNG), ``candidates.json`` and the top-k recipes, each with
its plan and launch scripts."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml
from rich.table import Table
from rich.text import Text

from ascendflow.compiler import Plan
from ascendflow.runner.artifacts import write_plan
from ascendflow.schema.spec import RunSpec
from ascendflow.search.rank import pareto_front


def _f(value: Any, digits: int = 1) -> str:
    return "—" if value is None else f"{float(value):.{digits}f}"


def interval_text(row: Mapping[str, Any], key: str = "tps_per_device") -> str:
    """``93.6 [81.2, 104.5]`` with the row's interval, else the figure alone."""
    text = _f(row.get(key))
    if key == "tps_per_device" and row.get("tps_low") is not None:
        text += f" [{row['tps_low']:.1f}, {row['tps_high']:.1f}]"
    return text


def table(rows: Sequence[Mapping[str, Any]], title: str) -> Table:
    """The ranked table: rank (``=1`` a tie with the best), layout, devices, capacity req/s, tokens/s per device
    (with its interval), tokens/s per user, p99 TTFT/TPOT at capacity, margin to the SLO."""
    t = Table(title=title, show_lines=False)
    for name in ("rank", "layout", "devices", "capacity req/s", "tok/s/device", "tok/s/user", "p99 TTFT ms",
                 "p99 TPOT ms", "margin %"):
        t.add_column(name, justify="left" if name == "layout" else "right")
    for r in rows:
        rank = ("=" if r.get("tie") else "") + str(r.get("rank", "—"))
        t.add_row(rank, Text(r["label"]), str(r["devices"]), _f(r.get("capacity_rps"), 2), interval_text(r),
                  _f(r.get("tps_per_user")), _f(r.get("p99_ttft_ms"), 0), _f(r.get("p99_tpot_ms")),
                  _f(r.get("margin_percent")))
    return t


def pareto_png(rows: Sequence[Mapping[str, Any]], path: Path, title: str) -> Path:
    """Tokens/s per device against tokens/s per user, co-located and PD in two colours, the front joined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for kind, colour, name in (("colocated", "tab:blue", "co-located"), ("pd", "tab:orange", "PD")):
        pts = [(r["tps_per_user"], r["tps_per_device"]) for r in rows if r["kind"] == kind]
        if pts:
            ax.scatter(*zip(*pts), s=14, color=colour, alpha=0.7, label=name)
    front = [rows[i] for i in pareto_front(rows)]
    if front:
        pts = sorted((r["tps_per_user"], r["tps_per_device"]) for r in front)
        ax.plot(*zip(*pts), "-", color="tab:red", label="Pareto front")
    ax.set_xlabel("output tokens/s per user (1000 / median TPOT)")
    ax.set_ylabel("output tokens/s per device at the SLO")
    ax.set_title(textwrap.fill(title, 90), fontsize=8)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def candidates_json(rows: Sequence[Mapping[str, Any]], path: Path, extra: Mapping[str, Any]) -> Path:
    """Every candidate's row (without private fields) and the search's tallies."""
    clean = [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
    path.write_text(json.dumps({**extra, "candidates": clean}, indent=1, default=str))
    return path


#: Sections a recipe carries in full (the candidate's values); the others come from the named options.
RECIPE_SECTIONS = ("parallel", "engine", "graph", "workload", "slo", "ascend")


def recipe_text(spec: RunSpec, name: str, why: list[str]) -> str:
    """A Hydra recipe (``recipes/recipe/<name>.yaml`` format, ``# @package _global_``) of the candidate ``spec``:
    the hardware, model, quantization and PD options by name, the sections of :data:`RECIPE_SECTIONS` (and ``pd``)
    in full, and a header saying why it was chosen and how to run it."""
    data = spec.model_dump(mode="json")
    body: dict[str, Any] = {"defaults": [{"override /hardware": spec.hardware.name},
                                         {"override /model": spec.model.name},
                                         {"override /quantization": spec.quantization.name},
                                         {"override /pd": "mooncake_1p1d" if spec.pd.enabled else "none"}]}
    for key in RECIPE_SECTIONS:
        body[key] = data[key]
    body["engine"] = {k: v for k, v in body["engine"].items() if v is not None}
    if spec.pd.enabled:
        body["pd"] = data["pd"]
    header = ["# @package _global_", f"# {name}: chosen by run.mode=search (ascendflow, docs/search.md).",
              *[f"# {line}" for line in why],
              f"#   python -m ascendflow +recipe={name} run.mode=plan     # with this file in recipes/recipe/",
              f"# Hardware: {spec.parallel.nodes} × {spec.hardware.name}; model {spec.model.id}, "
              f"quantization {spec.quantization.name}."]
    return "\n".join(header) + "\n" + yaml.safe_dump(body, sort_keys=False)


def write_recipe(spec: RunSpec, plan: Plan, name: str, why: list[str], out: Path) -> Path:
    """``out/recipe/<name>.yaml`` plus ``out/<name>/plan.json`` and its launch scripts (per node; PD: per role and
    the proxy)."""
    (out / "recipe").mkdir(parents=True, exist_ok=True)
    path = out / "recipe" / f"{name}.yaml"
    path.write_text(recipe_text(spec, name, why))
    write_plan(plan, out / name)
    return path
