"""The switches that turn vLLM's torch profiler on for a served run.

vLLM 0.32.0: the server takes ``--profiler-config '{"profiler": "torch", "torch_profiler_dir": DIR}'``
(``vllm/config/profiler.py`` ``ProfilerConfig``) and exposes ``POST /start_profile`` / ``/stop_profile``
(``vllm/entrypoints/serve/profile/api_router.py``); ``vllm bench serve --profile`` calls them around the benchmark
window (``vllm/benchmarks/serve.py``). The worker writes a Chrome trace per worker (``*.pt.trace.json.gz``, torch
``tensorboard_trace_handler``) and ``<worker>.profiler_out.txt`` (``vllm/profiler/wrapper.py``) into DIR.
"""

from __future__ import annotations

import json
from pathlib import Path

#: Sub-folder of the run directory that receives the traces.
PROFILE_DIR = "profile"


def profiler_config_arg(run_dir: Path) -> list[str]:
    """Server arguments that enable vLLM's torch profiler, writing into ``<run_dir>/profile`` (absolute)."""
    config = {"profiler": "torch", "torch_profiler_dir": str((run_dir / PROFILE_DIR).resolve())}
    return ["--profiler-config", json.dumps(config, separators=(",", ":"))]
