"""Order priced candidates: goodput per device at the SLO, ties by interval overlap, the Pareto front, the nearest SLO
any candidate meets. Pure."""

from __future__ import annotations

from typing import Any, Mapping, Sequence


def margin_percent(row: Mapping[str, Any], targets: Mapping[str, float]) -> float | None:
    """Smallest ``(target − value) / target`` in percent over the SLO's targets at capacity (``None``: no point)."""
    values = [(t - float(row[k])) / t * 100 for k, t in targets.items() if row.get(k) is not None]
    return min(values) if values else None


def rank_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rank the ``status == "ranked"`` rows by ``tps_per_device`` (descending; ties broken by p99 TPOT, then label)
    and mark ties with the best: a row whose interval ``[tps_low, tps_high]`` reaches the best's low end
    (``tps_high >= best tps_low``) is ``tie`` and shares rank 1; without intervals only an equal figure ties.

    Returns:
        The ranked rows, best first, each with ``rank`` and ``tie`` set (the input rows are updated).
    """
    ranked = sorted((r for r in rows if r["status"] == "ranked"),
                    key=lambda r: (-r["tps_per_device"], r.get("p99_tpot_ms") or 0.0, r["label"]))
    if not ranked:
        return []
    best = ranked[0]
    best_low = best.get("tps_low", best["tps_per_device"])
    for i, r in enumerate(ranked):
        r["tie"] = i > 0 and r.get("tps_high", r["tps_per_device"]) >= best_low
        r["rank"] = 1 if i == 0 or r["tie"] else i + 1
    return ranked


def pareto_front(rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices (into ``rows``) of the rows no other row beats on both tokens/s per device and tokens/s per user."""
    front = []
    for i, r in enumerate(rows):
        if not any(o["tps_per_device"] >= r["tps_per_device"] and o["tps_per_user"] >= r["tps_per_user"]
                   and (o["tps_per_device"], o["tps_per_user"]) != (r["tps_per_device"], r["tps_per_user"])
                   for o in rows):
            front.append(i)
    return front


def nearest_slo(rows: Sequence[Mapping[str, Any]], targets: Mapping[str, float]) -> dict[str, float]:
    """The loosest SLO any single candidate meets at its lowest load: per candidate the p99 TTFT/TPOT at the lowest
    load tried (``lowest``), rounded up; the candidate with the smallest worst ratio to the targets wins."""
    best, best_ratio = {}, None
    for r in rows:
        low = r.get("lowest") or {}
        if not all(low.get(k) for k in targets):
            continue
        ratio = max(float(low[k]) / t for k, t in targets.items())
        if best_ratio is None or ratio < best_ratio:
            best_ratio = ratio
            best = {k: float(low[k]) for k in targets}
    return best
