"""Interrupt plan-only sweeps at random moments and count how each ended; writes ``outputs/bench/interrupts.json``.

Each try starts ``python -m ascendflow -m '+recipe=glob(*)' engine.seed=0,1,2 run.mode=plan`` on a fresh SQLite
store, waits for job 0's plan, sleeps a random 0-1.5 s (so the signal lands anywhere: inside a job, an MLflow store
call, Hydra composing the next job) and sends SIGINT or SIGTERM. A try is good when the sweep exits 130 within 60 s
with no traceback and no run left RUNNING. Usage: ``python scripts/bench_interrupts.py --tries 100``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_try(work: Path, sig: int, delay_s: float) -> dict:
    """One interrupted sweep in ``work``; returns its outcome."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{work / 'mlflow.db'}"
    proc = subprocess.Popen([sys.executable, "-m", "ascendflow", "-m", "+recipe=glob(*)", "engine.seed=0,1,2",
                             "run.mode=plan"], cwd=work, env={**os.environ, "MLFLOW_TRACKING_URI": uri,
                                                               "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while not list(work.glob("outputs/multirun/*/*/0/plan.json")):
        if proc.poll() is not None:  # the sweep ended before its first plan: a broken set-up, not an interrupt
            return {"signal": None, "delay_s": 0, "exit": proc.returncode, "ok": False, "running_left": 0,
                    "last_line": "the sweep exited before job 0 wrote its plan",
                    "stderr_tail": proc.stderr.read()[-3000:]}
        time.sleep(0.05)
    time.sleep(delay_s)
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=60)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        code = "hang"
    experiments = [e.experiment_id for e in MlflowClient(uri).search_experiments()]
    running = [r.info.run_id for r in MlflowClient(uri).search_runs(experiments)
               if r.info.status == "RUNNING"] if experiments else []
    ok = code == 130 and "Traceback" not in err and not running
    return {"signal": signal.Signals(sig).name, "delay_s": round(delay_s, 3), "exit": code, "ok": ok,
            "running_left": len(running), "last_line": err.strip().splitlines()[-1][:200] if err.strip() else "",
            **({} if ok else {"stderr_tail": err[-3000:]})}


def main() -> None:
    """Run ``--tries`` interrupted sweeps and write the outcomes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench" / "interrupts.json")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows = []
    for i in range(args.tries):
        work = Path(tempfile.mkdtemp(prefix="af-interrupt-"))
        try:
            row = one_try(work, rng.choice([signal.SIGINT, signal.SIGTERM]), rng.uniform(0, 1.5))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        rows.append(row)
        print(i, row["signal"], row["delay_s"], row["exit"], "ok" if row["ok"] else "BAD", flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)  # written after every try: stopping early keeps them
        args.out.write_text(json.dumps({"tries": len(rows), "good": sum(r["ok"] for r in rows), "rows": rows},
                                       indent=2))
    print(f"{sum(r['ok'] for r in rows)}/{len(rows)} good; wrote {args.out}")


if __name__ == "__main__":
    main()
