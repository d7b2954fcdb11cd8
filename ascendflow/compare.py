"""``python -m ascendflow.compare [EXPERIMENT | PARENT_RUN_ID]``: compare the runs of a sweep.

Prints the parameters that vary across the sweep's child runs beside the key metrics (capacity at the SLO for a
``+sweep=capacity`` sweep: req/s, the load, goodput, whether the SLO was met; output tokens/s, requests/s, TTFT and TPOT
median and p99 in ms, predicted vs reported KV tokens and their error, the performance model's predicted
throughput/TPOT/TTFT and their ``*_rel_error``; a ``contended`` column when runs were judged for contention, a contended
run having no ``*_rel_error``: ``ascendflow.runner.contention``), writes ``comparison.csv`` and a Pareto plot (output
throughput against p99 TTFT, the front marked) as ``pareto.png``, and logs both as artifacts of the sweep's parent run.
PD runs (one per deployment, params ``prefill.*`` / ``decode.*``) also get their roles side by side, a row per role
(``roles.csv``); a PD run's own id is a target too. A run whose plan carries the source deployment's measured figures
(``run.baseline``, a migrated plan: ``python -m ascendflow.import --to ... --baseline``) gets them beside its own, a
row per figure (TTFT/TPOT/ITL/E2EL p50 and p99, throughputs) with the relative difference (``baseline.csv``;
:mod:`ascendflow.compare_baseline`); such a run's own id is a target too. A deployment search's parent
(``run.mode=search``: :mod:`ascendflow.search.record`) lists its candidates: every ``predicted_*`` / ``measured_*``
figure and the tags ``search.status`` / ``search.reason``. Default target: the latest sweep in the store. Uses
``mlflow.search_runs``.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ascendflow.compare_baseline import baseline_table, delta_cell, has_baseline
from ascendflow.search.record import MEASURED
from ascendflow.search.record import METRICS as SEARCH_PREDICTED
from ascendflow.tracking.store import existing_store

METRICS = ("capacity_rps", "predicted_capacity_rps", "measured_capacity_rps", "capacity_load", "capacity_goodput_rps",
           "slo_met",
           "output_throughput",
           "request_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms",
           "predicted_kv_cache_tokens", "reported_kv_cache_tokens", "kv_cache_tokens_rel_error",
           "predicted_output_throughput", "output_throughput_rel_error", "predicted_median_tpot_ms",
           "median_tpot_ms_rel_error", "predicted_median_ttft_ms", "median_ttft_ms_rel_error")
PARENT_FILTER = "tags.`ascendflow.sweep` = 'parent'"
#: A deployment search's children (:mod:`ascendflow.search.record`, tag ``search.status``): their predicted figures
#: (``predicted_`` + :data:`ascendflow.search.record.METRICS`), the measured ones of the picks served
#: (:data:`ascendflow.search.record.MEASURED`, ``measured_over_predicted``), then the tags ``search.status`` and
#: ``search.reason`` (the refusal of an infeasible candidate, the note of one not predicted), in that order after
#: the swept params.
SEARCH_METRICS = tuple("predicted_" + m for m in SEARCH_PREDICTED) + \
    tuple(m for m in (*MEASURED, "measured_over_predicted") if m not in METRICS)
SEARCH_TAGS = ("search.status", "search.reason")


class CompareError(RuntimeError):
    """No sweep matches the target, or the sweep has no children."""


def default_tracking_uri() -> str:
    """``$MLFLOW_TRACKING_URI``, else the default store ``sqlite:///<cwd>/outputs/mlflow/mlflow.db``."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(Path.cwd() / 'outputs/mlflow/mlflow.db').resolve()}"


def find_parent(client, target: str | None):
    """The parent run named by ``target`` (a run id, or an experiment name: its latest sweep), or the latest sweep.

    Raises:
        CompareError: nothing matches.
    """
    if target and re.fullmatch(r"[0-9a-f]{32}", target):
        from mlflow.exceptions import MlflowException

        try:
            run = client.get_run(target)
        except MlflowException:
            raise CompareError(f"no run {target} in this store (pass a sweep's parent run id or an experiment "
                               f"name)") from None
        if run.data.tags.get("ascendflow.sweep") != "parent" and "prefill.instances" not in run.data.params and \
                not has_baseline(run.data.params):
            raise CompareError(f"run {target} is not a sweep's parent run, a PD deployment's run nor a run with a "
                               f"baseline (run.baseline); pass the parent's id (tag ascendflow.sweep=parent) or an "
                               f"experiment name")
        return run
    if target:
        exp = client.get_experiment_by_name(target)
        if exp is None:
            raise CompareError(f"no experiment or run id {target!r} in this store")
        experiments = [exp.experiment_id]
    else:
        experiments = [e.experiment_id for e in client.search_experiments()]
    parents = client.search_runs(experiments, filter_string=PARENT_FILTER, order_by=["attributes.start_time DESC"],
                                 max_results=1)
    if not parents:
        raise CompareError(f"no sweep (multirun parent run) found{' in ' + target if target else ''}; run "
                           "`python -m ascendflow -m ...` first")
    return parents[0]


