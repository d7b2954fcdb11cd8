"""``python -m ascendflow.perfmodel.fit --experiment NAME [--tracking-uri URI] [--hardware NAME] [--start FILE]
--out calib.yaml``: refit the NPU step model's constants to the measured runs of an MLflow experiment
(``run.mode=attach`` runs on your NPUs, or local served runs), write a calibration file that
``hardware.calibration=<file>`` points at, and print the error before and after the fit.

A run is used when it ended FINISHED with ``plan.json`` among its artifacts, measured at least one of
``output_throughput``, ``median_tpot_ms``, ``median_ttft_ms`` (a capacity search's figures are at its capacity load, not
the workload's: such runs are left out), not under contention (tag ``measurement.contention=true``: other processes or
engines took the host's CPU while it measured, :mod:`ascendflow.runner.contention`), on hardware with peak figures
(``hardware.peak_tflops_bf16``, ``hardware.memory_bandwidth_gbps`` params) and a workload of fixed lengths (``random``,
``prefix_repetition``: a chat workload's prompt lengths need its tokenizer). Its hardware, workload and quantization are
read back from the params the pipeline logged (``hardware.*``, ``workload.*``, ``quantization.*``). Bad input: one
``error:`` line, exit 2, no file.

Layer: entry points (this CLI reads MLflow); the fitting itself is :mod:`ascendflow.perfmodel.calibration.fitting`.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import logging
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

from ascendflow import console
from ascendflow.perfmodel.calibration import load_calibration
from ascendflow.perfmodel.calibration.fitting import DEFAULT_PRIOR_STRENGTH, FITTED, METRICS, START, Row, \
    calibration_text, error_table, fit_constants
from ascendflow.perfmodel.npu import NpuConstants
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.workload import WorkloadSpec


#: ``--help``'s description: plain text (the module docstring's first line is reStructuredText, cut mid-span).
DESCRIPTION = ("Refit the NPU step model's constants to the measured runs of an MLflow experiment, write a calibration "
               "file for hardware.calibration=<file>, and print the error before and after the fit.")


def _value(text: str) -> Any:
    """A param's value back from its text (``str(value)``, ``null`` for ``None``)."""
    if text == "null":
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def section(params: Mapping[str, str], prefix: str) -> dict[str, Any]:
    """The flattened params under ``prefix.`` back as a nested dict (:func:`ascendflow.tracking.flatten.
    flatten_params` reversed; lists too long to be logged stay absent)."""
    out: dict[str, Any] = {}
    for key, text in params.items():
        if key.startswith(prefix + "."):
            *parents, leaf = key[len(prefix) + 1:].split(".")
            node = out
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = _value(text)
    return out


def row_of(run: Any, plan: Mapping[str, Any]) -> tuple[Row | None, str]:
    """The run as a fitting row, or ``None`` with the reason it is left out."""
    params, metrics = run.data.params, run.data.metrics
    mismatch = run.data.tags.get("ascendflow.attach_mismatch")
    if mismatch:
        return None, (f"attached to a server that does not run the plan's {mismatch} (ascendflow.attach_mismatch; "
                      "run.attach_allow_mismatch=true)")
    if run.data.tags.get("measurement.contention") == "true":  # issue 25 row 9: the host was shared
        return None, ("measured under contention (measurement.contention: "
                      f"{run.data.tags.get('measurement.contention_reason', '?')})")
    if "capacity_rps" in metrics:
        return None, "a capacity search (its figures are at the capacity load, not the workload's)"
    measured = {m: float(metrics[m]) for m in METRICS if metrics.get(m, 0) > 0}
    if not measured:
        return None, f"no measured {', '.join(METRICS)}"
    hardware = section(params, "hardware")
    if not hardware.get("peak_tflops_bf16") or not hardware.get("memory_bandwidth_gbps"):
        return None, f"hardware {hardware.get('name')} has no peak_tflops_bf16 / memory_bandwidth_gbps"
    workload = WorkloadSpec.model_validate(section(params, "workload"))
    if workload.dataset == "chat":
        return None, "chat workload (its prompt lengths need the tokenizer)"
    return Row(run.info.run_id, plan, hardware, workload, section(params, "quantization"), measured), ""


