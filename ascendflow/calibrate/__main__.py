"""``python -m ascendflow.calibrate ENGINE_LOG [--run RUN_ID | --plan plan.json|RUN_DIR] [--tracking-uri URI]``.

Reads a vLLM / vllm-ascend engine log, prints the plan beside it with the error of each item, writes
``outputs/calibration/<plan_hash>/calibration.json`` and records ``calib.<item>.{log,plan,error_pct}`` metrics, the log
and ``calibration.json`` on the plan's MLflow run (``--plan``: the latest run tagged with its ``plan_hash``, else a new
run in experiment ``calibration``; ``--run``: that run, compared with the ``plan.json`` it holds). Bad input: one
``error:`` line and exit code 2, nothing recorded; a log of another deployment than the plan's (model, TP, PP, DP,
``max_model_len``: :mod:`ascendflow.calibrate.consistency`) is bad input, and so is a ``--run`` without a plan.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ascendflow import console
from ascendflow.calibrate.compare import Calibration, Row, calibrate
from ascendflow.calibrate.consistency import deployment_differences
from ascendflow.calibrate.record import Target, plan_from_run, plan_target, record, run_target, store_uri, write_json
from ascendflow.runner.engine_facts import EngineLogFacts, parse_engine_facts
from ascendflow.schema.errors import ConfigError

GIB = 1 << 30
#: Sections every plan.json has (``shared/DESIGN.md`` §3).
PLAN_KEYS = ("plan_hash", "memory", "kv_cache", "graph")


def read_log(path: Path) -> EngineLogFacts:
    """Parse the engine log at ``path``.

    Raises:
        ConfigError: the file does not exist, or has no line this parser knows.
    """
    if path.is_dir():
        hint = " (it holds engine.log: give that file)" if (path / "engine.log").is_file() else ""
        raise ConfigError("ENGINE_LOG", str(path), f"is a directory{hint}; give the engine's log file (the output of "
                                                   "`vllm serve`, or engine.log in an ascendflow run directory)")
    if not path.is_file():
        raise ConfigError("ENGINE_LOG", str(path), "file not found; give the engine's log (the output of `vllm "
                                                   "serve`, or engine.log in an ascendflow run directory)")
    facts = parse_engine_facts(path.read_text(errors="replace"))
    if not facts.formats_seen:
        raise ConfigError("ENGINE_LOG", str(path), "no start-up line of vLLM or vllm-ascend found (\"KV cache size\", "
                                                   "\"Available KV cache memory\", \"Model loading took\", \"Graph "
                                                   "capturing finished\", ...); give the log of an engine that got as "
                                                   "far as allocating its KV cache")
    return facts


def read_plan(path: Path) -> dict[str, Any]:
    """Load ``plan.json``.

    Args:
        path: a ``plan.json``, or a run directory holding one.

    Raises:
        ConfigError: missing, a directory without ``plan.json``, not JSON, or without the plan's sections
            (:data:`PLAN_KEYS`).
    """
    if path.is_dir():
        if not (path / "plan.json").is_file():
            raise ConfigError("--plan", str(path), "is a directory without plan.json; give a run directory (outputs/"
                                                   "runs/<date>/<time>) or its plan.json")
        path = path / "plan.json"
    try:
        plan = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError("--plan", str(path), "file not found; give the plan.json of a run directory") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError("--plan", str(path), f"is not JSON ({exc}); give the plan.json of a run directory") from None
    missing = [k for k in PLAN_KEYS if not isinstance(plan, dict) or k not in plan]
    if missing:
        raise ConfigError("--plan", str(path), f"is not an ascendflow plan (no {', '.join(missing)}); give the "
                                               "plan.json that `python -m ascendflow run.mode=plan ...` wrote")
    return plan


def _fmt(row: Row, value: float | None, signed: bool = False) -> str:
    if value is None:
        return "—"
    sign = "+" if signed else ""
    if row.kind == "bytes":
        return f"{value / GIB:{sign},.2f} GiB"
    if row.kind == "count":
        return f"{value:{sign},.0f}"
    return f"{value:{sign}.4g}"


def print_table(calibration: Calibration, title: str) -> None:
    """The plan-beside-log table (✓: equal within the log's printed precision), the capture sizes and per-rank
    values."""
    out = Console(width=max(Console().width, 132), highlight=False)
    table = Table(title=title, title_justify="left")
    for name, justify in (("item", "left"), ("plan", "right"), ("log", "right"), ("error", "right"),
                          ("error %", "right"), ("plan says", "left"), ("log line", "left")):
        table.add_column(name, justify=justify)
    for row in calibration.rows:
        pct = "—" if row.error_pct is None else f"{row.error_pct:+.1f} %" + (" ✓" if row.match else "")
        table.add_row(row.item, _fmt(row, row.plan), _fmt(row, row.log), _fmt(row, row.error, signed=True), pct,
                      row.label, row.source or "—")
    out.print(table)
    cap = calibration.capture_sizes
    if cap["log"] is not None or cap["plan"] is not None:
        counts = (f"plan {len(cap['plan']) if cap['plan'] is not None else '—'}, log "
                  f"{len(cap['log']) if cap['log'] is not None else '—'} sizes")
        if cap["equal"] is None:
            verdict = "not compared"
        elif cap["equal"]:
            verdict = "equal"
        else:
            verdict = f"differ: only in plan {cap['only_in_plan']}, only in log {cap['only_in_log']}"
        out.print(f"capture sizes ({cap['label']}; log line {cap['source'] or '—'}): {counts}, {verdict}",
                  soft_wrap=True, markup=False)
        for side in ("log", "plan"):
            if cap[side] is not None:
                out.print(f"  {side + ':':5} {cap[side]}", soft_wrap=True, markup=False)
    for row in calibration.rows:
        if len(set(row.per_rank.values())) > 1:
            ranks = ", ".join(f"{k}={_fmt(row, v)}" for k, v in row.per_rank.items())
            out.print(f"{row.item} per rank: {ranks}", soft_wrap=True, markup=False)


def _resolve(args: argparse.Namespace) -> tuple[EngineLogFacts, dict[str, Any] | None, Target | None]:
    """Every input checked before anything is written: the log, the plan (a file, a run directory or a run's
    artifact) and that the log is of the plan's deployment (:func:`deployment_differences`)."""
    facts = read_log(args.engine_log)
    plan = read_plan(args.plan) if args.plan else None
    target = None
    if args.run:
        target = run_target(store_uri(args.tracking_uri), args.run)
        plan = plan_from_run(target.run)
        if plan is None:
            parent = " (a sweep's parent run: give the run id of one of its jobs)" if target.run.client.search_runs(
                [target.run.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{args.run}'",
                max_results=1) else ""
            raise ConfigError("--run", args.run, f"that run has no plan.json{parent}; give the run of a job that "
                                                 "compiled a plan, or --plan plan.json")
    if plan is not None and (differences := deployment_differences(plan, facts)):
        raise ConfigError("ENGINE_LOG", str(args.engine_log),
                          f"is the log of another deployment than plan {plan.get('plan_hash')}: "
                          f"{'; '.join(differences)}; give the engine log of this plan's run, or compile the plan of "
                          "the logged deployment (python -m ascendflow run.mode=plan with those values)")
    if plan is not None and target is None:  # --plan: the store is opened only for a consistent pair
        plan_dir = args.plan if args.plan.is_dir() else args.plan.parent
        target = plan_target(store_uri(args.tracking_uri), str(plan["plan_hash"]), run_dir=str(plan_dir.resolve()))
    return facts, plan, target


def main(argv: list[str] | None = None) -> int:
    """Command line entry; returns the exit code (2 for bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m ascendflow.calibrate",
        description="Print a vLLM / vllm-ascend engine log beside its plan with the error of each item, and record "
                    "the errors on the plan's MLflow run (or a new run in experiment 'calibration').")
    parser.add_argument("engine_log", type=Path, metavar="ENGINE_LOG", help="the engine's log file")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--run", help="MLflow run id to record on (its plan.json artifact is the plan)")
    which.add_argument("--plan", type=Path, help="plan.json, or the run directory holding it; recorded on the run "
                                                 "tagged with its plan_hash")
    parser.add_argument("--tracking-uri", default=None,
                        help="MLflow store (default: $MLFLOW_TRACKING_URI or outputs/mlflow/mlflow.db)")
    args = parser.parse_args(argv)
    # Store-creation notices would bury the one-line error: MLflow reads its level at import, and an already
    # imported MLflow (in-process callers) keeps its logger.
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        facts, plan, target = _resolve(args)
    except ConfigError as exc:
        console.fail_line(str(exc))
        return 2
    calibration = calibrate(plan, facts)
    title = f"calibration · {args.engine_log.name} · plan {calibration.plan_hash or '— (no plan)'}"
    print_table(calibration, title)
    if target is None:  # the log alone is only read: nothing is written or recorded (issue 20 row 12g)
        console.console.print("nothing written: give --plan PLAN or --run RUN_ID to record this log's errors",
                              soft_wrap=True, markup=False)
        return 0
    name = calibration.plan_hash or (target.run.run_id if target.run else "run")
    json_path = write_json(calibration, Path.cwd() / "outputs" / "calibration" / name)
    console.console.print(f"written: {json_path}", soft_wrap=True, markup=False)
    if target is not None:
        run_id = record(target, calibration, args.engine_log, json_path)
        new = " (new, experiment calibration)" if target.create else ""
        console.console.print(f"recorded on MLflow run {run_id}{new} in {target.uri}", soft_wrap=True, markup=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
