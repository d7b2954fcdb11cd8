"""What vllm-ascend really keeps in device memory for weights: quant parameters, MLA copies, MLAPO, MTP, MoE split.

Every expected value is computed by hand below from the upstream allocation it names (vllm-ascend tag or vLLM
version in the comment).
"""

from __future__ import annotations

import pytest

from ascendflow.compiler.memory.mla_weights import absorbed_bytes, mlapo_bytes, mlapo_frees_originals
from ascendflow.compiler.memory.quant_bytes import quant_bytes
from ascendflow.compiler.memory.weights import EngineWeightRules, Layout, rank_tensors, tensor_bytes, weight_bytes
from ascendflow.schema import ModelArchitecture
from ascendflow.schema.errors import ConfigError

DEEPSEEK_R1 = ModelArchitecture(
    architectures=("DeepseekV3ForCausalLM",), model_type="deepseek_v3", vocab_size=129280, hidden_size=7168,
    intermediate_size=18432, moe_intermediate_size=2048, num_hidden_layers=61, num_attention_heads=128,
    num_key_value_heads=128, n_shared_experts=1, n_routed_experts=256, num_experts_per_tok=8, topk_method="noaux_tc",
    first_k_dense_replace=3, q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
    v_head_dim=128, max_position_embeddings=163840, num_nextn_predict_layers=1)
QWEN3_30B_A3B = ModelArchitecture(model_type="qwen3_moe", hidden_size=2048, num_hidden_layers=48,
                                  num_attention_heads=32, num_key_value_heads=4, head_dim=128, vocab_size=151936,
                                  max_position_embeddings=40960, num_experts=128, num_experts_per_tok=8,
                                  moe_intermediate_size=768)
#: deepseek_r1_a3_tp4dp4: TP4 × DP4, expert parallel over 16 dies.
R1_TP4_EP16 = Layout(tp=4, ep=16, dp=4, first_stage=True, last_stage=True, layers=range(61))


def test_w8a8_static_stores_12_bytes_per_row_for_bf16_and_16_for_fp16():
    # vllm_ascend/quantization/methods/w8a8_static.py get_perchannel_param (v0.18.0 .. v0.25.1rc1; w8a8.py at
    # v0.11.0/v0.13.0): quant_bias int32, deq_scale float32 (bf16) or int64 (fp16), weight_scale/offset in the
    # model dtype; get_pertensor_param input_scale (dtype) + input_offset (int8); process_weights_after_loading
    # three aclnn_input_* copies of in = 2048 elements in the model dtype.
    rows, cols = 5120, 2048
    per_layer = (2 + 1) + 3 * 2048 * 2
    assert quant_bytes(rows, cols, "W8A8", "bfloat16", 2) == 5120 * 2048 + 5120 * (4 + 4 + 2 + 2) + per_layer
    assert quant_bytes(rows, cols, "W8A8", "bfloat16", 2) == 10_559_491
    assert quant_bytes(rows, cols, "W8A8", "float16", 2) == 5120 * 2048 + 5120 * (4 + 8 + 2 + 2) + per_layer
    assert quant_bytes(rows, cols, "W8A8", "float16", 2) == 10_579_971
    with pytest.raises(ConfigError, match="deq_scale only for bfloat16 or float16"):
        quant_bytes(rows, cols, "W8A8", "float32", 4)


def test_w8a8_dynamic_keeps_a_float32_scale_copy_except_on_moe_w2():
    # w8a8_dynamic.py: weight_scale/offset in the model dtype + weight_scale_fp32 (linear) / w13_weight_scale_fp32
    # (MoE); w2 gets no float32 copy (every tag v0.11.0 .. v0.25.1rc1).
    assert quant_bytes(4096, 7168, "W8A8_DYNAMIC", "bfloat16", 2) == 4096 * 7168 + 4096 * (2 + 2 + 4) == 29_392_896
    assert quant_bytes(7168, 2048, "W8A8_DYNAMIC", "bfloat16", 2, moe_w2=True) == 7168 * 2048 + 7168 * (2 + 2)
    layout = Layout(tp=4, ep=16, dp=4, first_stage=True, last_stage=True, layers=range(3, 4))
    w13, w2 = (next(t for t in rank_tensors(DEEPSEEK_R1, layout) if t.name == n) for n in ("experts.w13", "experts.w2"))
    # 256 experts over EP16: 16 whole experts per die.
    assert tensor_bytes(w13, "bfloat16", None, "W8A8_DYNAMIC") == 16 * 4096 * 7168 + 16 * 4096 * 8 == 470_286_336
    assert tensor_bytes(w2, "bfloat16", None, "W8A8_DYNAMIC") == 16 * 7168 * 2048 + 16 * 7168 * 4 == 235_339_776


