"""Bad input exits non-zero with one readable line naming the key, the value and the rule (real CLI runs)."""

from __future__ import annotations

import pytest

from tests.conftest import run_ascendflow

CASES = [
    # (overrides, expected fragments of the one-line message)
    (["model=no_such_model"], ["Could not find 'model/no_such_model'"]),
    (["hardware=no_such_hw"], ["Could not find 'hardware/no_such_hw'"]),
    (["parallel.tensor_parallel_size=2"], ["parallel.tensor_parallel_size=2",
                                           "must divide the model's num_attention_heads (9)"]),
    (["parallel.tensor_parallel_size=3"], ["parallel.tensor_parallel_size=3", "3 devices",
                                           "hardware=cpu", "has 1"]),
    (["engine.gpu_memory_utilization=1.5"], ["engine.gpu_memory_utilization=1.5", "less than or equal to 1"]),
    (["engine.gpu_memory_utilization=0"], ["engine.gpu_memory_utilization=0", "greater than 0"]),
    (["engine.max_model_len=8192", "engine.kv_cache_memory_bytes=100000000"],
     ["engine.max_model_len=8192", "exceeds the KV capacity of the plan (4224 tokens", "short by 3968 tokens"]),
    (["engine.max_num_seqs=-4"], ["engine.max_num_seqs=-4", "greater than or equal to 1"]),
    (["workload.num_prompts=2.5"], ["workload.num_prompts=2.5", "valid integer"]),
    (["+engine.max_num_sequences=8"], ["engine.max_num_sequences=8", "unknown key"]),
    (["engine.block_size=48"], ["engine.block_size=48", "multiple of 32"]),
    (["model=qwen3_0_6b"], ["model.id='Qwen/Qwen3-0.6B'", "weights not available locally",
                            "models--Qwen--Qwen3-0.6B", "model.path="]),
]


@pytest.mark.parametrize("overrides,fragments", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_input_is_one_line_and_non_zero(overrides, fragments, tmp_path):
    proc = run_ascendflow([*overrides, "tracking=none"], cwd=tmp_path, timeout=300)
    assert proc.returncode != 0
    err = proc.stderr
    for fragment in fragments:
        assert fragment in err, err
    assert "Traceback" not in err
    # Our own errors are exactly one line ("error: <key>=<value>: <rule>"); Hydra's own say which group options exist.
    if not overrides[0].startswith(("model=no_such", "hardware=no_such")):
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), err
    # Nothing half-done: no plan written for bad input.
    assert not list(tmp_path.glob("outputs/runs/*/*/plan.json"))
