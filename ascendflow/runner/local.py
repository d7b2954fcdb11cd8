"""Local execution of a plan: serve + benchmark, or offline generation. Every child process is stopped on exit."""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator

from ascendflow.compiler import Plan
from ascendflow.interrupts import Terminated
from ascendflow.profiling import profiler_config_arg, summarize_profile
from ascendflow.runner.bench import WAIT_S_ENV, WAIT_URL_ENV, bench_argv, bench_command_text, progress_from_log
from ascendflow.runner.engine_log import parse_engine_log_file
from ascendflow.runner.engine_metrics import WindowMetrics
from ascendflow.runner.contention import HostWindow
from ascendflow.runner.neighbours import other_engine_runs
from ascendflow.runner.process import ManagedProcess
from ascendflow.runner.server import (
    RUN_DIR_ENV,
    EngineDiedError,
    EngineStartError,
    engine_down,
    engine_env,
    engine_failure,
    free_port,
    local_argv,
    wait_healthy,
)
from ascendflow.workloads.chat import chat_requests
from ascendflow.schema.spec import RunSpec

Status = Callable[[str], None]


@dataclass
class Serving:
    """A healthy vLLM server: a local one (see :func:`serving`), or a running deployment this machine did not start
    (``run.mode=attach``: ``server`` is ``None`` and ``log_path`` is the benchmark client's log, the engine's being
    on its nodes)."""

    server: ManagedProcess | None
    base_url: str
    health_url: str
    api_key: str | None
    start_s: float
    port: int | None
    log_path: Path
    client: ManagedProcess | None = None


#: Starts a process beside the engine while it loads: called with (base URL, ``/health`` URL, API key or None).
Prestart = Callable[[str, str, "str | None"], ContextManager[ManagedProcess]]


@contextlib.contextmanager
def serving(plan: Plan, spec: RunSpec, run_dir: Path, status: Status,
            secrets: dict[str, str] | None = None, prestart: Prestart | None = None) -> Iterator[Serving]:
    """Start node 0's ``vllm serve`` of ``plan`` here and wait for ``/health``; the whole process group is stopped
    when the block exits (normally, on error or on Ctrl-C).

    ``prestart`` (optional) starts one more process right after the engine's, before the engine is healthy (the
    benchmark client, :func:`bench_client` with ``wait_for``); it is stopped before the engine when the block exits,
    and handed over as ``Serving.client``.

    Args:
        plan: the compiled plan (node 0's argv and environment are used).
        spec: the run spec (run options: host, port, timeouts, API key, profiler).
        run_dir: where ``engine.log`` and ``serve_command.txt`` go.
        status: callback for progress lines.
        secrets: values of the plan's ``${NAME}`` references (secret environment values, the API key), given to the
            engine's environment only, never written.

    Raises:
        EngineStartError: the server died or did not become healthy within ``run.health_timeout_s``.
        ConfigError: a ``${NAME}`` reference of the plan has no value (see :func:`engine_env`).
    """
    host = spec.run.host
    port = spec.run.port or free_port(host)
    argv = local_argv(plan, host, port) + (profiler_config_arg(run_dir) if spec.run.profile else [])
    log_path = run_dir / "engine.log"
    secrets = secrets or {}
    api_key = secrets.get(spec.run.api_key_env) if spec.run.api_key_env else None
    (run_dir / "serve_command.txt").write_text(" ".join(argv) + "\n")
    health_url = f"http://{host}:{port}/health"
    base_url = f"http://{host}:{port}"
    with ManagedProcess(argv, engine_env(plan, run_dir, secrets), log_path, spec.run.shutdown_grace_s,
                        what="the engine") as server, \
            (prestart(base_url, health_url, api_key) if prestart else contextlib.nullcontext()) as early:
        status(f"engine starting on {host}:{port} (log: {log_path})")
        start_s = wait_healthy(server, health_url, spec.run.health_timeout_s,
                               tick=lambda s: status(f"waiting for the engine's /health … {s:.0f} s"))
        yield Serving(server, base_url, health_url, api_key, start_s, port, log_path, early)


