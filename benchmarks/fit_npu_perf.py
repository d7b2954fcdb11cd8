"""Fit the NPU step model's few constants to public vllm-ascend measurements; report leave-one-out and held-out error.

Rows: ``benchmarks/data/npu_public_rows.yaml`` (``split: train`` are fitted, ``split: heldout`` only checked). Each
row's plan is compiled once by ``python -m ascendflow <overrides> run.mode=plan`` into ``--plans/<id>/plan.json``;
the scheduler model (``ascendflow/perfmodel/scheduler.py``; every DP rank when it offers ``simulate_dp``) then runs
the row's workload with :class:`~ascendflow.perfmodel.npu.NpuStepModel` at the trial constants.

Fit: least squares on ``log(predicted / measured)`` over every measured figure of every training row
(``scipy.optimize.least_squares``), in the log of each fitted constant, within physical bounds. Leave-one-out: each
training row predicted with the constants fitted to the others (one Gauss-Newton step from the full fit). Writes
the calibration files (``ascendflow/perfmodel/calibration/<hardware>.yaml``) and ``outputs/bench/npu_fit.json``.

    python benchmarks/fit_npu_perf.py [--plans /tmp/fit] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ascendflow.perfmodel import scheduler  # noqa: E402
from ascendflow.perfmodel.arch import _spec  # noqa: E402
from ascendflow.perfmodel.calibration import CALIBRATION_DIR  # noqa: E402
from ascendflow.perfmodel.calibration.fitting import FITTED, METRICS, START, calibration_text, errors  # noqa: E402
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


def with_values(values: np.ndarray) -> NpuConstants:
    return replace(START, **{k: float(math.exp(v)) for k, v in zip(FITTED, values)})


def residuals(values: np.ndarray, rows: list[dict]) -> np.ndarray:
    c = with_values(values)
    out = []
    for row in rows:
        pred = simulate_row(row, c, fitting=True)
        out += [math.log(max(pred[m], 1e-9) / v) for m, v in row["measured"].items()]
    return np.array(out)


def fit(rows: list[dict], x0: np.ndarray | None = None, max_nfev: int = 60) -> np.ndarray:
    lo = np.log([b[0] for b in FITTED.values()])
    hi = np.log([b[1] for b in FITTED.values()])
    x0 = np.log([getattr(START, k) for k in FITTED]) if x0 is None else x0
    res = least_squares(residuals, np.clip(x0, lo + 1e-6, hi - 1e-6), bounds=(lo, hi), args=(rows,),
                        diff_step=0.05, max_nfev=max_nfev, x_scale=1.0)
    return res.x


def row_residuals(values: np.ndarray, rows: list[dict]) -> list[np.ndarray]:
    """``log(predicted / measured)`` per row (one array per row, one entry per measured figure)."""
    c = with_values(values)
    out = []
    for row in rows:
        pred = simulate_row(row, c, fitting=True)
        out.append(np.array([math.log(max(pred[m], 1e-9) / v) for m, v in row["measured"].items()]))
    return out


def leave_one_out(rows: list[dict], x: np.ndarray, step: float = 0.05) -> dict[str, np.ndarray]:
    """Constants fitted without each row: one Gauss-Newton step from the full fit ``x`` on the other rows'
    residuals (forward-difference Jacobian in log space, clipped to the bounds): the one-Newton-step approximate
    leave-one-out (Rad & Maleki, JRSS-B 82(4), 2020), so that each row costs one simulation instead of a refit."""
    lo = np.log([b[0] for b in FITTED.values()])
    hi = np.log([b[1] for b in FITTED.values()])
    base = row_residuals(x, rows)
    cols = []
    for j in range(len(x)):
        xj = x.copy()
        xj[j] += step if x[j] + step <= hi[j] else -step
        cols.append([(rj - r0) / (xj[j] - x[j]) for rj, r0 in zip(row_residuals(xj, rows), base)])
    out = {}
    for i, row in enumerate(rows):
        keep = [k for k in range(len(rows)) if k != i]
        r = np.concatenate([base[k] for k in keep])
        jac = np.column_stack([np.concatenate([cols[j][k] for k in keep]) for j in range(len(x))])
        delta = np.nan_to_num(np.linalg.lstsq(jac, -r, rcond=None)[0])
        out[row["id"]] = np.clip(x + np.clip(delta, -1.0, 1.0), lo, hi)  # a step of at most a factor e
        print(f"loo constants without {row['id']}: "
              f"{json.dumps({k: round(math.exp(v), 6) for k, v in zip(FITTED, out[row['id']])})}", flush=True)
    return out


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
    ap.add_argument("--skip-loo", action="store_true")
    ap.add_argument("--x0", help="JSON of starting constants (e.g. a previous fit's), else the start values")
    ap.add_argument("--max-nfev", type=int, default=60, help="least-squares iterations (Jacobians not counted)")
    args = ap.parse_args()
    args.plans.mkdir(parents=True, exist_ok=True)
    rows = load_rows(args.plans)
    train = [r for r in rows if r["split"] == "train"]
    held = [r for r in rows if r["split"] == "heldout"]
    before = {r["id"]: simulate_row(r, START) for r in rows}
    x0 = np.log([json.loads(args.x0)[k] for k in FITTED]) if args.x0 else None
    x = fit(train, x0, max_nfev=args.max_nfev)
    print("fitted:", json.dumps(asdict(with_values(x))), flush=True)
    constants = with_values(x)
    fitted = {r["id"]: simulate_row(r, constants) for r in rows}
    loo = {}
    if not args.skip_loo:
        loo_x = leave_one_out(train, x)
        for r in train:
            others = [o for o in train if o is not r]
            loo[r["id"]] = simulate_row(r, with_values(fit(others, x)))
            print(f"loo {r['id']}: {json.dumps({m: round(loo[r['id']][m], 2) for m in METRICS})}", flush=True)
    report = {
        "date": dt.date.today().isoformat(), "constants": asdict(constants),
        "fitted": list(FITTED), "train_rows": len(train), "heldout_rows": len(held),
        "in_sample": summarize(fitted, train), "before_fit": summarize(before, train, classes=False),
        "leave_one_out": summarize(loo, train) if loo else None,
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
    """``calibration/<hardware>.yaml``: the constants with their meaning, how they were fitted, the LOO error."""
    header = [f"NPU step-model constants for hardware={hardware}. Written by benchmarks/fit_npu_perf.py on "
              f"{report['date']};", "one joint fit over the A2 and A3 rows (same Da Vinci cube and HBM generation; "
              "per-generation peaks come", "from conf/hardware/<hardware>.yaml). Do not edit by hand: re-run the fit."]
    fit = {"rows": report["train_rows"], "source": "benchmarks/data/npu_public_rows.yaml, split train",
           "method": "least squares on log(predicted/measured), all measured figures of every row",
           "fitted": report["fitted"]}
    # leave-one-out on the training rows, per model class (labels predictions)
    (CALIBRATION_DIR / f"{hardware}.yaml").write_text(calibration_text(
        hardware, constants, header, fit, report["leave_one_out"] or report["in_sample"]))


if __name__ == "__main__":
    raise SystemExit(main())


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
    out += summary_rows("before the fit (start constants), train", report["before_fit"])
    out += summary_rows("in-sample (fitted on all train rows)", report["in_sample"])
    out += summary_rows("**leave-one-out, train**", report["leave_one_out"])
    out += summary_rows("**held-out (never fitted)**", report["heldout"])
    out += ["", "| row | split | class | measured tok/s · TPOT · TTFT | predicted (LOO for train) |", "|---|---|---|---|---|"]
    for rid, r in report["rows"].items():
        pred = r["loo"] or r["fitted"]
        meas = " · ".join(f"{r['measured'][m]:g}" if m in r["measured"] else "–" for m in METRICS)
        p = " · ".join(f"{pred[m]:.4g}" if m in r["measured"] else f"({pred[m]:.4g})" for m in METRICS)
        out.append(f"| {rid} | {r['split']} | {r['class']} | {meas} | {p} |")
    return "\n".join(out) + "\n"