def read_rows(uri: str, experiment: str, hardware: str | None) -> tuple[list[Row], list[str]]:
    """The usable runs of ``experiment`` (on ``hardware`` when given) and a line per run left out.

    Raises:
        ConfigError: the store cannot be opened, or has no such experiment.
    """
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # stderr holds the left-out lines
    from mlflow.tracking import MlflowClient

    logging.getLogger("mlflow").setLevel(logging.WARNING)  # its store-creation lines are not this CLI's output

    try:
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name(experiment)
    except Exception as exc:
        raise ConfigError("--tracking-uri", uri, f"cannot be used as an MLflow store ({type(exc).__name__}); use "
                                                 "an absolute sqlite:///<path>.db or an http(s) server") from None
    if exp is None:
        names = sorted(e.name for e in client.search_experiments())
        raise ConfigError("--experiment", experiment, f"no such experiment in {uri}; experiments there: {names}")
    rows, skipped = [], []
    runs = client.search_runs([exp.experiment_id], "attributes.status = 'FINISHED'", max_results=5000)
    for run in runs:
        if hardware and run.data.params.get("hardware.name") != hardware:
            skipped.append(f"{run.info.run_id}: hardware {run.data.params.get('hardware.name')}, not {hardware}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            try:
                plan = json.loads(Path(client.download_artifacts(run.info.run_id, "plan.json", tmp)).read_text())
            except Exception:  # no plan.json among its artifacts
                skipped.append(f"{run.info.run_id}: no plan.json")
                continue
        row, why = row_of(run, plan)
        rows.append(row) if row else skipped.append(f"{run.info.run_id}: {why}")
    return rows, skipped


def store_uri(given: str | None) -> str:
    """``--tracking-uri``, else ``$MLFLOW_TRACKING_URI``, else the pipeline's default store
    ``sqlite:///<cwd>/outputs/mlflow/mlflow.db`` (as :func:`ascendflow.tracking.store.tracking_uri`; not imported:
    the tracking layer imports the performance model)."""
    default = f"sqlite:///{Path.cwd().resolve() / 'outputs' / 'mlflow' / 'mlflow.db'}"
    return given or os.environ.get("MLFLOW_TRACKING_URI") or default


def _line(name: str, table: Mapping[str, Any]) -> str:
    cells = [f"{m} MAPE {table[m]['mape_percent']} % (median {table[m]['median_signed_percent']:+} %)"
             for m in METRICS if m in table]
    return f"{name}: " + "; ".join(cells)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (2: bad input, one ``error:`` line)."""
    ap = argparse.ArgumentParser(prog="python -m ascendflow.perfmodel.fit", description=DESCRIPTION)
    ap.add_argument("--experiment", required=True, help="MLflow experiment whose FINISHED runs are fitted")
    ap.add_argument("--tracking-uri", help="MLflow store (default: $MLFLOW_TRACKING_URI, else outputs/mlflow)")
    ap.add_argument("--hardware", help="hardware option whose runs are fitted (needed when the experiment has several)")
    ap.add_argument("--start", type=Path, help="calibration file to start from (default: the hardware's packaged one)")
    ap.add_argument("--out", type=Path, required=True, help="calibration file to write (for hardware.calibration=)")
    ap.add_argument("--max-nfev", type=int, default=60, help="least-squares iterations")
    ap.add_argument("--prior-strength", type=float, default=DEFAULT_PRIOR_STRENGTH,
                    help="weight (x runs) of the prior drawing each fitted constant's log toward the start "
                         f"calibration's (default {DEFAULT_PRIOR_STRENGTH:g}: chosen by exact leave-one-out on the "
                         "public rows, docs/performance_model.md; 0: plain least squares; inf: keep the start)")
    args = ap.parse_args(argv)
    try:
        if not args.prior_strength >= 0:
            raise ConfigError("--prior-strength", args.prior_strength, "must be >= 0 (0: no prior, inf: keep the "
                                                                       "start constants)")
        uri = store_uri(args.tracking_uri)
        rows, skipped = read_rows(uri, args.experiment, args.hardware)
        hardware = sorted({str(r.hardware.get("name")) for r in rows})
        if not rows:
            raise ConfigError("--experiment", args.experiment, "has no run to fit: " + ("; ".join(skipped[:3]) or
                                                                                        "no FINISHED run"))
        if len(hardware) > 1:
            raise ConfigError("--hardware", None, f"the runs are on {hardware}; fit one at a time (--hardware NAME)")
        start_file = args.start or None
        calibration = load_calibration(hardware[0], start_file)
        if args.start and calibration is None:
            raise ConfigError("--start", str(args.start), "file not found; give a calibration file or leave --start")
    except ConfigError as exc:
        console.fail_line(str(exc))
        return 2
    start = NpuConstants(**{k: float(v) for k, v in calibration["constants"].items()}) if calibration else START
    for line in skipped:
        print(f"left out {line}", file=sys.stderr)
    before = error_table(rows, start)
    fitted = fit_constants(rows, start, max_nfev=args.max_nfev, prior_strength=args.prior_strength)
    after = error_table(rows, fitted)
    header = [f"NPU step-model constants for hardware={hardware[0]}, fitted by python -m ascendflow.perfmodel.fit on "
              f"{dt.date.today().isoformat()}", f"to {len(rows)} run(s) of MLflow experiment {args.experiment}. Use "
              f"it with hardware.calibration={args.out}"]
    fit = {"experiment": args.experiment, "runs": [r.id for r in rows], "fitted": list(FITTED),
           "start": (calibration or {}).get("file", "ascendflow.perfmodel.calibration.fitting.START"),
           "method": "least squares on log(predicted/measured), all measured figures of every run, plus a prior "
                     "drawing each fitted constant's log toward the start's",
           "prior_strength": "inf" if args.prior_strength == float("inf") else args.prior_strength,
           "error_before": before}
    text = calibration_text(hardware[0], fitted, header, fit, {"all": after})
    text += f"error_label: python -m ascendflow.perfmodel.fit, in-sample on {len(rows)} run(s) of {args.experiment}\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(_line(f"before ({fit['start']})", before))
    print(_line("after (fitted)", after))
    print("constants: " + json.dumps({k: round(v, 6) for k, v in asdict(fitted).items() if k in FITTED}))
    print(f"calibration written to {args.out}; use it with hardware.calibration={args.out.resolve()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
