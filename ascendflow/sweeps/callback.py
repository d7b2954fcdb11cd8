"""The Hydra callback of a multirun (configured in ``conf/config.yaml``): refuse a bad sweep before any job, open the MLflow
parent run (:func:`ascendflow.tracking.sweep.open_parent`), hand it to every job, rank a capacity sweep and end the
parent with its children's counts. A capacity sweep with ``slo.measure_top`` also predicts every job's capacity
before any runs and hands the decision to the jobs in the same dict (:mod:`ascendflow.capacity.pruning`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ascendflow.interrupts import Terminated
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.tracking import TrackingSpec
from ascendflow.sweeps.announce import end_line, start_line
from ascendflow.sweeps.checks import (hardware_here, refuse_bad_measure_top, refuse_bad_search_space,
                                      refuse_bad_shared_values, refuse_parallel_engines,
                                      refuse_search_without_measurements)
from ascendflow.sweeps.size import refuse_oversized_sweep
from ascendflow.tracking.capacity_ranking import record_on_parent
from ascendflow.tracking.cluster import SWEEP_ENV, publish_sweep, refuse_local_store, start_server, stop_server
from ascendflow.tracking.server import wants_server
from ascendflow.tracking.store import open_client, refuse_unusable_store, tracking_uri
from ascendflow.tracking.sweep import (ACTIVE, end_open_parent, end_parent, open_parent, sweep_counts,
                                       swept_keys)
from ascendflow.tracking.sweep_predictions import predict_sweep
from ascendflow.capacity.pruning import KEY as PRUNING_KEY


def print_ranking(rows: list[dict[str, Any]]) -> None:
    """The capacity ranking as a table on the terminal (rich); pruned configs (``slo.measure_top``) last."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="capacity at the SLO, per server config")
    for col in ("rank", "config", "capacity req/s", "per device", "load", "p99 TTFT ms", "p99 TPOT ms", "Pareto"):
        # The config name is what the reader needs whole: it folds onto more lines instead of being cut ("engine.…").
        table.add_column(col, overflow="fold", min_width=24 if col == "config" else None)
    for r in rows:
        if r.get("pruned"):
            table.add_row("-", r["name"], f"pruned (predicted {r['predicted_capacity_rps']:.2f})", "", "", "", "",
                          "")
            continue
        table.add_row(str(r["rank"]), r["name"], f"{r['capacity_rps']:.2f}" if r["slo_met"] else "SLO not met",
                      f"{r['capacity_rps_per_device']:.2f}", f"{r['capacity_load']:g}",
                      f"{r['capacity_p99_ttft_ms']:.0f}", f"{r['capacity_p99_tpot_ms']:.1f}",
                      "yes" if r["pareto"] else "")
    Console(stderr=True).print(table)


def _pruning(config: DictConfig, measure_top: int) -> dict[str, Any]:
    """Predict every job's capacity, keep the top ``measure_top`` (:mod:`ascendflow.capacity.pruning`) and say so on
    one line; the result travels in the sweep dict to every job."""
    from ascendflow.capacity.pruning import decide

    configs = decide(predict_sweep(config, swept_keys(config)), measure_top)
    measured = [c for c in configs if c["measure"]]
    shown = "; ".join(f"{c['name']} ({c['predicted_capacity_rps']:.2f} req/s)" if c["predicted_capacity_rps"]
                      is not None else f"{c['name']} (not predicted)" for c in measured)
    print(f"capacity sweep: measuring {len(measured)} of {len(configs)} configs (slo.measure_top={measure_top}, by "
          f"predicted capacity): {shown}", file=sys.stderr)
    return {"measure_top": measure_top, "configs": configs}


