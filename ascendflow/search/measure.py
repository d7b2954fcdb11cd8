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
from ascendflow.interrupts import Terminated
from ascendflow.runner.capacity_run import serve_and_search
from ascendflow.runner.contention import findings
from ascendflow.runner.server import EngineStartError
from ascendflow.schema.spec import RunSpec
from ascendflow.search.pick import verdict


def candidate_dir(out: Path, n: int, why: str, row: Mapping[str, Any]) -> Path:
    """``out/<n>_<why>_<label as a file name>``."""
    return out / f"{n}_{why}_{re.sub(r'[^a-z0-9]+', '_', row['label'].lower()).strip('_')}"


def measure(picks: Sequence[tuple[dict[str, Any], str]], specs: Mapping[int, RunSpec], plans: Mapping[int, Plan],
            out: Path, status: Callable[[str], None], secrets: Mapping[str, str],
            serve: Callable[..., dict[str, Any]] = serve_and_search) -> tuple[list[dict], list[str]]:
    """Serve and capacity-search each pick in turn (one engine at a time); the rows get the measured figures.

    Each pick's row gains ``measure`` (``top``/``random``), ``measured_dir`` and ``measure_state``: ``measured``
    (with ``measured_capacity_rps``: req/s of the deployment, one instance's measured req/s at the SLO × its
    replicas; ``measured_rps_per_device``, ``measured_capacity_load``, ``measured_p99_ttft_ms`` /
    ``measured_p99_tpot_ms`` at that load, ``measured_slo_met``, ``measured_load_points``), ``failed`` (its engine
    failed, at start or during a load point: ``measure_error``, the first line; the others are still measured),
    ``interrupted`` (Ctrl-C/SIGTERM while it was served) or ``not_measured`` (not reached before the interrupt).

    Args:
        serve: :func:`ascendflow.runner.capacity_run.serve_and_search` (the tests give a function that raises).

    Returns:
        ``(measured rows, warning lines)``: the lines (rich markup, labels escaped) say which engine failed and
        when the host was shared (:func:`ascendflow.runner.contention.findings`).

    Raises:
        EngineStartError: every pick's engine failed (the first failure).
        KeyboardInterrupt, Terminated: re-raised once the picks' states are set.
    """
    measured, warnings, errors = [], [], []
    for n, (row, why) in enumerate(picks, 1):
        spec, plan = specs[row["id"]], plans[row["id"]]
        run_dir = candidate_dir(out, n, why, row)
        run_dir.mkdir(parents=True, exist_ok=True)
        row["measure"], row["measured_dir"], row["measure_state"] = why, str(run_dir), "interrupted"
        try:
            result = serve(plan, spec, run_dir, lambda m, n=n: status(
                f"{n}/{len(picks)} {why} {escape(row['label'])}: {m}"), dict(secrets))
        except EngineStartError as exc:
            row["measure_error"] = str(exc).splitlines()[0][:500]
            row["measure_state"] = "failed"
            errors.append(exc)
            # the engine's errors already end with "(log: <engine.log>)" (runner/server.py): not said twice
            log = "" if "(log: " in row["measure_error"] else f" (see {run_dir / 'engine.log'})"
            warnings.append(f"{escape(row['label'])}: not measured, {escape(row['measure_error'])}{log}")
            continue
        except (KeyboardInterrupt, Terminated):
            for later, _ in picks[n:]:
                later["measure_state"] = "not_measured"
            raise
        row["measure_state"] = "measured"
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


def summary_lines(rows: Sequence[Mapping[str, Any]], picks: int, seed: int) -> list[str]:
    """Every pick (predicted against measured capacity, req/s per device, or why it was not measured), Spearman's
    rank correlation over the measured ones and the predicted best against the measured best, for the terminal.
    A predicted best that was not measured is said so (new-user trial of 2026-12-03: rank 2 was printed as "predicted
    best ... measured best: the same")."""
    v = verdict(rows)
    measured = [r for r in rows if r.get("measured_rps_per_device") is not None]
    tops = sum(1 for r in measured if r["measure"] == "top")
    lines = [f"measured {v['n']} of {picks} picks on this host ({tops} top, {v['n'] - tops} random with "
             f"search.measure_seed={seed}), capacity at the SLO in req/s per device, predicted → measured:"]
    for r in rows:
        if r.get("measured_rps_per_device") is not None:
            got = f"{r['measured_rps_per_device']:.2f}" + ("" if r["measured_slo_met"] else " (no load met the SLO)")
        else:
            got = f"not measured ({r.get('measure_error') or r.get('measure_state') or 'not reached'})"
        lines.append(f"  {r['measure']:<6} rank {'=' if r.get('tie') else ''}{r['rank']:<3} {r['label']}: "
                     f"{r['rps_per_device']:.2f} → {got}")
    rho = "undefined (fewer than two measured, or all equal)" if v["rho"] is None else f"{v['rho']:+.2f}"
    lines.append(f"rank correlation (Spearman) of predicted against measured capacity over {v['n']}: {rho}")
    pb, mb = v["predicted_best"], v["measured_best"]
    if pb is not None and v["held"] is None:
        lines.append(f"predicted best: {pb['label']} (rank {pb['rank']}) was not measured, so whether it held is "
                     f"unknown" + (f"; best of the measured: {mb['label']} (rank {mb['rank']}, measured "
                                   f"{mb['measured_rps_per_device']:.2f})" if mb is not None else ""))
    elif pb is not None:
        lines.append(f"predicted best: {pb['label']} (measured {pb['measured_rps_per_device']:.2f}); measured best: "
                     + ("the same" if v["held"] else f"{mb['label']} (rank {mb['rank']}, measured "
                                                     f"{mb['measured_rps_per_device']:.2f})"))
    return lines


__all__ = ["candidate_dir", "measure", "summary_lines"]
