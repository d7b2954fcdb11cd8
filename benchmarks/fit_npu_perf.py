"""Fit the NPU step model's few constants to public vllm-ascend measurements; report leave-one-out and held-out error.

Rows: ``benchmarks/data/npu_public_rows.yaml`` (``split: train`` are fitted, ``split: heldout`` only checked). Each
row's plan is compiled once by ``python -m ascendflow <overrides> run.mode=plan`` into ``--plans/<id>/plan.json``;
the scheduler model (``ascendflow/perfmodel/scheduler.py``; every DP rank when it offers ``simulate_dp``) then runs
the row's workload with :class:`~ascendflow.perfmodel.npu.NpuStepModel` at the trial constants.

Fit: MAP (ridge in log space toward :data:`~ascendflow.perfmodel.calibration.fitting.START`) least squares on
``log(predicted / measured)`` over every measured figure of every training row, for each prior strength of
``--grid``; each strength is scored by exact leave-one-out (each training row predicted with the constants refitted
without it, at most ``--loo-max-nfev`` iterations warm-started from the full fit). The best strength's constants ship
only if their leave-one-out beats the start constants' (whose error on each row is already out of sample) on
tokens/s and not on TPOT+TTFT; else the start constants ship. Writes the calibration files
(``ascendflow/perfmodel/calibration/<hardware>.yaml``), ``outputs/bench/npu_fit.json`` and ``npu_fit.md``.

    python benchmarks/fit_npu_perf.py [--plans /tmp/fit] [--no-write] [--grid 0 1 inf] [--from-report FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ascendflow.perfmodel import scheduler  # noqa: E402
from ascendflow.perfmodel.arch import _spec  # noqa: E402
from ascendflow.perfmodel.calibration import CALIBRATION_DIR  # noqa: E402
from ascendflow.perfmodel.calibration.fitting import FITTED, MEANING, METRICS, PRIOR_GRID, START, \
    calibration_text, errors, fit_log_constants  # noqa: E402
from ascendflow.perfmodel.npu import NpuConstants, model_class, npu_step_model  # noqa: E402
from ascendflow.perfmodel.predict import limits_of, workload_requests  # noqa: E402

ROWS = ROOT / "benchmarks" / "data" / "npu_public_rows.yaml"
PLAN_FLAGS = "run.mode=plan tracking=none slo.p99_ttft_ms=null slo.p99_tpot_ms=null"
#: Hardware options the joint fit's constants are written for (one Da Vinci generation; each keeps its own peaks).
HARDWARE = ("atlas_800i_a2", "atlas_800i_a2_910b4", "atlas_800i_a3")


def load_rows(plans: Path) -> list[dict]:
    """Rows with their compiled plan, hardware, workload and quantization (compiling missing plans)."""
    rows = yaml.safe_load(ROWS.read_text())["rows"]
    for row in rows:
        overrides = row["overrides"].split()
        plan_file = plans / row["id"] / "plan.json"
        if not plan_file.exists():
            subprocess.run([sys.executable, "-m", "ascendflow", *PLAN_FLAGS.split(), *overrides,
                            f"hydra.run.dir={plans / row['id']}"], cwd=plans, check=True, capture_output=True)
        spec = _spec(overrides)
        row.update(plan=json.loads(plan_file.read_text()), hardware=spec.hardware.model_dump(),
                   workload=spec.workload, quantization=spec.quantization.model_dump())
        row["class"] = model_class(row["plan"]["model"]["architecture"])
    return rows


def simulate_row(row: dict, constants: NpuConstants, fitting: bool = False) -> dict[str, float]:
    """Predicted metrics of one row at ``constants``; ``fitting``: with the row's ``fit_num_prompts`` (a shorter
    run of the same steady state, to keep the fit's many evaluations fast; predictions use the full workload)."""
    plan, w = row["plan"], row["workload"]
    if fitting and row.get("fit_num_prompts"):
        w = w.model_copy(update={"num_prompts": int(row["fit_num_prompts"])})
    step = npu_step_model(plan, row["hardware"], constants, row["quantization"])
    requests = workload_requests(w, None)
    dp = int(plan["engine_args"].get("data_parallel_size") or 1)
    kw = dict(max_concurrency=w.max_concurrency, request_rate=w.request_rate, seed=w.seed)
    if hasattr(scheduler, "simulate_dp"):
        result = scheduler.simulate_dp(requests, limits_of(plan), step, data_parallel_size=dp, **kw)
    else:
        result = scheduler.simulate(requests, limits_of(plan), step, **kw)
    return result.metrics()


