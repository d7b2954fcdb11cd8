"""Which ranked candidates ``search.measure_top`` serves, and what their measurements say about the ranking. Pure: the
rows come in as data, nothing is served here (:mod:`ascendflow.search.measure` serves them).

The picks are the top ``K`` of the ranking and, as a control, ``search.measure_random`` others drawn at random
(seeded) from the rest of the ranking: measuring only the top picks cannot show that the order held, a control from
lower down can (issue 29 item 4). Only co-located candidates are picked: a PD deployment is not served here
(per-role serving is not built, docs/pd.md).
"""

from __future__ import annotations

import math
import random
from typing import Any, Mapping, Sequence

from ascendflow.schema.errors import ConfigError


def measurable(ranked: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The ranked rows that can be served here, best first: co-located candidates (``kind == "colocated"``)."""
    return [r for r in ranked if r["kind"] == "colocated"]


def pick(ranked: Sequence[dict[str, Any]], feasible: int, top: int, control: int | None,
         seed: int) -> list[tuple[dict[str, Any], str]]:
    """The candidates to measure: ``(row, "top")`` for the first ``top`` measurable rows, then ``(row, "random")``
    for ``control`` others drawn without replacement from the rest of the ranking (``random.Random(seed).sample``
    over the rest in rank order: the same seed picks the same rows). ``control`` ``None``: as many as ``top``, or
    fewer when fewer are left.

    Args:
        ranked: the ranked rows, best first (:func:`ascendflow.search.rank.rank_rows`).
        feasible: the number of feasible candidates (for the refusal's words).
        top, control, seed: ``search.measure_top``, ``search.measure_random``, ``search.measure_seed``.

    Raises:
        ConfigError: ``top`` above the measurable rows; an explicit ``control`` above the rows left after the top.
    """
    pool = measurable(ranked)
    if top > len(pool):
        fix = f"set search.measure_top={len(pool)} or less" if pool else "drop search.measure_top"
        raise ConfigError("search.measure_top", top, f"exceeds the {len(pool)} ranked co-located candidates that "
                                                     f"can be served here ({feasible} feasible); {fix}")
    rest = list(pool[top:])
    if control is None:
        control = min(top, len(rest))
    elif control > len(rest):
        raise ConfigError("search.measure_random", control,
                          f"only {len(rest)} ranked co-located candidates are left below the top {top}; set "
                          f"search.measure_random={len(rest)} or less")
    chosen = set(map(id, random.Random(seed).sample(rest, control)))
    return [(r, "top") for r in pool[:top]] + [(r, "random") for r in rest if id(r) in chosen]


def average_ranks(values: Sequence[float]) -> list[float]:
    """Ranks 1..n of ``values`` (ascending), tied values sharing the mean of their ranks (``scipy.stats.rankdata``,
    ``method="average"``)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation of ``x`` and ``y``: the Pearson correlation of their average ranks (the definition
    ``scipy.stats.spearmanr`` computes). ``None`` when undefined: fewer than two pairs, or one side all equal."""
    if len(x) != len(y) or len(x) < 2:
        return None
    rx, ry = average_ranks(x), average_ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def verdict(picks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the picks' measurements say about the ranking.

    Args:
        picks: every pick's row, measured or not, each with ``rank``, ``label``, ``rps_per_device`` (predicted,
            req/s per device); a measured one also has ``measured_rps_per_device`` (req/s per device at the SLO; 0
            when no load met it), one whose engine failed ``measure_error``.

    Returns:
        ``{"n"}`` (measured picks), ``picks``, ``failed`` (picks with ``measure_error``), ``rho`` (Spearman's rank
        correlation of predicted against measured capacity per device over the measured picks, ``None`` when
        undefined), ``predicted_best`` (the pick ranked best by the search, measured or not), ``measured_best`` (the
        measured pick with the highest measured capacity; ties: the better ranked; ``None`` when none was measured),
        ``held`` (they are the same row; ``None`` when the predicted best was not measured: nothing says whether its
        order held, new-user trial of 2026-12-03, where rank 2 was reported as "the predicted best").
    """
    rows = list(picks)
    done = [r for r in rows if r.get("measured_rps_per_device") is not None]
    failed = sum(1 for r in rows if r.get("measure_error"))
    if not rows:
        return {"n": 0, "picks": 0, "failed": 0, "rho": None, "predicted_best": None, "measured_best": None,
                "held": None}
    rho = spearman([float(r["rps_per_device"]) for r in done], [float(r["measured_rps_per_device"]) for r in done])
    predicted_best = min(rows, key=lambda r: (r["rank"], -float(r["rps_per_device"])))
    measured_best = max(done, key=lambda r: (float(r["measured_rps_per_device"]), -r["rank"])) if done else None
    held = (predicted_best is measured_best) if any(r is predicted_best for r in done) else None
    return {"n": len(done), "picks": len(rows), "failed": failed, "rho": rho, "predicted_best": predicted_best,
            "measured_best": measured_best, "held": held}


__all__ = ["average_ranks", "measurable", "pick", "spearman", "verdict"]
