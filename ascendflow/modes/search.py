"""``run.mode=search``: choose a deployment. Enumerate, compile and rank the layouts of the ``search`` option at the
``slo`` targets (:mod:`ascendflow.search`), print the table and the refusals by reason, draw the Pareto front, write
the top-k recipes (plan and launch scripts each) and one MLflow child per candidate; the top pick is the run's plan.
With ``search.measure_top`` the top picks and a random control are then served here and capacity-searched
(:mod:`ascendflow.search.measure`), and the parent records whether the predicted order held.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape

from ascendflow import console
from ascendflow.capacity.search import load_range
from ascendflow.interrupts import Terminated
from ascendflow.compiler import Plan
from ascendflow.models.resolve import ResolvedModel
from ascendflow.modes.base import Job, Mode, Outcome
from ascendflow.perfmodel.attach import calibration_file, with_performance
from ascendflow.perfmodel.calibration import load_calibration
from ascendflow.platforms import platform_for
from ascendflow.runner.detect import hardware_present, host_facts
from ascendflow.runner.versions import verify_installed
from ascendflow.schema import ConfigError, RunSpec
from ascendflow.schema.quantization import QuantizationSpec
from ascendflow.search.evaluate import Evaluator
from ascendflow.search.output import candidates_json, pareto_png, table, write_recipe
from ascendflow.search.rank import rank_rows
from ascendflow.search.measure import measure, summary_lines
from ascendflow.search.pick import pick, verdict
from ascendflow.search.record import parent_fields, record_children, record_measured
from ascendflow.search.run import SearchResult, search

CONF = Path(__file__).resolve().parents[2] / "conf"


def quantization_options(spec: RunSpec) -> dict[str, QuantizationSpec]:
    """``search.quantizations`` as specs (``conf/quantization/<name>.yaml``), else the run's own.

    Raises:
        ConfigError: a name with no option file.
    """
    if not spec.search.quantizations:
        return {spec.quantization.name: spec.quantization}
    out = {}
    for name in spec.search.quantizations:
        path = CONF / "quantization" / f"{name}.yaml"
        if not path.is_file():
            known = ", ".join(sorted(p.stem for p in (CONF / "quantization").glob("*.yaml")))
            raise ConfigError("search.quantizations", name, f"no quantization option of that name; known: {known}")
        out[name] = QuantizationSpec.model_validate(yaml.safe_load(path.read_text()))
    return out


def request_lengths(spec: RunSpec) -> tuple[int, int]:
    """``(ISL, OSL)`` of the workload (random: its lengths; prefix_repetition: prefix + suffix).

    Raises:
        ConfigError: the chat dataset (no fixed lengths to size decode KV and rate-match PD roles).
    """
    wl = spec.workload
    if wl.dataset == "chat":
        raise ConfigError("workload", wl.name, "a deployment search needs fixed request lengths: use workload=random "
                                               "with workload.random_input_len / random_output_len")
    return wl.random_input_len + (wl.prefix_suffix_len if wl.dataset == "prefix_repetition" else 0), \
        wl.random_output_len


class SearchMode(Mode):
    """The deployment search (docs/search.md)."""

    name = "search"
    needs_hardware = False
    needs_weights = False
    runs_engine = False
    supports_pd = True

    def __init__(self) -> None:
        self.result: SearchResult | None = None
        self.lines: list[str] = []
        self._perf: dict[str, Plan] = {}
        self.picks: list[tuple[dict[str, Any], str]] = []
        self.children: dict[int, str] = {}

    def _priced(self, plan: Plan, spec: RunSpec) -> Plan:
        """``plan`` with its full ``performance`` section (:func:`ascendflow.perfmodel.attach.with_performance`),
        computed once per plan hash (the interval of a group and its recipe are often the same plan)."""
        if plan.plan_hash not in self._perf:
            self._perf[plan.plan_hash] = with_performance(plan, spec, None, Path.cwd())
        return self._perf[plan.plan_hash]

    def check(self, spec: RunSpec) -> None:
        """Refuse what cannot be searched, before anything is loaded; a search that measures its picks
        (``search.measure_top``) loads the model's weights.

        Raises:
            ConfigError: ``search.measure_top`` where the hardware is not on this machine, or with the API key
                variable unset; no SLO target, a chat workload, requests longer than ``engine.max_model_len``.
        """
        if spec.search.measure_top is not None:
            if not hardware_present(spec.hardware):
                raise ConfigError("search.measure_top", spec.search.measure_top,
                                  f"serves each pick on this machine, and hardware={spec.hardware.name} "
                                  f"({spec.hardware.kind}) is not here; drop search.measure_top to plan only (the "
                                  "recipes are written), then start a recipe on your nodes and measure it with "
                                  "run.mode=attach run.attach_capacity=true run.server_url=http://<node0>:<port>")
            key = spec.run.api_key_env
            if key and not os.environ.get(key):
                raise ConfigError("run.api_key_env", key, f"the variable is not set; export {key}=<key> before the "
                                                          "run (its value is never written)")
            self.needs_weights = True  # the picks are served
        load_range(spec.slo, spec.workload)
        isl, osl = request_lengths(spec)
        if spec.engine.max_model_len is not None and spec.engine.max_model_len < isl + osl:
            raise ConfigError("engine.max_model_len", spec.engine.max_model_len,
                              f"below the workload's {isl} + {osl} tokens per request: every candidate would refuse "
                              f"it; set engine.max_model_len={-(-(isl + osl) // 1024) * 1024}")

    def plan(self, spec: RunSpec, model: ResolvedModel, job: Job) -> Plan:
        """Search, write the table, PNG, recipes and children, and return the top pick's plan.

        Raises:
            ConfigError: no feasible candidate (with the refusals by reason); none meets the SLO (with the nearest
                SLO one candidate meets).
        """
        nodes = spec.search.nodes or spec.parallel.nodes
        quants = quantization_options(spec)
        calibration = (load_calibration(spec.hardware.name, calibration_file(spec))
                       if platform_for(spec.hardware.kind).step_calibration else None)
        host = host_facts(spec.hardware)
        evaluator = Evaluator(spec, model.architecture, model_path=model.path or spec.model.path or spec.model.id,
                              host=host, checkpoint=model.checkpoint, draft=None, quantizations=quants,
                              calibration=calibration)
        with console.step(f"deployment search: {spec.model.name} on {nodes} × {spec.hardware.name}") as update:
            result = search(spec, evaluator, nodes, progress=update)
        self.result = result
        counts = result.counts
        targets = " and ".join(f"{k.removeprefix('p99_').removesuffix('_ms').upper()} p99 <= {v:g} ms"
                               for k, v in spec.slo.targets.items())
        feasible = [r for r in result.rows if r["status"] != "infeasible"]
        self.lines = [f"{counts.enumerated} candidates enumerated ({result.compiles} compiles, {result.priced} "
                      f"capacity searches, {result.seconds:.1f} s, {result.cpu_seconds:.1f} s CPU); {counts.line()}"]
        self.lines += [f"{n} pruned: {why}" for why, n in counts.pruned.items()]
        if not feasible:
            raise ConfigError("search.nodes", nodes, f"no feasible candidate for {spec.model.name} on {nodes} × "
                                                     f"{spec.hardware.name}: {counts.line()}; give more nodes "
                                                     "(search.nodes) or a smaller quantization (search.quantizations)")
        if not result.ranked:
            near = result.nearest
            fix = " ".join(f"slo.{k}={math.ceil(v)}" for k, v in near.items()) if near else "a looser SLO"
            raise ConfigError("slo", {k: v for k, v in spec.slo.targets.items()},
                              f"no candidate meets {targets} at any load ({len(feasible)} feasible); the nearest SLO "
                              f"a candidate meets: {fix}")
        self._intervals(result, evaluator, spec.search.pd_connector)
        if spec.search.measure_top is not None:  # refused here, before any engine starts
            s = spec.search
            self.picks = pick(result.ranked, len(feasible), s.measure_top, s.measure_random, s.measure_seed)
            for row, why in self.picks:
                row["measure"] = why
        out = job.run_dir / "search"
        title = (f"{spec.model.name} [{', '.join(quants)}] on {nodes} × {spec.hardware.name} · "
                 f"ISL {evaluator.isl} / OSL {evaluator.osl} · {targets}")
        Console(width=max(console.console.width, 170), highlight=False).print(table(result.ranked[:spec.search.show],
                                                                                   title))
        png = pareto_png(result.ranked, out / "pareto.png", title)
        top = self._recipes(spec, result, evaluator, out, job, targets)
        candidates_json(result.rows, out / "candidates.json", {"counts": counts.as_dict(), "seconds": result.seconds,
                                                               "cpu_seconds": result.cpu_seconds,
                                                               "nodes": nodes, "slo": spec.slo.targets})
        self.lines.append(f"Pareto front: {png}; candidates: {out / 'candidates.json'}")
        if job.tracked.enabled and job.tracked.run_id:
            job.tracked.set_tags({"ascendflow.sweep": "parent", "sweep.keys": "kind,layout,quantization,"
                                  "cudagraph_mode,max_num_seqs,max_num_batched_tokens,prefill_instances,"
                                  "decode_instances"})
            shown = {r["id"] for r in result.ranked[:spec.search.show]} | {r["id"] for r in result.rows
                                                                           if r.get("recipe") or r.get("measure")}
            rows = [r for r in result.rows if spec.search.children != "shown" or r["id"] in shown]
            self.children = record_children(job.tracked.client, job.tracked.experiment_id, job.tracked.run_id,
                                            rows, "all" if spec.search.children == "shown" else spec.search.children)
            job.tracked.log_metrics({"search_candidates": float(counts.enumerated),
                                     "search_infeasible": float(sum(counts.infeasible.values())),
                                     "search_ranked": float(len(result.ranked)), "search_seconds": result.seconds})
            self.lines.append(f"MLflow: {len(self.children)} child runs under the search's run (python -m "
                              "ascendflow.compare)")
            job.tracked.log_artifact(png, "search")
            job.tracked.log_artifact(out / "candidates.json", "search")
        return top

    def _intervals(self, result: SearchResult, evaluator: Evaluator, connector: str) -> None:
        """Each group's (kind × quantization) interval ratio, read from the full prediction of its best plan
        (``performance.pd_ratio.planned.throughput_rps_low/high`` of a PD group's whole plan, else
        ``performance.capacity.capacity_rps_low/high``, else ``predicted_low/high.output_throughput``), applied
        to every row of the group; then the rows are ranked again (ties by overlap)."""
        seen: dict[tuple[str, str], tuple[float, float] | None] = {}
        for row in result.ranked:
            key = (row["kind"], row["quantization"])
            if key not in seen:
                seen[key] = None
                if row["id"] in result.plans:
                    perf = self._priced(result.plans[row["id"]], result.specs[row["id"]]).performance or {}
                    seen[key] = interval_ratio(perf)
                elif row.get("_pd"):  # the whole PD plan, as its recipe compiles it (priced once per plan hash)
                    quant, prc, drc, p, d = row["_pd"]
                    cand_spec = evaluator.pd_spec(quant, prc, drc, p, d, connector)
                    try:
                        plan = evaluator.compile(cand_spec)
                    except ConfigError:
                        plan = None
                    if plan is not None:
                        seen[key] = interval_ratio(self._priced(plan, cand_spec).performance or {})
            ratio = seen[key]
            if ratio is not None:
                row["tps_low"], row["tps_high"] = row["tps_per_device"] * ratio[0], row["tps_per_device"] * ratio[1]
        statuses = {k: ("interval from the model's measured error" if v else "no measured error")
                    for k, v in seen.items()}
        self.lines.append("intervals: " + "; ".join(f"{k[0]} {k[1]}: {v}" for k, v in statuses.items()))
        result.ranked = rank_rows(result.ranked)

    def _recipes(self, spec: RunSpec, result: SearchResult, evaluator: Evaluator, out: Path, job: Job,
                 targets: str) -> Plan:
        written: list[Plan] = []
        n_ranked = len(result.ranked)
        for row in result.ranked:
            if len(written) >= spec.search.top_k:
                break
            if row["kind"] == "pd":
                quant, prc, drc, p, d = row["_pd"]
                cand_spec = evaluator.pd_spec(quant, prc, drc, p, d, spec.search.pd_connector)
                try:
                    plan = evaluator.compile(cand_spec)
                except ConfigError as exc:
                    self.lines.append(f"rank {row['rank']} {row['label']}: the whole PD plan is refused ({exc}); next")
                    continue
            else:
                cand_spec, plan = result.specs[row["id"]], result.plans[row["id"]]
            plan = self._priced(plan, cand_spec)
            name = f"search_{len(written) + 1}_{row['kind']}_{row['layout'].replace(' ', '_').replace(':', '')}" \
                .lower()
            interval = (f" [{row['tps_low']:.1f}, {row['tps_high']:.1f}]" if row.get("tps_low") is not None
                        else " (no measured error)")
            why = [f"rank {'=' if row.get('tie') else ''}{row['rank']} of {n_ranked} ranked by predicted goodput per "
                   f"device at {targets}" + (" (a tie: its interval overlaps the best's)" if row.get("tie") else ""),
                   f"{row['label']}",
                   f"{row['tps_per_device']:.1f} output tok/s per device{interval}, {row['capacity_rps']:.2f} req/s "
                   f"on {row['devices']} devices, {row['tps_per_user']:.1f} tok/s per user, margin "
                   f"{row['margin_percent']:.0f} % to the SLO",
                   f"search: {result.counts.enumerated} candidates, {result.counts.line()}",
                   f"estimate: {(plan.performance or {}).get('source', 'performance model')}"]
            path = write_recipe(cand_spec, plan, name, why, out / "recipes")
            self.lines.append(f"recipe {len(written) + 1}: {path} (plan and launch scripts in "
                              f"{out / 'recipes' / name})")
            row["recipe"] = str(path)
            written.append(plan)
        if not written:
            raise ConfigError("search.top_k", spec.search.top_k, "no ranked candidate compiled as a whole plan")
        return written[0]

    def run(self, plan: Plan, job: Job) -> Outcome:
        """Print the search's lines (tallies, intervals, recipes, MLflow); with ``search.measure_top``, first serve
        and capacity-search each pick (:func:`ascendflow.search.measure.measure`) and record the measured capacity on
        its child, the rank correlation and the predicted against the measured best on the parent
        (``search/measured.json`` too).

        Raises:
            VersionMismatchError: the installed engine is not the plan's; EngineStartError: every pick's engine
                failed.
        """
        warnings: list[str] = []
        if self.picks and self.result is not None:
            verify_installed(plan.target.engine)
            out = job.run_dir / "search" / "measured"
            rows = [r for r, _ in self.picks]
            try:
                with job.tracked.system_metrics(), console.step(
                        f"measuring {len(self.picks)} picks: serve each, capacity search at the SLO") as update:
                    _, warnings = measure(self.picks, self.result.specs, self.result.plans, out, update,
                                                 job.secrets)
            except (KeyboardInterrupt, Terminated):  # as a sweep's jobs: the one being served KILLED (then the parent)
                if job.tracked.enabled and job.tracked.run_id:
                    record_measured(job.tracked.client, self.children, rows)
                raise
            seed = job.spec.search.measure_seed
            self.lines += summary_lines(rows, len(self.picks), seed)
            judged = verdict(rows)
            if judged["held"] is None and judged["predicted_best"] is not None:
                warnings.append(f"the predicted best, {escape(judged['predicted_best']['label'])}, was not measured: "
                                "the rank correlation is over the measured picks only, and search_best_held is not "
                                "recorded")
            metrics, tags = parent_fields(judged, len(self.picks))
            keep = ("id", "label", "rank", "tie", "measure", "rps_per_device", "capacity_rps", "measure_error",
                    "measure_state")
            (out / "measured.json").write_text(json.dumps(
                {"seed": seed, **metrics, **tags, "candidates": [
                    {k: x for k, x in r.items() if k in keep or k.startswith("measured_")}
                    for r, _ in self.picks]}, indent=1))
            if job.tracked.enabled and job.tracked.run_id:
                record_measured(job.tracked.client, self.children, rows)
                job.tracked.log_metrics(metrics)
                job.tracked.set_tags(tags)
                job.tracked.log_artifact(out / "measured.json", "search")
        console.info_lines(self.lines)
        return Outcome(plan, warnings=warnings)


def interval_ratio(performance: dict[str, Any]) -> tuple[float, float] | None:
    """``(low / figure, high / figure)`` of a ``performance`` section: the capacity's
    ``capacity_rps_low/high``, else ``predicted_low/high`` output throughput; ``None`` when neither is there (the
    interval contract's "no measured error"). A PD plan's is its planned P:D throughput's
    (``pd_ratio.planned.throughput_rps_low/high``, :func:`ascendflow.perfmodel.pd_ratio._pd_interval`)."""
    planned = (performance.get("pd_ratio") or {}).get("planned") or {}
    if planned.get("throughput_rps") and planned.get("throughput_rps_low") is not None and \
            planned.get("throughput_rps_high") is not None:
        return (float(planned["throughput_rps_low"]) / planned["throughput_rps"],
                float(planned["throughput_rps_high"]) / planned["throughput_rps"])
    cap = performance.get("capacity") or {}
    if cap.get("capacity_rps") and cap.get("capacity_rps_low") is not None and cap.get("capacity_rps_high") is not None:
        return float(cap["capacity_rps_low"]) / cap["capacity_rps"], float(cap["capacity_rps_high"]) / cap["capacity_rps"]
    pred, low, high = (performance.get(k) or {} for k in ("predicted", "predicted_low", "predicted_high"))
    if pred.get("output_throughput") and low.get("output_throughput") is not None and \
            high.get("output_throughput") is not None:
        return (float(low["output_throughput"]) / pred["output_throughput"],
                float(high["output_throughput"]) / pred["output_throughput"])
    return None
