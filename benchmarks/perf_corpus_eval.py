"""Score the NPU step model on the measurement corpus, grouped leave-one-family-out; write the 80 % intervals.

    python benchmarks/perf_corpus_eval.py [--no-write] [--kept-out]

Rows: every expressible row of the corpus (:func:`ascendflow.perfmodel.corpus.fit_rows`: CI baselines imported by
``scripts/import_ci_config.py`` and the curated PR/issue/tutorial rows). Each row's plan is compiled in process
(``compile_for_this_host``, as a job does; cached under ``outputs/bench/corpus_plans/``) and its workload simulated
by the scheduler model with :class:`~ascendflow.perfmodel.npu.NpuStepModel` at the hardware's packaged calibration.

Out of sample: a row's residual ``log(predicted / measured)`` is out of sample when the shipped constants were not
fitted to it. The five fitted constants (``benchmarks/fit_npu_perf.py``) saw 11 rows (``fitted: true`` here; their
exact leave-one-out error differed from the in-sample one by at most 0.3 points, ``npu_fit.json``: the prior at
3 x rows holds the constants near their start values), so their residuals are nearly out of sample; the tables
also give the error without them. The interval of a class (``dense``,
``moe``, ``mla_moe`` on A2/A3; ``300i_duo`` for the Atlas 300I Duo) is scored grouped leave-one-family-out: for each
model family, the 10th and 90th percentiles of the log residuals of the *other* families of its class give the
interval, and the left-out family's rows are checked against it (coverage). The shipped interval of a class uses all
its rows' residuals. Writes ``ascendflow/perfmodel/calibration/intervals.yaml`` (read by
:func:`ascendflow.perfmodel.predict.predict`), ``outputs/bench/perf_corpus_eval.json`` (copy:
``benchmarks/data/perf_corpus_eval.json``), ``docs/img/perf_residuals_*.png`` and the tables between the
``<!-- corpus-eval -->`` markers of ``docs/performance_model.md``.

``--kept-out GIT_DIR``: also score the kept-out check's CI rows (``scripts/import_ci_config.py`` run on a vllm-ascend
git directory with ``kept_out_only``), never used for the intervals or any constant, never written to the corpus.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ascendflow.perfmodel import scheduler  # noqa: E402
from ascendflow.perfmodel.calibration import CALIBRATION_DIR, load_calibration  # noqa: E402
from ascendflow.perfmodel.corpus import CI_ROWS, corpus_counts, fit_rows  # noqa: E402
from ascendflow.perfmodel.npu import NpuConstants, model_class  # noqa: E402
from ascendflow.perfmodel.predict import (interval_class, limits_of, npu_peaks, workload_prefixes,  # noqa: E402
                                          workload_requests)
from ascendflow.perfmodel.npu import npu_step_model  # noqa: E402

PLANS = ROOT / "outputs" / "bench" / "corpus_plans"
FIT_RESULT = ROOT / "benchmarks" / "data" / "npu_fit_result.json"
INTERVALS = CALIBRATION_DIR / "intervals.yaml"
METRICS = ("output_throughput", "median_tpot_ms", "median_ttft_ms")
#: CI configs whose 2026-08-19 baseline is one of the 11 rows the five constants were fitted to (M2, L3, L7).
FITTED_CI_FILES = ("Qwen3-32B-Int8-A2.yaml", "Qwen3-235B-A22B-A2.yaml", "DeepSeek-V3.1-BF16.yaml")
PLAN_FLAGS = ["run.mode=plan", "tracking=none", "slo.p99_ttft_ms=null", "slo.p99_tpot_ms=null"]
COVERAGE = 0.8
#: Fewest residuals of a class and metric an interval is given from (fewer: ``no measured error``).
MIN_RESIDUALS = 3


def compile_row(row: dict) -> tuple[dict, object]:
    """(plan dict, RunSpec) of a row, compiling in process (cached by the overrides' hash)."""
    from ascendflow.models.resolve import resolve_model
    from ascendflow.perfmodel.arch import _spec
    from ascendflow.runner.detect import compile_for_this_host

    overrides = PLAN_FLAGS + row["overrides"].split()
    spec = _spec(overrides)
    key = hashlib.sha1(" ".join(overrides).encode()).hexdigest()[:16]
    path = PLANS / f"{key}.json"
    if path.exists():
        return json.loads(path.read_text()), spec
    plan = compile_for_this_host(spec, resolve_model(spec.model, need_weights=False))
    data = json.loads(plan.to_json())
    PLANS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return data, spec


def simulate(plan: dict, spec, calibration: dict, override: dict | None = None) -> dict[str, float]:
    """Predicted metrics of the row's workload (the scheduler model x the NPU step model at ``calibration``, with
    ``override`` constants laid over it): vLLM bench's medians, p99s and throughputs plus ``mean_ttft_ms`` and
    ``mean_tpot_ms``."""
    hw = npu_peaks(spec.hardware.model_dump(), calibration)
    override = dict(override or {})
    latency = float(override.pop("request_latency_s", calibration.get("request_latency_s") or 0.0))
    consts = NpuConstants(**{k: float(v) for k, v in {**calibration["constants"], **override}.items()})
    step = npu_step_model(plan, hw, consts, spec.quantization.model_dump())
    w = spec.workload
    dp = int(plan["engine_args"].get("data_parallel_size") or 1)
    res = scheduler.simulate_dp(workload_requests(w, None), limits_of(plan), step, data_parallel_size=dp,
                                max_concurrency=w.max_concurrency, request_rate=w.request_rate,
                                seed=w.seed, request_latency_s=latency, prefixes=workload_prefixes(w))
    # the means too, for the rows whose source prints mean TTFT/TPOT (``statistic: mean``)
    return {**res.metrics(), "mean_ttft_ms": 1e3 * float(np.mean(res.ttft_s)) if res.ttft_s else 0.0,
            "mean_tpot_ms": 1e3 * float(np.mean(res.tpot_s)) if res.tpot_s else 0.0}


def predict_rows(rows: list[dict], override: dict | None = None, quiet: bool = False) -> list[dict]:
    """Each row with ``pred`` (metrics), ``class``, ``hardware``, ``quant``, ``workload_kind`` and ``fitted``
    (one of the 11 rows the five constants were fitted to); rows that fail to compile get ``error``."""
    loo = json.loads(FIT_RESULT.read_text())["rows"] if FIT_RESULT.exists() else {}
    out = []
    for row in rows:
        t = time.perf_counter()
        try:
            plan, spec = compile_row(row)
            cal = load_calibration(spec.hardware.name)
            if cal is None:
                raise ValueError(f"no calibration for {spec.hardware.name}")
            pred = simulate(plan, spec, cal, override)
        except Exception as exc:  # noqa: BLE001 - a row that cannot be planned is reported, not fatal
            out.append({**row, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"})
            print(f"{row['id']}: {out[-1]['error']}", flush=True)
            continue
        fitted = (loo.get(row["id"]) or {}).get("split") == "train" or \
            row.get("citation", "").split("@")[0].endswith(FITTED_CI_FILES)
        q = spec.quantization.model_dump()
        scheme = q.get("expert_scheme") or q.get("linear_scheme") or "bf16"
        w = spec.workload
        kind = ("rate" if w.request_rate and math.isfinite(w.request_rate) else "burst") + \
               (", long (>8k in)" if w.random_input_len > 8192 else "")
        # a row whose source prints means (``statistic: mean``) is scored against the simulated means
        stat = {m: m.replace("median_", "mean_") for m in METRICS} if row.get("statistic") == "mean" else {}
        out.append({**row, "pred": {m: float(pred[stat.get(m, m)]) for m in METRICS}, "hardware": spec.hardware.name,
                    "class": interval_class(plan["model"]["architecture"], spec.hardware.name), "quant": scheme,
                    "workload_kind": kind, "fitted": bool(fitted),
                    "seconds": round(time.perf_counter() - t, 2)})
        if not quiet:
            print(f"{row['id']}: {json.dumps({m: round(out[-1]['pred'][m], 1) for m in METRICS})} measured "
                  f"{row['measured']} ({out[-1]['seconds']} s)", flush=True)
    return out


#: Terms refitted grouped leave-one-family-out, in order, each on top of the ones before (its first value: term off).
#: ``prefill_efficiency``: multiplier on ``gemm_efficiency`` for steps with a prefill chunk (npu.py);
#: ``request_latency_s``: client-to-engine time of a request counted in TTFT (HTTP, chat template, tokenization,
#: the API server's hand-off), as the CPU table model's ``CPU_REQUEST_LATENCY_S``.
#: ``eager_full_factor``: multiplier on ``eager_layer_overhead_s`` for a PIECEWISE model's step beyond its largest
#: capture size (no graph replayed; npu.py).
TERMS = (("eager_full_factor", (1.0, 2.0, 4.0, 8.0)),
         ("prefill_efficiency", (1.0, 0.7, 0.5, 0.35, 0.25)),
         ("request_latency_s", (0.0, 0.025, 0.05, 0.1, 0.2)))
PREFILL_GRID = TERMS[1][1]


def loss(rows: list[dict]) -> float:
    """Sum of squared log residuals over every measured figure of ``rows``."""
    return sum(x * x for r in rows for m in METRICS if (x := resid(r, m)) is not None)


def refit_terms(rows: list[dict]) -> tuple[list[dict], dict, list[dict]]:
    """Every :data:`TERMS` refit in turn, grouped leave-one-family-out with nested folds: for each left-out family
    the whole chain (every earlier term, then this one) is chosen on the *other* families' rows only, each term
    over its grid on top of that fold's earlier choices (ties to the term off, ``grid[0]``); the left-out family's
    rows are predicted at its fold's values. A term is adopted only if these out-of-sample predictions beat the
    term off (each fold's chain with ``grid[0]`` for this term; sum of squared log residuals); else every fold and
    the shipped model keep ``grid[0]``. The shipped value is the one chosen on all rows on top of the shipped
    earlier terms. Returns the final out-of-sample rows (each family at its fold's values, in corpus order), the
    shipped values and each term's facts."""
    fams = sorted({r["family"] for r in rows})
    order = {r["id"]: i for i, r in enumerate(rows)}
    cache: dict[tuple, dict[str, dict]] = {}

    def preds(override: dict) -> dict[str, dict]:
        key = tuple(sorted(override.items()))
        if key not in cache:
            cache[key] = {r["id"]: r for r in predict_rows(rows, dict(override), quiet=True)}
        return cache[key]

    def fold_rows(values: dict[str, dict]) -> list[dict]:
        out = [r for fam in fams for r in preds(values[fam]).values() if r["family"] == fam]
        return sorted(out, key=lambda r: order[r["id"]])

    fold = {fam: {} for fam in fams}
    shipped: dict[str, float] = {}
    facts = []
    for name, grid in TERMS:
        chosen = {fam: min(grid, key=lambda v, fam=fam: (loss([r for r in preds({**fold[fam], name: v}).values()
                                                                if r["family"] != fam and "pred" in r]),
                                                          abs(v - grid[0])))
                  for fam in fams}
        best_all = min(grid, key=lambda v: (loss([r for r in preds({**shipped, name: v}).values() if "pred" in r]),
                                            abs(v - grid[0])))
        refit = fold_rows({fam: {**fold[fam], name: chosen[fam]} for fam in fams})
        off = fold_rows({fam: {**fold[fam], name: grid[0]} for fam in fams})
        lofo_loss, off_loss = loss([r for r in refit if "pred" in r]), loss([r for r in off if "pred" in r])
        adopted = lofo_loss < off_loss
        for fam in fams:
            fold[fam][name] = chosen[fam] if adopted else grid[0]
        shipped[name] = best_all if adopted else grid[0]
        facts.append({"term": name, "grid": list(grid), "per_family": chosen, "best_on_all_rows": best_all,
                      "adopted": adopted, "shipped": shipped[name], "lofo_loss_refit": round(lofo_loss, 3),
                      "lofo_loss_term_off": round(off_loss, 3),
                      "loss_all_rows": {str(g): round(loss([r for r in preds({**shipped, name: g}).values()
                                                            if "pred" in r]), 3) for g in grid}})
    final = [{**r, **fold[r["family"]]} for r in fold_rows(fold)]
    return final, shipped, facts


def resid(row: dict, m: str) -> float | None:
    """``log(predicted / measured)`` of metric ``m`` (``None`` when not measured)."""
    if m not in row.get("measured", {}) or "pred" not in row:
        return None
    return math.log(max(row["pred"][m], 1e-9) / float(row["measured"][m]))


def quantiles(values: list[float], groups: list[str] | None = None) -> tuple[float, float]:
    """10th and 90th percentiles of ``values``, each row weighted ``1 / (rows of its family)`` when ``groups``
    names the families (families, not rows, are the exchangeable units of a grouped check: one tutorial's eight
    rows must not outvote six other families); weighted quantiles by linear interpolation of the weighted CDF at
    the rows' mid-weights (Hyndman & Fan 1996 definition 5, weighted).

    Finite-sample correction of split conformal prediction (Lei, G'Sell, Rinaldo, Tibshirani, Wasserman,
    "Distribution-Free Predictive Inference for Regression", JASA 113(523), 2018, §2.2: the
    ``ceil((n + 1)(1 − α))``-th of ``n`` calibration residuals), per tail at ``α/2``: the upper level is
    ``(1 − α/2)(1 + 1/n)`` and the lower ``1 −`` that, ``n`` the exchangeable units (families when ``groups``
    is given, else rows); a level past the data takes the extreme residual."""
    v = np.array(values, dtype=float)
    if groups is None:
        w = np.ones_like(v)
    else:
        count = {g: groups.count(g) for g in set(groups)}
        w = np.array([1.0 / count[g] for g in groups])
    order = np.argsort(v)
    v, w = v[order], w[order]
    cdf = (np.cumsum(w) - 0.5 * w) / w.sum()
    n = len(set(groups)) if groups is not None else len(v)
    upper = min(1.0, (1 - (1 - COVERAGE) / 2) * (1 + 1 / n))
    lo, hi = np.interp([1 - upper, upper], cdf, v)
    return float(lo), float(hi)


def error_table(rows: list[dict], key: str) -> list[dict]:
    """MAPE and median signed error per value of ``key`` and metric (out-of-sample residuals)."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(str(r[key]), []).append(r)
    out = []
    for g, sub in sorted(groups.items()):
        cell = {"group": g, "rows": len(sub)}
        for m in METRICS:
            e = [math.exp(x) - 1 for r in sub if (x := resid(r, m)) is not None]
            if e:
                cell[m] = {"mape_percent": round(100 * float(np.mean(np.abs(e))), 1),
                           "median_signed_percent": round(100 * float(np.median(e)), 1), "rows": len(e)}
        out.append(cell)
    return out


def spearman(rows: list[dict]) -> float | None:
    pairs = [(r["pred"]["output_throughput"], r["measured"]["output_throughput"]) for r in rows
             if "pred" in r and "output_throughput" in r["measured"]]
    if len(pairs) < 3:
        return None
    a = np.argsort(np.argsort([p for p, _ in pairs]))
    b = np.argsort(np.argsort([m for _, m in pairs]))
    return round(float(np.corrcoef(a, b)[0, 1]), 3)


def lofo_intervals(rows: list[dict]) -> dict:
    """Grouped leave-one-family-out interval check per class: the left-out family's rows against the interval of
    the other families of its class; with the shipped interval per class (all its rows)."""
    classes = sorted({r["class"] for r in rows})
    shipped, checks = {}, []
    for cls in classes:
        sub = [r for r in rows if r["class"] == cls]
        per = {}
        for m in METRICS:
            vals = [x for r in sub if (x := resid(r, m)) is not None]
            fams = [r["family"] for r in sub if resid(r, m) is not None]
            if len(vals) >= MIN_RESIDUALS:
                lo, hi = quantiles(vals, fams)
                per[m] = {"q10_log": round(lo, 4), "q90_log": round(hi, 4), "residuals": len(vals),
                          "families": len({r["family"] for r in sub if resid(r, m) is not None})}
        shipped[cls] = per
        for fam in sorted({r["family"] for r in sub}):
            others = [r for r in sub if r["family"] != fam]
            for m in METRICS:
                vals = [x for r in others if (x := resid(r, m)) is not None]
                fams = [r["family"] for r in others if resid(r, m) is not None]
                for r in sub:
                    if r["family"] != fam or (x := resid(r, m)) is None:
                        continue
                    if len(vals) < MIN_RESIDUALS:
                        checks.append({"id": r["id"], "class": cls, "metric": m, "status": "no measured error"})
                        continue
                    lo, hi = quantiles(vals, fams)
                    checks.append({"id": r["id"], "class": cls, "metric": m, "inside": lo <= x <= hi})
    scored = [c for c in checks if "inside" in c]
    cov = {m: (round(sum(c["inside"] for c in scored if c["metric"] == m) /
                     max(1, sum(1 for c in scored if c["metric"] == m)), 3),
               sum(1 for c in scored if c["metric"] == m)) for m in METRICS}
    return {"shipped": shipped, "checks": checks,
            "coverage": {m: {"covered": v[0], "rows": v[1]} for m, v in cov.items()},
            "coverage_all": round(sum(c["inside"] for c in scored) / max(1, len(scored)), 3),
            "scored": len(scored), "no_measured_error": len(checks) - len(scored)}


def intervals_text(result: dict) -> str:
    head = ("# 80 % prediction intervals of the NPU step model per class, from grouped out-of-sample residuals\n"
            "# log(predicted / measured) of the measurement corpus (ascendflow/perfmodel/corpus/). Written by\n"
            f"# benchmarks/perf_corpus_eval.py on {result['date']}; do not edit by hand. A figure's interval is\n"
            "# [predicted / exp(q90_log), predicted / exp(q10_log)]; q10/q90 are family-weighted quantiles at the\n"
            "# split-conformal levels 1 - u and u = 0.9 (1 + 1/families) (capped at the extreme residual). A class or\n"
            "# metric missing here has no measured error (fewer than 3 residuals).\n")
    body = {"coverage": COVERAGE, "source": "benchmarks/perf_corpus_eval.py (grouped leave-one-family-out)",
            "lofo_coverage": result["intervals"]["coverage"], "classes": result["intervals"]["shipped"]}
    return head + yaml.safe_dump(body, sort_keys=False)


def plot(rows: list[dict], out_dir: Path) -> list[str]:
    """Residual PNGs (predicted/measured vs measured, per metric, coloured by class)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for m in METRICS:
        fig, ax = plt.subplots(figsize=(6, 4))
        for cls in sorted({r["class"] for r in rows}):
            pts = [(r["measured"][m], 100 * (math.exp(resid(r, m)) - 1)) for r in rows
                   if r["class"] == cls and resid(r, m) is not None]
            if pts:
                ax.scatter(*zip(*pts), label=f"{cls} ({len(pts)})", s=18)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel(f"measured {m}")
        ax.set_ylabel("(predicted - measured) / measured, %")
        ax.set_title(f"NPU step model, out of sample: {m}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        name = f"perf_residuals_{m}.png"
        fig.savefig(out_dir / name, dpi=90)
        plt.close(fig)
        files.append(name)
    return files


def markdown(result: dict) -> str:
    def cells(t):
        return " | ".join(f"{t[m]['mape_percent']} % ({t[m]['median_signed_percent']:+} %, {t[m]['rows']})"
                          if m in t else "–" for m in METRICS)
    c = result["corpus"]
    lines = []
    for f in result["terms"]:
        lines += [f"`{f['term']}`, refitted grouped leave-one-family-out over {f['grid']} (per left-out family: "
                  f"{', '.join(f'{k} {v:g}' for k, v in f['per_family'].items())}; on all rows "
                  f"{f['best_on_all_rows']:g}): out-of-sample loss {f['lofo_loss_refit']} against "
                  f"{f['lofo_loss_term_off']} with the term off, so "
                  + (f"it ships at {f['shipped']:g}." if f["adopted"] else
                     f"it is **not** adopted (ships at {f['shipped']:g})."), ""]
    lines += ["Every figure below is out of sample by family: each family's prediction at its own fold's values of "
              "the adopted terms, the whole chain of terms chosen on the other families' rows only (nested folds; "
              "the term-off model where none is adopted; the 11 fitted rows excepted).", ""]
    lines += [f"Corpus: {c['rows']} rows ({c['ci_rows']} CI baselines, {c['ci_expressible']} of them expressible; "
             f"{c['pr_rows']} curated), {c['models']} models, hardware {', '.join(c['hardware'])}; scored "
             f"{result['scored_rows']} rows ({result['failed_rows']} failed to plan). Spearman of output tokens/s "
             f"{result['spearman']}. Run {result['date']}, {result['seconds']} s.", ""]
    for key, title in (("all", "all rows"), ("hardware", "hardware"), ("family", "model family"),
                       ("quant", "quantization"), ("workload_kind", "workload kind"), ("class", "class")):
        lines += [f"| {title} | rows | tokens/s MAPE (median signed, n) | TPOT MAPE | TTFT MAPE |", "|---|---|---|---|---|"]
        for t in result["tables"][key]:
            lines.append(f"| {t['group']} | {t['rows']} | {cells(t)} |")
        lines.append("")
    wf = result["without_fitted_rows"][0] if result["without_fitted_rows"] else {}
    pr = (result["proxy_rows"]["all"] or [{}])[0]
    lines += [f"Without the 11 rows the five constants were fitted to: tokens/s "
              f"{wf.get('output_throughput', {}).get('mape_percent', '–')} %, TPOT "
              f"{wf.get('median_tpot_ms', {}).get('mape_percent', '–')} %, TTFT "
              f"{wf.get('median_ttft_ms', {}).get('mape_percent', '–')} % ({wf.get('rows', 0)} rows). "
              f"DeepSeek-V3.2 proxy rows ({result['proxy_rows']['rows']}, planned as deepseek_r1, in no table "
              f"above or interval): tokens/s {pr.get('output_throughput', {}).get('mape_percent', '–')} % "
              f"(median signed {pr.get('output_throughput', {}).get('median_signed_percent', '–')} %).", ""]
    cov = result["intervals"]["coverage"]
    lines += ["80 % intervals, grouped leave-one-family-out (fraction of left-out rows inside the interval of the "
              "other families of their class):", "",
              "| metric | covered | rows scored |", "|---|---|---|"]
    lines += [f"| {m} | {cov[m]['covered']} | {cov[m]['rows']} |" for m in METRICS]
    lines += [f"| all | {result['intervals']['coverage_all']} | {result['intervals']['scored']} "
              f"({result['intervals']['no_measured_error']} with no measured error) |", ""]
    if result.get("kept_out"):
        k = result["kept_out"]
        lines += [f"Kept-out check ({k['rows']} rows, never fitted or tuned on): tokens/s "
                  f"{k['all'].get('output_throughput', {}).get('mape_percent', '–')} %, TPOT "
                  f"{k['all'].get('median_tpot_ms', {}).get('mape_percent', '–')} %, TTFT "
                  f"{k['all'].get('median_ttft_ms', {}).get('mape_percent', '–')} %, Spearman {k['spearman']}, "
                  f"interval coverage {k['coverage']}.", ""]
    lines += ["| row | family | class | measured | predicted |", "|---|---|---|---|---|"]
    for r in result["rows"]:
        meas = ", ".join(f"{m} {v:g}" for m, v in r["measured"].items())
        pred = ", ".join(f"{m} {r['pred'][m]:.4g}" for m in r["measured"]) if r.get("pred") else r.get("error", "")
        lines.append(f"| {r['id']} | {r['family']} | {r.get('class', '')} | {meas} | {pred} |")
    lines += ["", "What the unexpressible CI rows lack (a row may lack several; "
              "`ascendflow/perfmodel/corpus/ci_rows.json` `unexpressible[].missing`):", "",
              "| missing knob | rows |", "|---|---|"]
    lines += [f"| {k} | {n} |" for k, n in result["missing_knobs"]]
    for p in result["plots"]:
        lines += ["", f"![{p}](img/{p})"]
    return "\n".join(lines) + "\n"


def kept_out_rows(git_dir: str) -> list[dict]:
    """The kept-out check's expressible CI rows, in :func:`fit_rows`' shape (imported now, never stored)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from import_ci_config import build_corpus

    return [{"id": r["id"], "family": re.search(r"\bmodel=(\S+)", " ".join(r["overrides"]))[1], "kind": "CI baseline",
             "citation": r["citation"], "measured": {r["metric"]: r["value"]}, "overrides": " ".join(r["overrides"])}
            for r in build_corpus(git_dir, kept_out_only=True)["rows"]]


def score_kept_out(git_dir: str, shipped: dict, terms: dict) -> dict:
    """Error and interval coverage of the shipped model on the kept-out rows (evaluation only)."""
    rows = predict_rows(kept_out_rows(git_dir), terms)
    ok = [r for r in rows if "pred" in r]
    inside = []
    for r in ok:
        for m in METRICS:
            q = (shipped.get(r["class"]) or {}).get(m)
            if q and (x := resid(r, m)) is not None:
                inside.append(q["q10_log"] <= x <= q["q90_log"])
    return {"rows": len(rows), "all": error_table([{**r, "all": "all"} for r in ok], "all")[0] if ok else {},
            "spearman": spearman(ok), "coverage": round(sum(inside) / len(inside), 3) if inside else None,
            "detail": [{k: r.get(k) for k in ("id", "measured", "pred", "class", "error")} for r in rows]}


def set_terms(path: Path, terms: dict) -> None:
    """Write the refitted terms into a calibration file: ``constants.prefill_efficiency`` (after
    ``mtp_accept_length``), ``constants.eager_full_factor`` (after it) and the top-level ``request_latency_s``
    (after ``hardware:``), replacing earlier lines."""
    text = path.read_text()
    why = "chosen by grouped leave-one-family-out (benchmarks/perf_corpus_eval.py)"
    pe = f"  prefill_efficiency: {terms['prefill_efficiency']:g}   # {why}: multiplier on gemm_efficiency for a step " \
         f"holding a prefill chunk"
    if "prefill_efficiency:" in text:
        text = re.sub(r"^  prefill_efficiency:.*$", lambda _: pe, text, flags=re.M)
    else:
        text = re.sub(r"^(  mtp_accept_length:.*)$", lambda m: m[1] + "\n" + pe, text, count=1, flags=re.M)
    ef = f"  eager_full_factor: {terms['eager_full_factor']:g}   # {why}: multiplier on eager_layer_overhead_s for " \
         f"a PIECEWISE model's step beyond its largest capture size (no graph replayed)"
    if "eager_full_factor:" in text:
        text = re.sub(r"^  eager_full_factor:.*$", lambda _: ef, text, flags=re.M)
    else:
        text = re.sub(r"^(  prefill_efficiency:.*)$", lambda m: m[1] + "\n" + ef, text, count=1, flags=re.M)
    rl = f"request_latency_s: {terms['request_latency_s']:g}   # {why}: client-to-engine time of a request, in TTFT"
    if re.search(r"^request_latency_s:", text, flags=re.M):
        text = re.sub(r"^request_latency_s:.*$", lambda _: rl, text, flags=re.M)
    else:
        text = re.sub(r"^(hardware: .*)$", lambda m: m[1] + "\n" + rl, text, count=1, flags=re.M)
    path.write_text(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--kept-out", metavar="GIT_DIR", help="a vllm-ascend git dir: also score the kept-out CI rows")
    args = ap.parse_args()
    t0 = time.perf_counter()
    corpus = fit_rows()
    proxy_rows = predict_rows([r for r in corpus if r.get("proxy")])
    rows, shipped_terms, refits = refit_terms([r for r in corpus if not r.get("proxy")])
    ok = [{**r, "all": "all"} for r in rows if "pred" in r]
    result = {"date": dt.date.today().isoformat(), "corpus": corpus_counts(), "scored_rows": len(ok),
              "failed_rows": len(rows) - len(ok),
              "tables": {k: error_table(ok, k) for k in ("all", "hardware", "family", "quant", "workload_kind",
                                                          "class")},
              "spearman": spearman(ok), "intervals": lofo_intervals(ok),
              "terms": refits, "shipped_terms": shipped_terms,
              "without_fitted_rows": error_table([r for r in ok if not r["fitted"]], "all"),
              "proxy_rows": {"rows": len(proxy_rows), "note": "DeepSeek-V3.2 planned as deepseek_r1 (DSA priced "
                             "dense): scored apart, in no interval", "all": error_table(
                                 [{**r, "all": "all"} for r in proxy_rows if "pred" in r], "all")}}
    result["seconds"] = round(time.perf_counter() - t0, 1)
    missing: dict[str, int] = {}
    for r in json.loads(CI_ROWS.read_text())["unexpressible"]:
        for k in r["missing"]:
            k = re.sub(r"^model .*\(no conf/model option\)$", "model without a conf/model option", k)
            missing[k] = missing.get(k, 0) + 1
    result["missing_knobs"] = sorted(missing.items(), key=lambda kv: (-kv[1], kv[0]))[:15]
    result["rows"] = [{k: r.get(k) for k in ("id", "family", "class", "hardware", "quant", "workload_kind",
                                             "citation", "measured", "pred", "fitted", "error")} for r in rows]
    if args.kept_out:
        result["kept_out"] = score_kept_out(args.kept_out, result["intervals"]["shipped"], shipped_terms)
    result["plots"] = [] if args.no_write else plot(ok, ROOT / "docs" / "img")
    print(json.dumps({k: result[k] for k in ("corpus", "spearman", "scored_rows")}, indent=1))
    print(json.dumps(result["tables"]["all"], indent=1), json.dumps(result["intervals"]["coverage"]))
    if args.no_write:
        return 0
    out = ROOT / "outputs" / "bench" / "perf_corpus_eval.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=1) + "\n"
    out.write_text(text)
    (ROOT / "benchmarks" / "data" / "perf_corpus_eval.json").write_text(text)
    INTERVALS.write_text(intervals_text(result))
    for hw in ("atlas_800i_a2", "atlas_800i_a2_910b4", "atlas_800i_a3", "atlas_300i_duo"):
        set_terms(CALIBRATION_DIR / f"{hw}.yaml", shipped_terms)
    doc = ROOT / "docs" / "performance_model.md"
    md = doc.read_text()
    block = f"<!-- corpus-eval -->\n{markdown(result)}<!-- /corpus-eval -->"
    md = re.sub(r"<!-- corpus-eval -->.*<!-- /corpus-eval -->", lambda _: block, md, flags=re.S) \
        if "<!-- corpus-eval -->" in md else md
    doc.write_text(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