def check_alive_after(srv: Serving, benchmark: dict[str, Any] | None) -> None:
    """The shutdown stage: the engine must still be up once the last request was answered.

    Raises:
        EngineDiedError: stage ``shutdown``, carrying ``benchmark``.
    """
    if (down := engine_down(srv.server, srv.health_url)) is not None:
        raise EngineDiedError(engine_failure(f"engine died after the benchmark ({down})", srv.log_path),
                              "shutdown", benchmark)


def serve_and_benchmark(plan: Plan, spec: RunSpec, run_dir: Path, status: Status,
                        secrets: dict[str, str] | None = None) -> dict[str, Any]:
    """Start the server (:func:`serving`), run vLLM's benchmark client once, stop the server.

    The client process starts with the engine and imports vLLM's benchmark module while the engine loads; it sends
    its first request once ``/health`` answers (:func:`ascendflow.runner.bench.wait_then_run`), so its start-up is
    not added to the run's wall time. The benchmark itself is exactly ``vllm bench serve`` with the same arguments.

    Returns:
        ``{"benchmark": <vLLM result dict>, "engine": <facts from the log>, "engine_start_s": float, "port": int,
        "engine_metrics": <vLLM /metrics over the window, see WindowMetrics.summary>, "concurrent_engines": <run
        directories of other ascendflow engines live on this host at the benchmark's start or end>, "contention":
        <the host over the benchmark window: :meth:`ascendflow.runner.contention.Contention.to_json`>}``.

    Raises:
        EngineStartError: the server died or did not become healthy within ``run.health_timeout_s``.
        EngineDiedError: the engine died after it was healthy (warm-up, benchmark or shutdown stage).
        ConfigError: a ``${NAME}`` reference of the plan has no value (see :func:`engine_env`).
    """
    def client(base_url: str, health_url: str, api_key: str | None) -> ManagedProcess:
        args = bench_argv(spec.workload, base_url=base_url, served_model_name=spec.model.served_name,
                          tokenizer=plan.engine_args["model"], run_dir=run_dir)
        args += ["--profile"] if spec.run.profile else []  # /start_profile, /stop_profile around the window
        (run_dir / "bench_command.txt").write_text(bench_command_text(args, sys.executable, spec.run.api_key_env))
        return bench_client(args, run_dir, api_key, spec.run.shutdown_grace_s, wait_for=health_url,
                            wait_s=spec.run.health_timeout_s)

    host = HostWindow()  # this process's tree: the engine and the client are its children
    host.before()
    with serving(plan, spec, run_dir, status, secrets, prestart=client) as srv:
        status(f"engine healthy after {srv.start_s:.0f} s; running vLLM's benchmark client")
        window = WindowMetrics(srv.base_url, srv.api_key)
        others = other_engine_runs(run_dir)
        host.begin()
        benchmark = run_bench_client([], run_dir, spec, status, srv.server, srv.health_url, srv.api_key,
                                     window=window, client=srv.client)
        contention = host.end()
        others |= other_engine_runs(run_dir)
        check_alive_after(srv, benchmark)
        engine_metrics = window.finish()
        status("benchmark done; stopping the engine")
    return {"benchmark": benchmark, "engine": parse_engine_log_file(srv.log_path), "engine_start_s": srv.start_s,
            "port": srv.port, "engine_metrics": engine_metrics, "concurrent_engines": sorted(others),
            "contention": contention.to_json(),
            **({"profile": summarize_profile(run_dir)} if spec.run.profile else {})}


#: Seconds the benchmark client gets to finish (and write its partial result) after the engine died: requests to a
#: dead server fail at once (connection refused), so it needs only seconds (measured here: < 5 s for 200 requests).
CLIENT_GRACE_AFTER_DEATH_S = 60
#: Seconds between two ``/health`` probes while the benchmark runs.
HEALTH_PROBE_S = 2
#: Seconds between two looks at the client (exit, progress): how late its end is noticed.
CLIENT_POLL_S = 0.2
#: Seconds of further probes after a benchmark with failed requests, before they are blamed on the requests: the API
#: server needs a moment to notice its engine core died (vLLM's liveness monitor thread, core_client.py).
FAILED_REQUESTS_RECHECK_S = 5


