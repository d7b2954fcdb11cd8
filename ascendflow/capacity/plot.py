"""Pictures of a capacity search: one config's load curve, and the sweep's capacity-vs-latency Pareto front
(matplotlib, Agg backend: files only, no display)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_load_curve(capacity: Mapping[str, Any], path: Path, title: str) -> Path:
    """p99 TTFT and p99 TPOT (ms) against the searched load, with the SLO lines and the capacity marked.

    Args:
        capacity: the ``capacity`` record of :func:`ascendflow.runner.capacity_run.serve_and_search`.
        path: PNG to write.
        title: plot title (the run's name).
    """
    plt = _pyplot()
    rows = capacity["points"]["points"]
    xs = [r["load"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key in zip(axes, ("p99_ttft_ms", "p99_tpot_ms")):
        ys = [r.get(key) or 0 for r in rows]
        ax.plot(xs, ys, "-", color="0.6")
        ax.scatter(xs, ys, c=["tab:green" if r["meets_slo"] else "tab:red" for r in rows], zorder=3)
        if key in capacity["targets"]:
            ax.axhline(capacity["targets"][key], color="tab:red", linestyle="--", label=f"SLO {key}")
        if capacity["slo_met"]:
            ax.axvline(capacity["capacity_load"], color="tab:green", linestyle=":",
                       label=f"capacity {capacity['capacity_rps']:.2f} req/s")
        ax.set_xlabel(capacity["variable"])
        ax.set_ylabel(f"{key} (ms)")
        ax.legend(fontsize=8)
    fig.suptitle(title[:120], fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_pareto(rows: Sequence[Mapping[str, Any]], path: Path, title: str) -> Path:
    """Capacity (req/s at the SLO) against p99 TTFT at that load, one point per server config; the Pareto front
    (highest capacity for its latency) joined by a line.

    Args:
        rows: ``{"name", "capacity_rps", "capacity_p99_ttft_ms", "slo_met", "pareto"}`` per config.
        path: PNG to write.
        title: plot title.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    met = [r for r in rows if r["slo_met"]]
    ax.scatter([r["capacity_p99_ttft_ms"] for r in met], [r["capacity_rps"] for r in met], color="tab:blue")
    for r in met:
        ax.annotate(r["name"][:40], (r["capacity_p99_ttft_ms"], r["capacity_rps"]), fontsize=7)
    front = sorted((r for r in met if r["pareto"]), key=lambda r: r["capacity_p99_ttft_ms"])
    ax.plot([r["capacity_p99_ttft_ms"] for r in front], [r["capacity_rps"] for r in front], "-", color="tab:orange",
            label="Pareto front")
    missed = [r["name"] for r in rows if not r["slo_met"]]
    if missed:
        ax.text(0.01, 0.01, "SLO not met: " + "; ".join(m[:30] for m in missed)[:200], transform=ax.transAxes,
                fontsize=7, color="tab:red")
    ax.set_xlabel("p99 TTFT at capacity (ms)")
    ax.set_ylabel("capacity at SLO (req/s)")
    ax.set_title(title[:100], fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