class Counted:
    """The training rows' log residuals at trial constants (the fit's evaluations, with ``fit_num_prompts``),
    counting the evaluations."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows, self.calls = rows, 0

    def __call__(self, c: NpuConstants) -> list[float]:
        self.calls += 1
        out = []
        for row in self.rows:
            pred = simulate_row(row, c, fitting=True)
            out += [math.log(max(pred[m], 1e-9) / v) for m, v in row["measured"].items()]
        return out


def fit(rows: list[dict], strength: float, x0: NpuConstants | None, max_nfev: int) -> tuple[NpuConstants, int]:
    """The MAP fit of :func:`~ascendflow.perfmodel.calibration.fitting.fit_log_constants` to ``rows`` at prior
    ``strength`` (× rows) toward :data:`START`, from ``x0``; with the number of step-model evaluations it took."""
    res = Counted(rows)
    return fit_log_constants(res, START, len(rows), strength, max_nfev, x0), res.calls


def exact_loo(train: list[dict], strength: float, full: NpuConstants, max_nfev: int) -> tuple[dict, dict, int]:
    """Exact leave-one-out: each training row predicted (full workload) with the constants refitted without it
    (warm-started from ``full``, the fit on all rows at the same ``strength``; at most ``max_nfev`` iterations).
    Returns predictions, constants per left-out row and the evaluations spent."""
    preds, consts, calls = {}, {}, 0
    for row in train:
        others = [o for o in train if o is not row]
        c, n = fit(others, strength, full, max_nfev)
        calls += n
        consts[row["id"]] = {k: getattr(c, k) for k in FITTED}
        preds[row["id"]] = simulate_row(row, c)
    return preds, consts, calls


def log_score(preds: dict, rows: list[dict]) -> float:
    """Mean squared ``log(predicted / measured)`` over every measured figure (the fit's own loss)."""
    e = [math.log(max(preds[r["id"]][m], 1e-9) / v) ** 2 for r in rows for m, v in r["measured"].items()]
    return float(np.mean(e))


def adopt(loo: dict, before: dict) -> tuple[bool, str]:
    """Whether the fitted constants beat the start constants out of sample: exact-LOO tokens/s MAPE lower AND the
    TPOT and TTFT MAPEs together (weighted by rows) not higher than the start constants' on the same rows."""
    def latency(t):
        n = sum(t[m]["rows"] for m in ("median_tpot_ms", "median_ttft_ms"))
        return sum(t[m]["mape_percent"] * t[m]["rows"] for m in ("median_tpot_ms", "median_ttft_ms")) / n
    a, b = loo["all"], before["all"]
    tput = a["output_throughput"]["mape_percent"] < b["output_throughput"]["mape_percent"]
    lat = latency(a) <= latency(b)
    ta, tb = a["output_throughput"]["mape_percent"], b["output_throughput"]["mape_percent"]
    why = (f"exact-LOO tokens/s MAPE {ta} % vs start {tb} %; TPOT+TTFT MAPE {latency(a):.1f} % vs start "
           f"{latency(b):.1f} %")
    return tput and lat, why


def summarize(preds: dict[str, dict], rows: list[dict], classes: bool = True) -> dict:
    def table(sub):
        pairs = {m: [(preds[r["id"]][m], r["measured"][m]) for r in sub if m in r["measured"]] for m in METRICS}
        return errors(pairs)
    out = {"all": table(rows)}
    if classes:
        for cls in sorted({r["class"] for r in rows}):
            out[cls] = table([r for r in rows if r["class"] == cls])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", type=Path, default=ROOT / "outputs" / "bench" / "npu_plans")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--grid", type=float, nargs="+", default=list(PRIOR_GRID),
                    help="prior strengths (x rows) compared by exact leave-one-out; inf = the start constants")
    ap.add_argument("--max-nfev", type=int, default=5, help="full fit's least-squares iterations (Jacobians not "
                                                            "counted)")
    ap.add_argument("--loo-max-nfev", type=int, default=2, help="iterations of each leave-one-out refit")
    ap.add_argument("--from-report", type=Path, help="rewrite the calibration files and npu_fit.md from a saved "
                                                     "npu_fit.json (no fit)")
    args = ap.parse_args()
    if args.from_report:
        report = json.loads(args.from_report.read_text())
        args.from_report.with_suffix(".md").write_text(markdown(report))
        for hw in HARDWARE:
            write_calibration(hw, NpuConstants(**report["constants"]), report)
        return 0
    args.plans.mkdir(parents=True, exist_ok=True)
    rows = load_rows(args.plans)
    train = [r for r in rows if r["split"] == "train"]
    held = [r for r in rows if r["split"] == "heldout"]
    before = {r["id"]: simulate_row(r, START) for r in rows}
    before_table = summarize(before, train)
    grid, prev, t0 = {}, None, time.perf_counter()
    for strength in sorted(args.grid, reverse=True):  # strongest first: each full fit warm-starts the next
        t = time.perf_counter()
        if math.isinf(strength):
            full, n, loo_s, loo_c, n_loo = START, 0, {r["id"]: before[r["id"]] for r in train}, {}, 0
        else:
            full, n = fit(train, strength, prev, args.max_nfev)
            loo_s, loo_c, n_loo = exact_loo(train, strength, full, args.loo_max_nfev)
            prev = full
        grid[strength] = {"constants": full, "loo": loo_s, "loo_constants": loo_c,
                          "loo_table": summarize(loo_s, train), "score": log_score(loo_s, train),
                          "evaluations": n + n_loo, "seconds": round(time.perf_counter() - t, 1)}
        print(f"prior {strength}: LOO mean sq log error {grid[strength]['score']:.4f}, "
              f"{json.dumps(grid[strength]['loo_table']['all'])}, {n + n_loo} evaluations, "
              f"{grid[strength]['seconds']} s", flush=True)
    loo_seconds = round(time.perf_counter() - t0, 1)
    finite = [s for s in grid if not math.isinf(s)]
    best = min(finite, key=lambda s: (grid[s]["score"], -s))
    adopted, why = adopt(grid[best]["loo_table"], before_table)
    chosen = best if adopted else math.inf
    constants, loo = grid[chosen]["constants"], grid[chosen]["loo"]
    print(f"best prior strength {best} x rows; adopted: {adopted} ({why})", flush=True)
    fitted = {r["id"]: simulate_row(r, constants) for r in rows}
    report = {
        "date": dt.date.today().isoformat(), "constants": asdict(constants),
        "fitted": list(FITTED), "train_rows": len(train), "heldout_rows": len(held),
        "prior_strength": "inf" if math.isinf(chosen) else chosen, "best_fitted_prior_strength": best,
        "adopted_fit": adopted, "adoption": why, "loo_seconds": loo_seconds,
        "loo_method": f"exact: refit without each row, warm-started from the full fit at the same prior, at most "
                      f"{args.loo_max_nfev} iterations (full fit: {args.max_nfev})",
        "grid": {("inf" if math.isinf(s) else s): {"constants": {k: getattr(g["constants"], k) for k in FITTED},
                                                   "loo": g["loo_table"], "loo_mean_sq_log_error": g["score"],
                                                   "evaluations": g["evaluations"], "seconds": g["seconds"]}
                 for s, g in grid.items()},
        "in_sample": summarize(fitted, train), "before_fit": before_table,
        "leave_one_out": summarize(loo, train),
        "heldout": summarize(fitted, held) if held else None,
        "rows": {r["id"]: {"split": r["split"], "class": r["class"], "measured": r["measured"],
                           "fitted": {m: round(fitted[r["id"]][m], 2) for m in METRICS},
                           "loo": {m: round(loo[r["id"]][m], 2) for m in METRICS} if r["id"] in loo else None}
                 for r in rows},
    }
    print(json.dumps({k: report[k] for k in ("constants", "before_fit", "in_sample", "leave_one_out", "heldout")},
                     indent=1))
    if not args.no_write:
        out = ROOT / "outputs" / "bench" / "npu_fit.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1) + "\n")
        out.with_suffix(".md").write_text(markdown(report))
        for hw in HARDWARE:
            write_calibration(hw, constants, report)
    return 0