def test_moe_without_expert_parallel_splits_experts_over_tp_times_dp():
    # vLLM FusedMoEParallelConfig.make (0.11.0, 0.13.0, 0.18.0, 0.20.2, 0.23.0, 0.32.0): tp_size = dp × tp when
    # enable_expert_parallel is off; moe_intermediate_size 768 over TP2 × DP4 = 96 per rank.
    layout = Layout(tp=2, ep=1, dp=4, first_stage=True, last_stage=True, layers=range(1))
    w13 = next(t for t in rank_tensors(QWEN3_30B_A3B, layout) if t.name == "experts.w13")
    w2 = next(t for t in rank_tensors(QWEN3_30B_A3B, layout) if t.name == "experts.w2")
    assert (w13.rows, w13.cols) == (128 * 2 * 96, 2048)
    assert (w2.rows, w2.cols) == (128 * 2048, 96)


def test_mla_kv_b_proj_stays_bf16_in_a_w8a8_checkpoint_and_its_absorbed_copies_are_kept():
    layout = Layout(tp=4, ep=16, dp=4, first_stage=True, last_stage=True, layers=range(1))
    kv_b = next(t for t in rank_tensors(DEEPSEEK_R1, layout) if t.name == "kv_b_proj")
    # mla_v1.py asserts UnquantizedLinearMethod (v0.13.0+); msModelSlim excludes "*kv_b_proj": 128/4 heads ×
    # (128 + 128) rows × 512 bf16.
    assert tensor_bytes(kv_b, "bfloat16", "W8A8", "W8A8_DYNAMIC") == 32 * 256 * 512 * 2 == 8_388_608
    # W_UV (32 × 512 × 128) + W_UK_T (32 × 128 × 512), contiguous bf16 copies (every tag).
    assert absorbed_bytes(DEEPSEEK_R1, 4, 2) == 32 * 512 * 128 * 2 + 32 * 128 * 512 * 2 == 8_388_608
    plain = weight_bytes(DEEPSEEK_R1, R1_TP4_EP16, dtype="bfloat16", linear_scheme="W8A8",
                         expert_scheme="W8A8_DYNAMIC")
    absorbed = weight_bytes(DEEPSEEK_R1, R1_TP4_EP16, dtype="bfloat16", linear_scheme="W8A8",
                            expert_scheme="W8A8_DYNAMIC", rules=EngineWeightRules(mla_absorb_copies=True))
    assert absorbed - plain == 61 * 8_388_608


def test_mlapo_copies_and_what_a_kv_consumer_frees():
    # _process_weights_for_fused_mlapo (v0.11.0 .. v0.25.1rc1), DeepSeek-R1 TP4 bf16: wd_qkv int8 2112 × 7168
    # (1536 + 512 + 64 rows; already multiples of 16 and 32), deq_scale_qkv float32 + quant_bias_qkv int32 per row,
    # wu_q int8 (32 × 192) × 1536, qb_deq_scl + qb_qt_bias per row, beta1 1536 bf16, two one-element bf16 scales.
    built = 2112 * 7168 + 2112 * 8 + 6144 * 1536 + 6144 * 8 + 1536 * 2 + 2 * 2
    assert mlapo_bytes(DEEPSEEK_R1, 4, "bfloat16", 2, frees_originals=False) == built == 24_645_124
    # v0.13.0+ on a KV consumer with max_num_batched_tokens <= 1024: fused_qkv_a_proj and q_proj weight, deq_scale
    # and quant_bias are set to None.
    dropped = 2112 * 7168 + 2112 * 8 + 6144 * 1536 + 6144 * 8
    assert mlapo_bytes(DEEPSEEK_R1, 4, "bfloat16", 2, frees_originals=True) == built - dropped == 3_076
    # fp16 model: deq_scale int64.
    assert mlapo_bytes(DEEPSEEK_R1, 4, "float16", 2, frees_originals=False) == built + 2112 * 4 + 6144 * 4
    assert [mlapo_frees_originals(kv_consumer=c, max_num_batched_tokens=n)
            for c, n in [(True, 1024), (True, 1025), (False, 512)]] == [True, False, False]
    # MLAPO needs W8A8 static attention: a W8A8_DYNAMIC model gets nothing.
    rules = EngineWeightRules(mlapo=True)
    dyn = dict(dtype="bfloat16", linear_scheme="W8A8_DYNAMIC", expert_scheme="W8A8_DYNAMIC")
    assert weight_bytes(DEEPSEEK_R1, R1_TP4_EP16, rules=rules, **dyn) == weight_bytes(DEEPSEEK_R1, R1_TP4_EP16, **dyn)