#: Seconds the benchmark client gets after Ctrl-C/SIGTERM, once the engine is stopped, to write its partial result
#: (its open and remaining requests fail at once, connection refused, as after an engine death).
CLIENT_GRACE_AFTER_INTERRUPT_S = 15


def _partial_result_on_interrupt(server: ManagedProcess | None, client: ManagedProcess, log_path: Path) -> None:
    """Ctrl-C or SIGTERM during the benchmark: stop the engine first, so vLLM's client, which computes and saves its
    result only once every request returned (``vllm/benchmarks/serve.py`` ``benchmark``: ``asyncio.gather`` then
    ``calculate_metrics``, vLLM 0.32.0), sees its remaining requests fail and writes ``benchmark.json`` as it does
    after an engine death; then give it :data:`CLIENT_GRACE_AFTER_INTERRUPT_S`. A client stopped first (the order
    before) wrote nothing. No engine of ours (attach mode) or no main run yet: nothing to keep, nothing done."""
    if server is None or client.returncode is not None or not _main_run_started(log_path):
        return
    server.stop()
    with contextlib.suppress(subprocess.TimeoutExpired):
        client.wait(timeout=CLIENT_GRACE_AFTER_INTERRUPT_S)


def _main_run_started(log_path: Path) -> bool:
    """Whether vLLM's client has begun its main run (``vllm/benchmarks/serve.py`` ``benchmark`` prints "Starting main
    benchmark run..." after its ready check, vLLM 0.32.0); before it, it never writes a result."""
    return log_path.exists() and "Starting main benchmark run" in log_path.read_text(errors="replace")


def bench_client(args: list[str], run_dir: Path, api_key: str | None, grace_s: float, *,
                 log_path: Path | None = None, wait_for: str | None = None, wait_s: float = 600) -> ManagedProcess:
    """vLLM's benchmark client as a child process (``python -m ascendflow.runner.bench ARGS``, output in
    ``log_path``, default ``run_dir/bench.log``), not started yet: enter it to start it.

    ``wait_for``: a ``/health`` URL the client waits for (at most ``wait_s`` seconds) after its imports and before it
    runs, so it can start while the engine is still loading (:func:`ascendflow.runner.bench.wait_then_run`).
    """
    env = {**os.environ, RUN_DIR_ENV: str(run_dir)}
    if api_key is not None:
        env["OPENAI_API_KEY"] = api_key  # vllm/benchmarks/lib/endpoint_request_func.py reads it (Bearer token)
    if wait_for is not None:
        env.update({WAIT_URL_ENV: wait_for, WAIT_S_ENV: str(wait_s)})
    return ManagedProcess([sys.executable, "-m", "ascendflow.runner.bench", *args], env,
                          log_path or run_dir / "bench.log", grace_s)