def write_calibration(hardware: str, constants: NpuConstants, report: dict) -> None:
    """``calibration/<hardware>.yaml``: the shipped constants with their meaning, how they were chosen (the prior
    strength picked by exact leave-one-out, or the start constants when the fit did not beat them), and the
    shipped constants' exact leave-one-out error per model class (labels predictions)."""
    adopted = report["adopted_fit"]
    what = (f"MAP fit (prior {report['prior_strength']} x rows toward the start values)" if adopted else
            "the start constants (fitting.START): no fit beat them by exact leave-one-out")
    header = [f"NPU step-model constants for hardware={hardware}. Written by benchmarks/fit_npu_perf.py on "
              f"{report['date']}:", f"{what};", "one joint choice over the A2 and A3 rows (same Da Vinci cube and "
              "HBM generation; per-generation peaks come", "from conf/hardware/<hardware>.yaml). Do not edit by "
              "hand: re-run the fit."]
    fit = {"rows": report["train_rows"], "source": "benchmarks/data/npu_public_rows.yaml, split train",
           "method": "least squares on log(predicted/measured), all measured figures of every row, plus a prior "
                     "sqrt(strength x rows) x (log c - log c_start) per fitted constant",
           "fitted": report["fitted"], "prior_strength": report["prior_strength"],
           "best_fitted_prior_strength": report["best_fitted_prior_strength"], "adopted_fit": adopted,
           "adoption": report["adoption"], "measured_error": "exact leave-one-out on the training rows"}
    meaning = None if adopted else {k: v.replace("fitted:", "start value (fit not adopted):", 1)
                                    for k, v in MEANING.items()}
    (CALIBRATION_DIR / f"{hardware}.yaml").write_text(calibration_text(
        hardware, constants, header, fit, report["leave_one_out"], meaning))


