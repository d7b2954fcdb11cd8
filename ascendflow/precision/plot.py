"""Histogram of per-token Δ logprob (candidate − reference) as a PNG."""

from __future__ import annotations

from pathlib import Path


def dlogprob_histogram(deltas: list[float], title: str, path: Path) -> Path:
    """Write a histogram of ``deltas`` (nats) to ``path`` (PNG, matplotlib Agg backend) and return ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(deltas, bins=60, color="#3b6ea5")
    ax.set_yscale("log")
    ax.set_xlabel("Δ logprob of the reference token, candidate − reference (nats)")
    ax.set_ylabel("tokens")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