def swept_columns(columns: list[str], swept: list[str], varies) -> list[str]:
    """The run columns that show what a sweep varied: for a config group (``graph=eager,compiled``) its choice tag
    (``tags.choice.graph``); for a key, its param, or for a dict-valued key (``ascend.env={...}``) every param under
    it; only those that vary across runs (``varies(column)``). Without swept keys: every varying param."""
    params = [c for c in columns if c.startswith("params.")]
    if not swept:
        return [c for c in params if varies(c)]
    out: list[str] = []
    for key in swept:
        if f"tags.choice.{key}" in columns:
            found = [f"tags.choice.{key}"]
        else:
            found = [c for c in params if c == f"params.{key}" or c.startswith(f"params.{key}.")]
        out += [c for c in found if c not in out and varies(c)]
    return out


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points not dominated for (throughput up, p99 TTFT down), by descending throughput."""
    order = sorted(range(len(points)), key=lambda i: (-points[i][0], points[i][1]))
    front, best_ttft = [], float("inf")
    for i in order:
        if points[i][1] < best_ttft:
            front.append(i)
            best_ttft = points[i][1]
    return front


def compare(target: str | None, tracking_uri: str, out_dir: Path | None = None) -> tuple[object, Path, Path]:
    """Build the comparison of a sweep; returns (DataFrame, CSV path, PNG path) and logs both on the parent run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import mlflow
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    parent = find_parent(client, target)
    mlflow.set_tracking_uri(tracking_uri)
    alone = parent.data.tags.get("ascendflow.sweep") != "parent"  # one PD deployment's run: its roles
    runs = mlflow.search_runs([parent.info.experiment_id],
                              filter_string=(f"attributes.run_id = '{parent.info.run_id}'" if alone else
                                             f"tags.mlflow.parentRunId = '{parent.info.run_id}'"),
                              order_by=["attributes.start_time ASC"])
    if runs.empty:
        raise CompareError(f"sweep {parent.info.run_id} has no child runs")
    swept = [k for k in parent.data.tags.get("sweep.keys", "").split(",") if k]
    columns = swept_columns(list(runs.columns), swept, lambda c: runs[c].nunique(dropna=False) > 1)
    search = "tags.search.status" in runs.columns  # a deployment search's children: their figures and verdicts
    names = (*METRICS, *(m for m in SEARCH_METRICS if m not in METRICS)) if search else METRICS
    metrics = [f"metrics.{m}" for m in names if f"metrics.{m}" in runs.columns]
    tags = [f"tags.{t}" for t in SEARCH_TAGS if search and f"tags.{t}" in runs.columns]
    table = runs[["tags.mlflow.runName", "status", *columns, *metrics, *tags]].rename(
        columns=lambda c: c.removeprefix("params.").removeprefix("metrics.").removeprefix("tags.choice.")
        .replace("tags.mlflow.runName", "run").replace("tags.search.", "search."))
    if "tags.capacity.pruned" in runs.columns:  # a capacity sweep with slo.measure_top: which configs were measured
        table.insert(2, "measured", ~(runs["tags.capacity.pruned"].fillna("false") == "true"))
    if "tags.measurement.contention" in runs.columns:  # issue 25 row 9: its *_rel_error are not the model's
        table.insert(2, "contended", runs["tags.measurement.contention"].fillna("false") == "true")

    out_dir = out_dir or Path.cwd() / "outputs" / "compare" / parent.info.run_id
    out_dir.mkdir(parents=True, exist_ok=True)
    csv = out_dir / "comparison.csv"
    table.to_csv(csv, index=False)

    fig, ax = plt.subplots(figsize=(6, 4))
    done = table.dropna(subset=[c for c in ("output_throughput", "p99_ttft_ms") if c in table.columns])
    if {"output_throughput", "p99_ttft_ms"} <= set(done.columns) and not done.empty:
        points = list(zip(done["output_throughput"], done["p99_ttft_ms"]))
        front = pareto_front(points)
        ax.scatter(*zip(*points), color="grey", label="runs")
        ax.plot(*zip(*sorted(points[i] for i in front)), "o-", color="tab:red", label="Pareto front")
        for (x, y), name in zip(points, done["run"]):
            ax.annotate(str(name), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        table["pareto"] = [i in {done.index[j] for j in front} for i in table.index]
        table.to_csv(csv, index=False)
    ax.set_xlabel("output throughput (tokens/s)")
    ax.set_ylabel("p99 TTFT (ms)")
    ax.set_title(f"sweep {parent.info.run_name}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best")
    fig.tight_layout()
    png = out_dir / "pareto.png"
    fig.savefig(png, dpi=120)
    plt.close(fig)
    roles = role_table(runs)
    if roles is not None:
        roles.to_csv(out_dir / "roles.csv", index=False)
    base = baseline_table(runs)
    if base is not None:
        base[0].to_csv(out_dir / "baseline.csv", index=False)
        (out_dir / "baseline.title").write_text(base[1])
    for path in (csv, png, *([out_dir / "roles.csv"] if roles is not None else []),
                 *([out_dir / "baseline.csv"] if base is not None else [])):
        client.log_artifact(parent.info.run_id, str(path), artifact_path="comparison")
    return table, csv, png


#: The roles table's columns: (header, column of the runs DataFrame with ``{role}`` for the role; a callable for a
#: derived one). Each PD run gives two rows, prefill and decode, so the roles read side by side.
ROLE_COLUMNS = (("instances", "params.{role}.instances"), ("TP", "params.{role}.tensor_parallel_size"),
                ("DP", "params.{role}.data_parallel_size"), ("EP", "params.{role}.enable_expert_parallel"),
                ("max_num_seqs", "params.{role}.max_num_seqs"),
                ("max_batched_tokens", "params.{role}.max_num_batched_tokens"),
                ("graph", "params.{role}.cudagraph_mode"), ("capture sizes", "params.{role}.cudagraph_capture_sizes"),
                ("KV tokens/rank", "params.{role}.kv_cache_tokens"),
                ("pred req/s/inst", "metrics.predicted.{role}.capacity_rps"),
                ("pred p99 TTFT ms", "metrics.predicted.{role}.p99_ttft_ms"),
                ("pred p99 TPOT ms", "metrics.predicted.{role}.p99_tpot_ms"),
                ("P:D rec", "params.pd.recommended_ratio"))


def role_table(runs):
    """Rows ``(run, role)`` of the PD runs among ``runs`` (those with ``prefill.*`` params) with each role's layout,
    engine knobs, KV tokens and predicted capacity (:data:`ROLE_COLUMNS`); ``None`` without PD runs. Capture
    sizes are shown as ``count (first…last)``."""
    import pandas as pd

    if "params.prefill.instances" not in runs.columns:
        return None
    rows = []
    for _, run in runs[runs["params.prefill.instances"].notna()].iterrows():
        for role in ("prefill", "decode"):
            row = {"run": run["tags.mlflow.runName"], "role": role}
            for header, column in ROLE_COLUMNS:
                value = run.get(column.format(role=role))
                if header == "capture sizes" and isinstance(value, str) and value != "none":
                    sizes = value.split(",")
                    value = f"{len(sizes)} ({sizes[0]}…{sizes[-1]})"
                row[header] = value
            rows.append(row)
    return pd.DataFrame(rows)


#: Columns a capacity sweep's terminal table keeps (besides the run, its status and the swept keys).
CAPACITY_VIEW = ("measured", "capacity_rps", "predicted_capacity_rps", "capacity_load", "slo_met", "pareto")


#: Columns a deployment search's terminal table keeps (besides the run, its status and the swept params): the
#: predicted figures a candidate is ranked by, the measured ones of the picks served, its verdict and reason.
SEARCH_VIEW = ("predicted_capacity_rps", "predicted_tps_per_device", "predicted_tps_per_user", "predicted_p99_ttft_ms",
               "predicted_p99_tpot_ms", "predicted_rank", "measured_capacity_rps", "measured_rps_per_device",
               "measured_over_predicted", "search.status", "search.reason")


def terminal_view(table):
    """The columns worth a terminal's width: none that is empty in every run, for a capacity sweep only the
    capacity columns (:data:`CAPACITY_VIEW`), for a deployment search only :data:`SEARCH_VIEW`; the CSV keeps them
    all. ``table``: the DataFrame of :func:`compare`."""
    shown = table.dropna(axis=1, how="all")
    if "search.status" in shown.columns:
        swept = [c for c in shown.columns if c not in (*METRICS, *SEARCH_METRICS, *SEARCH_TAGS, "run", "status")]
        return shown[[c for c in ("run", "status", *swept, *SEARCH_VIEW) if c in shown.columns]]
    if "capacity_rps" in shown.columns or "measured" in shown.columns:
        swept = [c for c in shown.columns if c not in METRICS and c not in ("run", "status", *CAPACITY_VIEW)]
        shown = shown[[c for c in ("run", "status", *swept, *CAPACITY_VIEW) if c in shown.columns]]
    return shown


def cell(value: object) -> str:
    """A table cell: whole numbers without decimals (``46,592``; MLflow stores every metric as a float), others with
    two (``3.38``), a missing value (``NaN``: a pruned config has no measured capacity) as ``—``."""
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        return f"{value:,.0f}" if value.is_integer() else f"{value:,.2f}"
    return str(value)


def role_table_of(csv: Path):
    """The roles table written beside ``csv`` (``roles.csv``), or ``None``."""
    import pandas as pd

    path = csv.parent / "roles.csv"
    return pd.read_csv(path) if path.exists() else None


def roles_view(roles) -> Table:
    """The terminal table of :func:`role_table`'s rows: one column per role of each run (``prefill``, ``decode``;
    ``#<n> prefill`` ... when several runs, numbered in the order of the table above), one row per key."""
    runs = list(dict.fromkeys(roles["run"]))
    view = Table(title="PD roles side by side (every column in roles.csv)", title_justify="left")
    view.add_column("")
    keys = [c for c in roles.columns if c not in ("run", "role") and roles[c].notna().any()]
    columns = []
    for n, name in enumerate(runs, 1):
        for _, row in roles[roles["run"] == name].iterrows():
            view.add_column(row["role"] if len(runs) == 1 else f"#{n} {row['role']}", justify="right")
            columns.append(row)
    for key in keys:
        view.add_row(key, *(cell(row[key]) for row in columns))
    return view


def baseline_view(out_dir: Path) -> Table:
    """The terminal table of ``baseline.csv`` (:func:`ascendflow.compare_baseline.baseline_table`): one row per
    figure, the source's value, then each run's value and its relative difference."""
    import pandas as pd

    table = pd.read_csv(out_dir / "baseline.csv")
    view = Table(title=f"this run beside the {(out_dir / 'baseline.title').read_text()} (baseline.csv)",
                 title_justify="left")
    shown = [c for c in table.columns if c != "metric"]
    for column in shown:
        view.add_column(column, justify="left" if column == "figure" else "right")
    for _, row in table.iterrows():
        view.add_row(*(delta_cell(row["metric"], None if pd.isna(row[c]) else float(row[c])) if c.startswith("Δ ")
                       else cell(row[c]) for c in shown))
    return view


def main(argv: list[str] | None = None) -> int:
    """Command line entry: prints the table and where the CSV and PNG are. Exit code 2 when no sweep is found."""
    parser = argparse.ArgumentParser(prog="python -m ascendflow.compare", description=__doc__.splitlines()[0])
    parser.add_argument("target", nargs="?", help="experiment name or parent run id (default: the latest sweep)")
    parser.add_argument("--tracking-uri", default=None, help="MLflow store (default: $MLFLOW_TRACKING_URI or "
                                                             "outputs/mlflow/mlflow.db)")
    parser.add_argument("--out", type=Path, default=None, help="folder for comparison.csv and pareto.png")
    args = parser.parse_args(argv)
    console = Console(width=max(Console().width, 160))
    try:
        uri = existing_store(args.tracking_uri or default_tracking_uri())
        table, csv, png = compare(args.target, uri, args.out)
    except (CompareError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)  # one line, never wrapped
        return 2
    view = Table(title="sweep comparison (comparison.csv has every column)", title_justify="left")
    shown = terminal_view(table)
    for column in shown.columns:
        view.add_column(str(column), overflow="fold")
    for _, row in shown.iterrows():
        view.add_row(*(cell(v) for v in row))
    console.print(view)
    roles = role_table_of(csv)
    if roles is not None:
        console.print(roles_view(roles))
    if (csv.parent / "baseline.csv").exists():
        console.print(baseline_view(csv.parent))
    console.print(f"CSV: {csv}\nPareto plot: {png}\n(also logged on the sweep's parent run under comparison/)",
                  soft_wrap=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
