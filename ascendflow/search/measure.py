"""``search.measure_top``: serve each picked candidate here and measure its capacity at the SLO with the capacity
search of ``run.mode=capacity`` (:func:`ascendflow.runner.capacity_run.serve_and_search`: one engine start, load
points until the capacity is bracketed), then say whether the predicted order held (:func:`ascendflow.search.pick.
verdict`). Each candidate's files (``engine.log``, ``capacity/points.json``, ``capacity/point_<n>.json``) are in
``search/measured/<n>_<top|random>_<layout>/`` of the run directory."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rich.markup import escape

from ascendflow.compiler import Plan
from ascendflow.runner.capacity_run import serve_and_search
from ascendflow.runner.contention import findings
from ascendflow.runner.server import EngineStartError
from ascendflow.schema.spec import RunSpec
from ascendflow.search.pick import verdict


def candidate_dir(out: Path, n: int, why: str, row: Mapping[str, Any]) -> Path:
    """``out/<n>_<why>_<label as a file name>``."""
    return out / f"{n}_{why}_{re.sub(r'[^a-z0-9]+', '_', row['label'].lower()).strip('_')}"


def measure(picks: Sequence[tuple[dict[str, Any], str]], specs: Mapping[int, RunSpec], plans: Mapping[int, Plan],
            out: Path, status: Callable[[str], None], secrets: Mapping[str, str]) -> tuple[list[dict], list[str]]:
    """Serve and capacity-search each pick in turn (one engine at a time); the rows get the measured figures.

    Each measured row gains ``measure`` (``top``/``random``), ``measured_capacity_rps`` (req/s of the deployment:
    one instance's measured req/s at the SLO × its replicas), ``measured_rps_per_device``, ``measured_capacity_load``,
    ``measured_p99_ttft_ms`` / ``measured_p99_tpot_ms`` at that load, ``measured_slo_met``, ``measured_load_points``
    and ``measured_dir``. A candidate whose engine fails gets ``measure_error`` (its first line) instead and the
    others are still measured.

    Returns:
        ``(measured rows, warning lines)``: the lines (rich markup, labels escaped) say which engine failed and
        when the host was shared (:func:`ascendflow.runner.contention.findings`).

    Raises:
        EngineStartError: every pick's engine failed (the first failure).
    """
    measured, warnings, errors = [], [], []
    for n, (row, why) in enumerate(picks, 1):
        spec, plan = specs[row["id"]], plans[row["id"]]
        run_dir = candidate_dir(out, n, why, row)
        run_dir.mkdir(parents=True, exist_ok=True)
        row["measure"], row["measured_dir"] = why, str(run_dir)
        try:
            result = serve_and_search(plan, spec, run_dir, lambda m, n=n: status(
                f"{n}/{len(picks)} {why} {escape(row['label'])}: {m}"), dict(secrets))
        except EngineStartError as exc:
            row["measure_error"] = str(exc).splitlines()[0][:500]
            errors.append(exc)
            warnings.append(f"{escape(row['label'])}: not measured, {row['measure_error']} (see {run_dir / 'engine.log'})")
            continue
        cap = result["capacity"]
        row.update({"measured_capacity_rps": float(cap["capacity_rps"]) * row.get("replicas", 1),
                    "measured_rps_per_device": float(cap["capacity_rps_per_device"]),
                    "measured_capacity_load": float(cap["capacity_load"]),
                    "measured_p99_ttft_ms": float(cap["capacity_p99_ttft_ms"]),
                    "measured_p99_tpot_ms": float(cap["capacity_p99_tpot_ms"]),
                    "measured_slo_met": bool(cap["slo_met"]), "measured_load_points": int(cap["load_points"])})
        warnings += [f"{escape(row['label'])}: {w}" for w in findings(result, False)[1]]
        measured.append(row)
    if errors and not measured:
        raise errors[0]
    return measured, warnings


def summary_lines(measured: Sequence[Mapping[str, Any]], picks: int, seed: int) -> list[str]:
    """The measured picks (predicted against measured capacity, req/s per device), Spearman's rank correlation and
    the predicted best against the measured best, for the terminal."""
    v = verdict(measured)
    tops = sum(1 for r in measured if r["measure"] == "top")
    lines = [f"measured {v['n']} of {picks} picks on this host ({tops} top, {v['n'] - tops} random with "
             f"search.measure_seed={seed}), capacity at the SLO in req/s per device, predicted → measured:"]
    for r in measured:
        met = "" if r["measured_slo_met"] else " (no load met the SLO)"
        lines.append(f"  {r['measure']:<6} rank {'=' if r.get('tie') else ''}{r['rank']:<3} {r['label']}: "
                     f"{r['rps_per_device']:.2f} → {r['measured_rps_per_device']:.2f}{met}")
    rho = "undefined (fewer than two measured, or all equal)" if v["rho"] is None else f"{v['rho']:+.2f}"
    lines.append(f"rank correlation (Spearman) of predicted against measured capacity over {v['n']}: {rho}")
    if v["n"]:
        pb, mb = v["predicted_best"], v["measured_best"]
        lines.append(f"predicted best: {pb['label']} (measured {pb['measured_rps_per_device']:.2f}); measured best: "
                     + ("the same" if v["held"] else f"{mb['label']} (rank {mb['rank']}, measured "
                                                     f"{mb['measured_rps_per_device']:.2f})"))
    return lines


__all__ = ["candidate_dir", "measure", "summary_lines"]
