"""MiniMax-M2.5 (``conf/model/minimax_m2_5.yaml``, vLLM ``minimax_m2.py`` ``MiniMaxM2ForCausalLM``): the model resolves
with its 256 routed experts, and vllm-ascend CI's A3 deployment plans to whole, hand-derived per-device values."""

from __future__ import annotations

from ascendflow.compiler.memory.weights import Layout, rank_tensors
from ascendflow.perfmodel.npu import model_class
from ascendflow.perfmodel.shapes import layer_shapes
from ascendflow.schema import ModelArchitecture
from tests.conftest import compose_config, plan_for

#: vllm-ascend tests/e2e/nightly/single_node/models/configs/MiniMax-M2.5-W8A8-A3.yaml@2599328c143a, as the corpus
#: importer expresses it (Eco-Tech/MiniMax-M2.5-w8a8-QuaRot: TP4 x DP4 + EP on one A3, --quantization ascend).
CI_A3 = ["hardware=atlas_800i_a3", "hardware.software=vllm-ascend-0.13.0", "model=minimax_m2_5",
         "parallel.tensor_parallel_size=4", "parallel.data_parallel_size=4", "parallel.enable_expert_parallel=true",
         "parallel.nodes=1", "quantization=w8a8_dynamic_ascend", "graph=full_decode_only", "engine.max_num_seqs=128",
         "engine.max_model_len=153600", "engine.max_num_batched_tokens=16384", "engine.gpu_memory_utilization=0.8",
         "engine.enable_prefix_caching=false", "engine.async_scheduling=true", "run.mode=plan", "tracking=none"]


def _arch() -> ModelArchitecture:
    return ModelArchitecture.from_hf_config(compose_config(["model=minimax_m2_5"])["model"]["architecture"])


def test_config_resolves_its_local_experts_as_vllm_builds_them():
    a = _arch()
    # num_local_experts / intermediate_size are the routed experts and their width; every layer is MoE
    assert (a.routed_experts, a.moe_intermediate_size, a.num_experts_per_tok, a.first_k_dense_replace) == \
        (256, 1536, 8, 0)
    assert all(a.is_moe_layer(i) for i in range(62)) and a.kv_heads == 8 and a.attention_head_dim == 128
    dump = a.model_dump(exclude_none=True)
    assert model_class(dump) == "moe"
    s = layer_shapes(dump, tp=4)
    assert (s.experts, s.top_k, s.moe_inter, s.heads, s.kv_heads) == (256, 8, 384, 12, 2)
    # an hf_override of the config's own field re-derives the alias
    assert a.with_hf_overrides({"num_local_experts": 128}).routed_experts == 128


def test_one_layer_holds_the_fp32_router_full_width_qk_norm_and_whole_experts():
    a = _arch()
    layout = Layout(tp=4, ep=16, dp=4, first_stage=True, last_stage=True, layers=range(1))
    t = {x.name: (x.rows, x.cols, x.kind) for x in rank_tensors(a, layout)}
    assert t["qkv_proj"] == ((48 // 4 + 2 * (8 // 4)) * 128, 3072, "linear")
    assert t["q_norm+k_norm"] == (1, (48 // 4 + 8 // 4) * 128, "float")   # MiniMaxText01RMSNormTP, split by TP
    assert t["block_sparse_moe.gate (router)"] == (256, 3072, "fp32")
    assert t["block_sparse_moe.e_score_correction_bias"] == (1, 256, "fp32")
    assert t["experts.w13"] == (256 // 16 * 2 * 1536, 3072, "expert")     # 16 whole experts per rank
    assert t["experts.w2"] == (256 // 16 * 3072, 1536, "expert_w2")
    # KV heads fewer than TP: k_norm is split by the KV heads, one head's width per rank
    t16 = {x.name: x for x in rank_tensors(a, Layout(tp=16, ep=16, first_stage=True, last_stage=True,
                                                        layers=range(1)))}
    assert t16["q_norm+k_norm"].cols == (48 // 16 + 1) * 128


def test_ci_a3_deployment_plans_whole_weights_and_kv_per_device():
    _, plan = plan_for(CI_A3)
    # per layer on one rank, W8A8_DYNAMIC (int8 + bf16 scale and offset per row, + fp32 scale except MoE w2):
    qkv = 2048 * 3072 + 2048 * 8
    o = 3072 * 1536 + 3072 * 8
    norms = 2 * 3072 * 2 + (12 + 2) * 128 * 2
    router = 256 * 3072 * 4 + 256 * 4
    w13 = 16 * 2 * 1536 * 3072 + 16 * 2 * 1536 * 8
    w2 = 16 * 3072 * 1536 + 16 * 3072 * 4
    layer = qkv + o + norms + router + w13 + w2
    vocab = 200064 // 4 * 3072 * 2        # embed_tokens and lm_head (untied), vocab split by TP
    assert layer == 241_295_872
    assert plan.memory.weights_bytes == 62 * layer + 2 * vocab + 3072 * 2 == 15_574_946_816
    # KV: 62 full-attention layers x K and V x 2 KV heads per rank x 128 x bf16
    assert plan.kv_cache.bytes_per_token == 62 * 2 * 2 * 128 * 2 == 63_488
    assert (plan.kv_cache.num_blocks, plan.kv_cache.tokens) == (4_034, 516_352)
    assert plan.engine_args["quantization"] == "ascend"
