"""Start a vLLM engine once on a model, read back its KV cache plan (or its refusal), and stop it.

Used by the KV-layout zoo test and ``scripts/bench_kv_zoo.py``: the engine's own numbers are the ground truth the
compiler's layout model is checked against. The engine runs in a child process (``vllm.LLM`` offline, eager, bf16, a
fixed ``kv_cache_memory_bytes``, ``max_num_seqs`` 8: the KV plan does not depend on it) so that a refusal or a crash
cannot take the caller down.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from ascendflow.runner.engine_log import failure_cause, parse_engine_log

# vllm/platforms/interface.py _align_hybrid_block_size (vLLM 0.32.0):
#   "Setting attention block size to %d tokens to ensure that attention page size is >= mamba page size."
_BLOCK = re.compile(r"Setting attention block size to (\d+) tokens")
# vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory (vLLM 0.32.0).
_EST = re.compile(r"the estimated maximum model length is (\d+)")

_CHILD = """
import json, sys
from vllm import LLM
a = json.loads(sys.argv[1])
llm = LLM(model=a["model"], kv_cache_memory_bytes=a["kv"], max_model_len=a["mml"], enforce_eager=True,
          dtype="bfloat16", max_num_seqs=a.get("max_num_seqs", 8), **a.get("extra", {}))
print("ASCENDFLOW_PROBE_DONE", flush=True)
"""


def probe_engine_kv(model_dir: Path, *, kv_cache_bytes: int, max_model_len: int, timeout_s: float = 300,
                    extra_args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Start ``vllm.LLM`` on ``model_dir`` with a fixed KV budget and report what its KV cache manager decided.

    Args:
        model_dir: Hugging Face model folder.
        kv_cache_bytes: ``kv_cache_memory_bytes`` in bytes.
        max_model_len: ``max_model_len`` in tokens.
        timeout_s: seconds before the child is killed.
        extra_args: further ``vllm.LLM`` keyword arguments (e.g. ``max_num_batched_tokens``).

    Returns:
        ``started`` (bool); when started ``tokens`` and ``max_concurrency`` as logged; when refused
        ``estimated_max_model_len`` (int, 0 when vLLM gives none) and ``cause`` (the exception line);
        ``block_size`` when vLLM raised the attention block size for a hybrid model.

    Raises:
        subprocess.TimeoutExpired: the engine did not finish in ``timeout_s``.
    """
    args = {"model": str(model_dir), "kv": kv_cache_bytes, "mml": max_model_len, "extra": extra_args or {}}
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(args)], capture_output=True, text=True,
                          timeout=timeout_s, env=env)
    text = proc.stdout + proc.stderr
    facts = parse_engine_log(text)
    out: dict[str, Any] = {"started": "ASCENDFLOW_PROBE_DONE" in proc.stdout and proc.returncode == 0}
    if m := _BLOCK.search(text):
        out["block_size"] = int(m.group(1))
    if out["started"]:
        out["tokens"] = facts["reported_kv_cache_tokens"]
        out["max_concurrency"] = facts["reported_max_concurrency"]
    else:
        m = _EST.search(text)
        out["estimated_max_model_len"] = int(m.group(1)) if m else 0
        out["cause"] = failure_cause(text) or text[-2000:]
    return out