class MlflowSweepCallback(Callback):
    """Hydra callback: the MLflow parent run of a multirun."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Refuse parallel engines and Optuna on plan-only jobs (exit 2, before any job); create the experiment and
        the parent run; write ``mlflow_sweep.json`` into the sweep directory; print the sweep's first line (how many
        jobs, the parent run: :func:`ascendflow.sweeps.announce.start_line`). (Hydra turns callback exceptions into
        warnings, so refusals and store errors exit here with ``SystemExit`` and one line.)"""
        mode = OmegaConf.select(config, "run.mode", default="auto")
        engines = mode in ("serve", "offline", "capacity") or (mode == "auto" and hardware_here(config))
        try:
            refuse_parallel_engines(OmegaConf.select(config, "hydra.launcher"), "serve" if engines else "plan")
            refuse_search_without_measurements(config, engines)
            refuse_oversized_sweep(config)
            refuse_bad_search_space(config)
            tracking = TrackingSpec.model_validate(OmegaConf.to_container(config.tracking, resolve=True))
            measure_top = refuse_bad_measure_top(config, tracking.enabled)
            refuse_bad_shared_values(config)
            sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
            if not tracking.enabled:
                print(start_line(config, sweep_dir, None), flush=True)
                return
            pruning = _pruning(config, measure_top) if measure_top is not None else None
            outputs = Path.cwd() / "outputs"
            # An unreachable tracking server fails in seconds instead of retrying for minutes (as TrackedRun does).
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
            server = wants_server(tracking)
            uri = None if server else tracking_uri(tracking, outputs)
            refuse_local_store(OmegaConf.select(config, "hydra.launcher"), tracking, uri)
            if uri is None:
                tracking = tracking.model_copy(update={"tracking_uri": start_server(tracking, outputs)})
            else:
                refuse_unusable_store(tracking, uri)
            self.sweep = open_parent(config, tracking, pruning)  # pickled into every job's process
            print(start_line(config, sweep_dir, self.sweep), flush=True)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        except (KeyboardInterrupt, Terminated):
            end_open_parent("KILLED")
            raise
        except Exception as exc:  # the store cannot be used: nothing started
            stop_server()
            print(f"error: tracking.tracking_uri: the MLflow store cannot record the sweep ({type(exc).__name__}: "
                  f"{str(exc).splitlines()[0][:200] if str(exc) else ''}); nothing was run", file=sys.stderr)
            raise SystemExit(1) from None

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """In the job's own process (this one, a Ray worker, a submitit job): hand it the parent run
        (``$ASCENDFLOW_SWEEP``), so jobs on machines that cannot read the sweep directory still nest under it."""
        sweep = getattr(self, "sweep", None)
        if sweep is not None:  # set only by on_multirun_start
            publish_sweep(sweep)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """End the parent FINISHED with the children's counts (failed children do not fail the sweep) and print the
        sweep's last line (:func:`ascendflow.sweeps.announce.end_line`: counts, parent run, compare command)."""
        sweep = ACTIVE.get("sweep")  # the parent this process opened (None: tracking off, or already ended)
        os.environ.pop(SWEEP_ENV, None)
        if sweep is None:
            stop_server()
            return
        sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
        try:  # a capacity sweep's ranking and Pareto plot; never stops the parent from ending

            client = open_client(sweep["tracking_uri"])
            children = client.search_runs([sweep["experiment_id"]], max_results=10000,
                                          filter_string=f"tags.mlflow.parentRunId = '{sweep['run_id']}' and "
                                                        f"attributes.status = 'FINISHED'")
            rows = record_on_parent(client, sweep["run_id"], children, sweep_dir, sweep.get(PRUNING_KEY))
            if rows:
                print_ranking(rows)
        except Exception as exc:
            print(f"warning: the capacity ranking was not recorded ({type(exc).__name__}: {exc})", file=sys.stderr)
        try:
            end_parent(sweep, "FINISHED")
            ACTIVE.pop("sweep", None)
            counts = sweep_counts(sweep["tracking_uri"], sweep["experiment_id"], sweep["run_id"])
            print(end_line(sweep, counts), flush=True)
            if counts and not counts.get("FINISHED"):
                print(f"error: no job of the sweep finished ({counts.get('FAILED', 0)} failed); see the FAILED child "
                      f"runs", file=sys.stderr)
                raise SystemExit(1)
        finally:
            ACTIVE.pop("sweep", None)
            stop_server()  # the sweep's own tracking server never outlives it
