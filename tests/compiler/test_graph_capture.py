"""Graph-capture rules against the public checks of shared/reference/vllm_ascend.md §4 and hand-made cases."""

from __future__ import annotations

import pytest

from ascendflow.compiler.graph.capture import (GraphContext, default_capture_sizes, graph_plan, sample_sizes,
                                               stream_budget)
from ascendflow.schema import ConfigError, ModelArchitecture
from ascendflow.schema.graph import GraphSpec
from ascendflow.schema.parallel import ParallelSpec
from ascendflow.compiler.rules.engine_rules import engine_rules
from tests.conftest import compose_config

ROWS = {"0.11.0": "vllm-ascend-0.11.0", "0.18.0": "vllm-ascend-0.18.0", "0.20.2rc1": "vllm-ascend-0.20.2rc1",
        "0.23.0.post1": "vllm-ascend-0.23.0"}

QWEN3_8B = ModelArchitecture(model_type="qwen3", hidden_size=4096, num_hidden_layers=36, num_attention_heads=32,
                             num_key_value_heads=8, head_dim=128, vocab_size=151936, max_position_embeddings=40960)
QWEN3_30B_A3B = ModelArchitecture(model_type="qwen3_moe", hidden_size=2048, num_hidden_layers=48,
                                  num_attention_heads=32, num_key_value_heads=4, head_dim=128, vocab_size=151936,
                                  max_position_embeddings=40960, num_experts=128, num_experts_per_tok=8,
                                  moe_intermediate_size=768)
DEEPSEEK_R1 = ModelArchitecture(hidden_size=7168, num_hidden_layers=61, num_attention_heads=128,
                                num_key_value_heads=128, vocab_size=129280, max_position_embeddings=163840,
                                kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                                q_lora_rank=1536, n_routed_experts=256, num_experts_per_tok=8,
                                moe_intermediate_size=2048, first_k_dense_replace=3, num_nextn_predict_layers=1)


def _hardware(name: str):
    from ascendflow.schema.hardware import HardwareSpec

    return HardwareSpec.model_validate(compose_config([f"hardware={name}"])["hardware"])


def _ctx(arch, *, tp=1, dp=1, ep=False, hw="atlas_800i_a2", version="0.20.2rc1", seqs=256, spec_tokens=0,
         aiv=False, tp_aligned=False, mnbt=16384):
    return GraphContext(arch=arch, parallel=ParallelSpec(tensor_parallel_size=tp, data_parallel_size=dp,
                                                         enable_expert_parallel=ep),
                        hardware=_hardware(hw), rules=engine_rules(ROWS[version]), max_num_seqs=seqs,
                        max_num_batched_tokens=mnbt, num_speculative_tokens=spec_tokens, enforce_eager=False,
                        sequence_parallel=tp_aligned, aiv=aiv, multistream_overlap_shared_expert=False)


def test_public_check_qwen3_8b_keeps_48_sizes():
    # vllm-ascend issue #4807 (non-AIV): Qwen3-8B, L=36, TP1 -> 48 capture sizes.
    ctx = _ctx(QWEN3_8B, seqs=512)
    assert stream_budget(ctx) == 48
    plan, warnings = graph_plan(GraphSpec(name="p", cudagraph_mode="PIECEWISE"), ctx)
    assert len(plan.capture_sizes) == 48
    assert plan.capture_sizes[0] == 1 and plan.capture_sizes[-1] == 512
    assert any("keeps 48 capture sizes" in w for w in warnings)


def test_public_check_qwen3_30b_a3b_tp2_keeps_11_sizes():
    # vllm-ascend issue #4807 (non-AIV): Qwen3-30B-A3B, L=48, TP2 -> 11 capture sizes.
    ctx = _ctx(QWEN3_30B_A3B, tp=2, seqs=512)
    assert stream_budget(ctx) == 11
    plan, _ = graph_plan(GraphSpec(name="p", cudagraph_mode="PIECEWISE"), ctx)
    assert len(plan.capture_sizes) == 11


def test_aiv_budget_dense_and_moe():
    # AIV: dense P = 1 + G, MAX' = 1800 - P·R; Qwen3-8B TP1: P=1, R=37 -> floor((1800-37)/37/1) = 47.
    assert stream_budget(_ctx(QWEN3_8B, aiv=True)) == 47
    # MoE TP2 EP: G=1, P = 1+1+1 = 3, MAX' = 1800, R=49 -> floor(1800/49/3) = 12.
    assert stream_budget(_ctx(QWEN3_30B_A3B, tp=2, ep=True, aiv=True)) == 12


def test_no_pruning_after_v0_21_but_a_warning_with_a_smaller_list():
    plan, warnings = graph_plan(GraphSpec(name="p", cudagraph_mode="PIECEWISE"),
                                _ctx(QWEN3_8B, seqs=512, version="0.23.0.post1"))
    assert len(plan.capture_sizes) == len(default_capture_sizes(512)) == 51
    assert any("207008" in w and "cudagraph_capture_sizes=[1, 2," in w for w in warnings)