def run_bench_client(args: list[str], run_dir: Path, spec: RunSpec, status: Status, server: ManagedProcess | None,
                     health_url: str, api_key: str | None, *, result_path: Path | None = None,
                     log_path: Path | None = None, window: WindowMetrics | None = None,
                     client: ManagedProcess | None = None) -> dict[str, Any]:
    """Run vLLM's benchmark client in a child process (output in ``log_path``, default ``bench.log``) while watching
    the engine (and sampling its ``/metrics`` into ``window``); returns the result JSON ``args`` asked for
    (``result_path``, default ``benchmark.json``). ``client``: a client already started (:func:`bench_client`; its
    ``args`` and log are used instead, ``args`` is ignored); the caller stops it, this function only when the engine
    died and the client is past its grace or has not begun its main run. ``server``: ``None`` for a deployment this
    machine did not start (``run.mode=attach``): its death is seen by ``/health`` alone and reported with the
    client's log.

    Raises:
        EngineDiedError: the engine process exited or ``/health`` reported it dead while the client ran (stage
            ``warm-up`` before the first request completed, else ``benchmark``); the client's partial result, when
            it wrote one, is kept in ``benchmark.json`` and carried by the error.
        EngineStartError: the client failed while the engine stayed up.
    """
    result_path = result_path or run_dir / "benchmark.json"
    down, stage, done = None, "warm-up", None
    started = (contextlib.nullcontext(client) if client is not None else
               bench_client(args, run_dir, api_key, spec.run.shutdown_grace_s, log_path=log_path))
    with started as client:
        log_path = client.log_path
        last_probe = died_at = 0.0
        try:
            while client.returncode is None:
                # The last progress seen (the log's tail may later hold only the client's exit noise).
                done = (progress_from_log(log_path.read_text(errors="replace")) if log_path.exists() else None) or done
                status(f"benchmark {done[0]}/{done[1]} requests" if done else "benchmark starting")
                now = time.monotonic()
                if down is None and now - last_probe >= HEALTH_PROBE_S:
                    last_probe = now
                    if window is not None:
                        window.sample()
                    if (down := engine_down(server, health_url)) is not None:
                        died_at, stage = now, ("benchmark" if done else "warm-up")
                        status(f"engine died during the {stage} ({down}); waiting for the client's partial result")
                if down is not None and (now - died_at > CLIENT_GRACE_AFTER_DEATH_S
                                         or not _main_run_started(log_path)):
                    client.stop()  # past its grace, or before its main run: it has no partial result to write
                    break
                time.sleep(CLIENT_POLL_S)
        except (KeyboardInterrupt, Terminated):
            _partial_result_on_interrupt(server, client, log_path)
            raise
    benchmark = json.loads(result_path.read_text()) if result_path.exists() else None
    if down is None:  # the client may have finished (its requests failing fast) before the next probe
        down = engine_down(server, health_url)
        for _ in range(FAILED_REQUESTS_RECHECK_S if benchmark and benchmark.get("failed") else 0):
            if down is not None:
                break
            time.sleep(1)  # failed requests: give a dying engine a few seconds to show it
            down = engine_down(server, health_url)
        if down is not None and benchmark and not benchmark.get("failed") and client.returncode == 0:
            stage = "shutdown"  # every request was answered; the engine died afterwards
        elif down is not None:
            stage = "benchmark" if done else "warm-up"
    if down is not None and stage == "warm-up" and benchmark and benchmark.get("completed"):
        stage = "benchmark"  # requests completed before the death: it was past the warm-up request
    if down is not None:
        counts = (f"; {benchmark.get('completed')} completed, {benchmark.get('failed')} failed, partial result kept "
                  f"in benchmark.json" if benchmark else "; the benchmark client wrote no result")
        when = "after the benchmark" if stage == "shutdown" else f"during the {stage}"
        raise EngineDiedError(engine_failure(f"engine died {when} ({down}{counts})",
                                             server.log_path if server is not None else log_path),
                              stage, benchmark)
    if client.returncode != 0 or benchmark is None:
        raise EngineStartError(engine_failure(f"vLLM's benchmark client failed with code {client.returncode}",
                                              log_path))
    return benchmark


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


def run_offline(plan: Plan, spec: RunSpec, run_dir: Path, status: Status,
                secrets: dict[str, str] | None = None) -> dict[str, Any]:
    """Generate the workload with ``vllm.LLM`` (same engine args) in a child process (``secrets``: values of the
    plan's ``${NAME}`` references, as for :func:`serve_and_benchmark`).

    Returns:
        ``{"benchmark": {completed, failed, request_throughput, output_throughput, total_token_throughput...},
        "engine": <facts from the log>}``.

    Raises:
        EngineStartError: the child failed (one line: the cause found in its log, and the log's path).
    """
    requests_path = run_dir / "workload" / "offline_requests.json"
    requests_path.parent.mkdir(parents=True, exist_ok=True)
    requests_path.write_text(json.dumps(offline_requests(spec, plan.model["architecture"]["vocab_size"])))
    out_path = run_dir / "offline_result.json"
    log_path = run_dir / "engine.log"
    argv = [sys.executable, "-m", "ascendflow.runner.offline_worker", str(run_dir / "plan.json"),
            str(requests_path), str(out_path)]
    with ManagedProcess(argv, engine_env(plan, run_dir, secrets), log_path, spec.run.shutdown_grace_s,
                        what="the engine") as worker:
        status(f"offline generation with vllm.LLM (log: {log_path})")
        code = worker.wait()
    if code != 0 or not out_path.exists():
        raise EngineStartError(engine_failure(f"offline run failed with code {code}", log_path))
    return {"benchmark": json.loads(out_path.read_text()), "engine": parse_engine_log_file(log_path)}
