"""A 200-job plan sweep as issue 25 row 8 ran it: when its first line of its own and its first job appear, and its
last line; writes ``outputs/bench/sweep_lines_200.json``.

Runs ``python -m ascendflow -m engine.max_num_seqs='range(1,201)' run.mode=plan`` in a fresh temporary directory
(its own SQLite MLflow store), reading stdout as it comes: seconds until the ``sweep: 200 jobs …`` line, until
Hydra's ``#0 :`` line, and in all; the last line (``sweep done: 200 jobs, 200 finished, 0 failed; MLflow parent run
<id> FINISHED; compare them with: …``). Exit 1 when either sweep line is missing or the counts differ. Usage:
``python benchmarks/sweep_lines_200.py [--jobs 200]``. Measured here (2 shared, loaded cores): the ``sweep:`` line
after 14.7 s, Hydra's ``#0`` after 106 s (Hydra lists the 200 jobs in between), 419 s in all (2.1 s a job), exit 0
and ``sweep done: 200 jobs, 200 finished, 0 failed; …``; ``tests/test_sweep_lines.py`` runs a 2-job sweep.
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200, help="jobs of the sweep (engine.max_num_seqs=1..N)")
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "MLFLOW_TRACKING_URI": ""}
    with tempfile.TemporaryDirectory(prefix="af-sweep200-") as tmp:
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "ascendflow", "-m",
                                 f"engine.max_num_seqs=range(1,{args.jobs + 1})", "run.mode=plan"], cwd=tmp, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        first = job0 = None
        last = ""
        for line in proc.stdout:
            now = time.monotonic() - start
            if first is None and line.startswith("sweep: "):
                first = now
            if job0 is None and "#0 : " in line:
                job0 = now
            if line.strip():
                last = line.rstrip("\n")
        code = proc.wait()
        total = time.monotonic() - start
    result = {"jobs": args.jobs, "exit": code, "sweep_line_s": first, "job0_s": job0, "total_s": round(total, 1),
              "per_job_s": round(total / args.jobs, 2), "last_line": last}
    out = ROOT / "outputs" / "bench" / "sweep_lines_200.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    ok = first is not None and last.startswith(f"sweep done: {args.jobs} jobs, {args.jobs} finished, 0 failed;")
    return 0 if ok and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