def test_default_max_capture_size_on_ascend_counts_speculative_tokens():
    plan, _ = graph_plan(GraphSpec(name="f", cudagraph_mode="FULL_DECODE_ONLY"),
                         _ctx(DEEPSEEK_R1, tp=4, dp=4, ep=True, seqs=16, spec_tokens=3, version="0.23.0.post1"))
    # max = min(16 × (1 + 3), 512) = 64; ladder 1 … 64, then vLLM 0.23 adjust_cudagraph_sizes_for_spec_decode rounds
    # every size up to a multiple of 1 + 3 (deepseek_r1_a3_tp4dp4: 9 sizes, not 11).
    assert plan.capture_sizes == [4, 8, 16, 24, 32, 40, 48, 56, 64]


def test_full_and_piecewise_before_v0_21_runs_as_piecewise():
    plan, warnings = graph_plan(GraphSpec(name="fp", cudagraph_mode="FULL_AND_PIECEWISE"),
                                _ctx(QWEN3_8B, seqs=8, version="0.18.0"))
    assert plan.cudagraph_mode == "PIECEWISE"
    assert any("runs FULL_AND_PIECEWISE as PIECEWISE" in w for w in warnings)


def test_mla_at_tp8_captures_full_decode_only_graphs():
    # No supported release limits MLA heads per rank to {32, 64, 128} (that was a CANN 8.1 kernel check asserted under
    # TorchAir at v0.9.0rc2 … v0.9.2rc1 only): R1 at TP8 (16 heads per rank) captures like any model, as vllm-ascend's
    # nightly CI runs DeepSeek-V3.1 at TP8 with FULL_DECODE_ONLY (tests/e2e/nightly/multi_node/config, v0.13.0 on).
    fdo = GraphSpec(name="f", cudagraph_mode="FULL_DECODE_ONLY")
    # v0.11.0: max = min(2 × 16, 512) = 32 on the step-8 ladder.
    plan, warnings = graph_plan(fdo, _ctx(DEEPSEEK_R1, tp=8, dp=2, ep=True, version="0.11.0", seqs=16))
    assert (plan.cudagraph_mode, plan.capture_sizes, warnings) == ("FULL_DECODE_ONLY", [1, 2, 4, 8, 16, 24, 32], [])
    # From v0.18.0: max = min(16 × (1 + 0), 512) = 16, on A2 and A3 alike.
    for version, hw in (("0.18.0", "atlas_800i_a2"), ("0.20.2rc1", "atlas_800i_a3"), ("0.23.0.post1", "atlas_800i_a3")):
        plan, warnings = graph_plan(fdo, _ctx(DEEPSEEK_R1, tp=8, dp=2, ep=True, hw=hw, version=version, seqs=16))
        assert (plan.cudagraph_mode, plan.capture_sizes, warnings) == ("FULL_DECODE_ONLY", [1, 2, 4, 8, 16], [])
    # FULL on MLA is downgraded by vLLM to FULL_DECODE_ONLY with a warning, not refused.
    plan, warnings = graph_plan(GraphSpec(name="f", cudagraph_mode="FULL"), _ctx(DEEPSEEK_R1, tp=4))
    assert plan.cudagraph_mode == "FULL_DECODE_ONLY"
    assert any("downgrades cudagraph_mode FULL to FULL_DECODE_ONLY" in w for w in warnings)


def test_tp_alignment_and_the_950_cap():
    plan, _ = graph_plan(GraphSpec(name="p", cudagraph_mode="PIECEWISE"),
                         _ctx(QWEN3_8B, tp=4, seqs=32, version="0.23.0.post1", tp_aligned=True))
    assert plan.capture_sizes == [4, 8, 16, 24, 32]
    plan, warnings = graph_plan(GraphSpec(name="p", cudagraph_mode="PIECEWISE"),
                                _ctx(QWEN3_8B, hw="ascend_950dt", seqs=64, version="0.23.0.post1"))
    assert plan.capture_sizes == sample_sizes(default_capture_sizes(64), 4) == [1, 8, 40, 64]
    with pytest.raises(ConfigError, match="multiples of 8"):
        graph_plan(GraphSpec(name="p", cudagraph_mode="PIECEWISE", cudagraph_capture_sizes=(1, 2, 4)),
                   _ctx(QWEN3_8B, tp=8, version="0.23.0.post1", tp_aligned=True))


def test_sampling_keeps_the_ends():
    assert sample_sizes(list(range(1, 11)), 4) == [1, 4, 7, 10]
    assert sample_sizes([1, 2], 5) == [1, 2]


def test_capture_sizes_above_the_batch_budget_are_dropped():
    plan, warnings = graph_plan(GraphSpec(name="p", cudagraph_mode="PIECEWISE", max_cudagraph_capture_size=100000),
                                _ctx(QWEN3_8B, seqs=16, version="0.23.0.post1", mnbt=2048))
    # vLLM >= 0.13 caps the largest size at max_num_batched_tokens before building the ladder.
    assert plan.capture_sizes[-1] == 2048 and len(plan.capture_sizes) == 3 + 31 + 113
    plan, warnings = graph_plan(GraphSpec(name="p", cudagraph_mode="PIECEWISE", max_cudagraph_capture_size=512),
                                _ctx(QWEN3_8B, seqs=16, version="0.11.0", mnbt=100))
    assert plan.capture_sizes[-1] == 96  # vLLM 0.11 drops the sizes above it
    assert any("above max_num_batched_tokens=100 dropped" in w for w in warnings)