#: One DeepSeek-R1 MTP layer on a TP4 / EP16 die, all bf16 (vllm-ascend modelslim_config.py "deepseek_mtp":
#: the MTP layer is FLOAT), by hand from deepseek_mtp.py / deepseek_v2.py.
R1_MTP_LAYER_TP4_EP16 = (
    3 * 7168 * 2                       # enorm, hnorm, shared_head.norm
    + 7168 * 14336 * 2                 # eh_proj nn.Linear(2h, h), unquantized
    + 2 * 7168 * 2                     # input_layernorm, post_attention_layernorm
    + 2112 * 7168 * 2 + 1536 * 2       # fused_qkv_a_proj, q_a_layernorm
    + 6144 * 1536 * 2 + 512 * 2        # q_b_proj (32 heads × 192), kv_a_layernorm
    + 8192 * 512 * 2                   # kv_b_proj (32 × 256 rows)
    + 7168 * 4096 * 2                  # o_proj
    + 256 * 7168 * 2 + 256 * 4         # router gate, e_score_correction_bias (float32)
    + 16 * 4096 * 7168 * 2             # 16 local experts w13
    + 16 * 7168 * 2048 * 2             # w2
    + 1024 * 7168 * 2 + 7168 * 512 * 2  # shared expert (2048 / TP4 = 512)
)


def test_mtp_draft_layer_is_loaded_in_bf16_and_shares_vocab_from_v0_13():
    assert R1_MTP_LAYER_TP4_EP16 == 1_756_834_816
    kw = dict(dtype="bfloat16", linear_scheme="W8A8", expert_scheme="W8A8_DYNAMIC")
    base = weight_bytes(DEEPSEEK_R1, R1_TP4_EP16, **kw)
    shared = weight_bytes(DEEPSEEK_R1, R1_TP4_EP16, rules=EngineWeightRules(mtp_layers=1), **kw)
    assert shared - base == R1_MTP_LAYER_TP4_EP16
    # v0.11.0: DeepSeekMTP keeps its own embed_tokens and shared_head.head (129280 / 4 rows × 7168 bf16 each).
    own = weight_bytes(DEEPSEEK_R1, R1_TP4_EP16, rules=EngineWeightRules(mtp_layers=1, mtp_shares_vocab=False), **kw)
    assert own - base == R1_MTP_LAYER_TP4_EP16 + 2 * 32320 * 7168 * 2
    # With absorbed MLA copies the draft's attention keeps its W_UV/W_UK_T too; MLAPO skips the FLOAT draft layer.
    rules = EngineWeightRules(mla_absorb_copies=True, mtp_layers=1, mlapo=True)
    full = weight_bytes(DEEPSEEK_R1, R1_TP4_EP16, rules=rules, **kw)
    assert full - base == R1_MTP_LAYER_TP4_EP16 + 62 * 8_388_608 + 61 * 24_645_124
    # PP > 1: the drafter loads its own embedding on the last stage (share_embeddings needs PP = 1).
    last = Layout(tp=4, ep=16, dp=4, pp=2, first_stage=False, last_stage=True, layers=range(31, 61))
    pp_base = weight_bytes(DEEPSEEK_R1, last, **kw)
    pp_mtp = weight_bytes(DEEPSEEK_R1, last, rules=EngineWeightRules(mtp_layers=1), **kw)
    assert pp_mtp - pp_base == R1_MTP_LAYER_TP4_EP16 + 32320 * 7168 * 2


def test_checkpoint_count_splits_experts_over_tp_times_dp_like_the_estimate():
    import json

    from ascendflow.compiler.memory.checkpoint_weights import checkpoint_bytes
    from ascendflow.models.checkpoint import read_inventory
    from ascendflow.models.tiny_deepseek import TINY_DEEPSEEK_V3_CONFIG, ensure_tiny_deepseek

    path = ensure_tiny_deepseek()
    a = ModelArchitecture.from_hf_config(json.loads((path / "config.json").read_text()))
    inv = read_inventory(path)
    cfg = TINY_DEEPSEEK_V3_CONFIG
    bias_upcast = (cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]) * cfg["n_routed_experts"] * 2
    rules = EngineWeightRules(mla_absorb_copies=True)
    for tp, dp in [(1, 2), (2, 2), (1, 4)]:
        layout = Layout(tp=tp, ep=1, dp=dp, first_stage=True, last_stage=True, layers=range(a.num_hidden_layers))
        assert checkpoint_bytes(inv, a, layout, "bfloat16", rules) + bias_upcast == weight_bytes(
            a, layout, dtype="bfloat16", rules=rules)
