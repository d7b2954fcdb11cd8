"""Rehearse the TP16 two-node recipe (``qwen3_235b_tp16_2nodes``, vLLM's ``--nnodes`` launcher) here and check it;
writes ``outputs/bench/rehearse/tp2_nnodes.json``.

Moved out of the test suite (``tests/engine/test_rehearsal.py``, issue 24 item 4): the ``--nnodes`` launcher path
(``mp-nnodes``: node 1 ``--headless`` with ``--node-rank``, ``--master-addr``/``--master-port``) is rehearsed in the
suite by the TP8 × PP2 recipe (``test_rehearse_pp2_across_two_nodes_with_nnodes``); this run adds TP across the two
"nodes" (TP16 on 2 × 8 devices → TP2 on 2 × 1 CPU "nodes", one tiny DeepSeek-V3 worker each). About 65-95 s on 2
cores.

Checked, as the test did: exit 0; no process left carrying the run directory; the rehearsed plan's launcher is
``mp-nnodes`` with ``tensor_parallel_size`` 2; node 1 logs vLLM's headless multiproc executor line; 4 of 4 requests
completed; one FINISHED MLflow run (its own SQLite store) with ``completed`` 4, ``rehearsal_of`` = the original plan's
hash and ``rehearsal.recipe``. Usage: ``python benchmarks/rehearse_tp2_nnodes.py [--keep DIR]``; exit 0 when every
check holds, 1 otherwise (each failed check printed).
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

import psutil

ROOT = Path(__file__).resolve().parents[1]
RECIPE = "qwen3_235b_tp16_2nodes"
#: The rehearsal arguments of ``tests/engine/test_rehearsal.py`` (a 4-prompt workload, short prompts and answers).
ARGS = [f"+recipe={RECIPE}", "run.mode=rehearse", "workload.num_prompts=4", "workload.max_concurrency=4",
        "workload.random_input_len=64", "workload.random_output_len=16"]
#: vLLM 0.32.0's line on node 1 (``vllm/entrypoints/cli/serve.py``, the headless node of a ``--nnodes`` run).
NODE1_LINE = "Launching vLLM (v0.32.0) headless multiproc executor, with head node address 127.0.0.1:"


def _leftovers(run_dir: Path) -> list[str]:
    """Command lines of live processes whose environment carries ``ASCENDFLOW_RUN_DIR=run_dir``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and proc.environ().get("ASCENDFLOW_RUN_DIR") == str(run_dir):
                found.append(" ".join(proc.info["cmdline"] or []))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def rehearse(work: Path) -> dict:
    """Run the rehearsal in ``work`` and return ``{"wall_s", "checks": {name: bool}, "detail"}``."""
    from mlflow.tracking import MlflowClient

    run_dir, uri = work / "run", f"sqlite:///{work / 'mlflow.db'}"
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env.update(MLFLOW_TRACKING_URI=uri, PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "ascendflow", *ARGS, f"hydra.run.dir={run_dir}"], cwd=work, env=env,
                          text=True, capture_output=True, timeout=600)
    wall = time.monotonic() - start
    checks: dict[str, bool] = {"exit 0": proc.returncode == 0, "no process left": _leftovers(run_dir) == []}
    detail = {"stderr_tail": proc.stderr[-2000:]} if proc.returncode else {}
    if proc.returncode == 0:
        original = json.loads((run_dir / "plan.json").read_text())
        rehearsed = json.loads((run_dir / "rehearsal" / "plan.json").read_text())
        node1_log = (run_dir / "rehearsal" / "node1.log").read_text(errors="replace")
        client = MlflowClient(tracking_uri=uri)
        runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
        run = runs[0] if len(runs) == 1 else None
        checks.update({
            "launcher mp-nnodes": rehearsed["launcher"] == "mp-nnodes",
            "tensor_parallel_size 2": rehearsed["engine_args"]["tensor_parallel_size"] == 2,
            "node 1 headless executor": NODE1_LINE in node1_log,
            "4 of 4 completed": json.loads((run_dir / "benchmark.json").read_text())["completed"] == 4,
            "one FINISHED run, completed 4": run is not None and run.info.status == "FINISHED"
            and run.data.metrics.get("completed") == 4,
            "tagged rehearsal_of and recipe": run is not None and run.data.tags.get("rehearsal_of") ==
            original["plan_hash"] and run.data.tags.get("rehearsal.recipe") == RECIPE,
        })
    return {"recipe": RECIPE, "wall_s": round(wall, 1), "checks": checks, **detail}


def main(argv: list[str] | None = None) -> int:
    """Rehearse, print each check, write ``outputs/bench/rehearse/tp2_nnodes.json``; 0 when all hold."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        result = rehearse(args.keep.resolve())
    else:
        with tempfile.TemporaryDirectory(prefix="rehearse_tp2_") as tmp:
            result = rehearse(Path(tmp))
    out = ROOT / "outputs" / "bench" / "rehearse" / "tp2_nnodes.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    for name, ok in result["checks"].items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    print(f"{result['wall_s']} s; {out}")
    return 0 if all(result["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