def markdown(report: dict) -> str:
    """The docs' tables: summary (in-sample, leave-one-out, held-out) and one line per row."""
    def summary_rows(name, table):
        if not table:
            return []
        a = table["all"]
        cell = lambda m: (f"{a[m]['mape_percent']} % ({a[m]['median_signed_percent']:+} %, {a[m]['rows']})"
                          if m in a else "–")
        return [f"| {name} | {cell('output_throughput')} | {cell('median_tpot_ms')} | {cell('median_ttft_ms')} | "
                f"{a.get('spearman_output_throughput', '–')} |"]
    out = ["| set | tokens/s MAPE (median signed, rows) | TPOT MAPE | TTFT MAPE | Spearman tokens/s |",
           "|---|---|---|---|---|"]
    out += summary_rows("start constants, train (not fitted: already out of sample, = their leave-one-out)",
                        report["before_fit"])
    for s, g in report["grid"].items():
        if s != "inf":
            out += summary_rows(f"exact leave-one-out, fit with prior {s} x rows", g["loo"])
    shipped = f"fitted, prior {report['prior_strength']} x rows" if report["adopted_fit"] else "start"
    out += summary_rows(f"**shipped constants ({shipped}), in-sample, train**", report["in_sample"])
    out += summary_rows("**shipped constants, leave-one-out, train**", report["leave_one_out"])
    out += summary_rows("**shipped constants, held-out (never fitted)**", report["heldout"])
    out += ["", "| row | split | class | measured tok/s · TPOT · TTFT | predicted (LOO for train) |",
            "|---|---|---|---|---|"]
    for rid, r in report["rows"].items():
        pred = r["loo"] or r["fitted"]
        meas = " · ".join(f"{r['measured'][m]:g}" if m in r["measured"] else "–" for m in METRICS)
        p = " · ".join(f"{pred[m]:.4g}" if m in r["measured"] else f"({pred[m]:.4g})" for m in METRICS)
        out.append(f"| {rid} | {r['split']} | {r['class']} | {meas} | {p} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
