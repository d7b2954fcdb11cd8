"""The NPU step model's terms (distinct experts, quantized weight bytes, graph vs eager, MTP, TP and EP
collectives) and the labelled prediction an NPU plan gets from its calibration file."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ascendflow.perfmodel.calibration import load_calibration
from ascendflow.perfmodel.npu import (MTP_ACCEPT_LENGTH, NpuConstants, NpuLayout, NpuStepModel, accepted_per_step,
                                      bytes_per_weight, distinct_experts, full_attention_layers, model_class)
from ascendflow.perfmodel.steptime import Work

DENSE = {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8,
         "head_dim": 128, "intermediate_size": 4096, "vocab_size": 32000}
MOE = {**DENSE, "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768}
CONSTS = NpuConstants(gemm_efficiency=0.5, memory_efficiency=0.5, step_overhead_s=0.01, eager_layer_overhead_s=1e-3,
                      collective_latency_s=1e-4, hccs_bandwidth_gbps=100.0, internode_bandwidth_gbps=25.0,
                      mtp_accept_length=1.85)


def model(arch=DENSE, **layout) -> NpuStepModel:
    """A step model replaying full decode graphs unless ``layout`` says otherwise (an eager step's host launches
    would hide these toy layers' device terms)."""
    return NpuStepModel(arch, NpuLayout(**{"full_graph_decode": True, "max_capture_size": 512, **layout}), CONSTS,
                        peak_flops=300e12, bandwidth_bps=1.6e12)


def test_distinct_experts_is_the_occupancy_count():
    # the Qwen3-30B-A3B decode step: batch 45 reads ~121 of 128 experts
    assert distinct_experts(128, 8, 45) == pytest.approx(121.0, abs=0.05)
    assert distinct_experts(128, 8, 1) == pytest.approx(8.0)
    assert distinct_experts(0, 0, 10) == 0.0


def test_weight_bytes_per_scheme():
    assert bytes_per_weight(None, 2) == 2.0
    assert bytes_per_weight("W8A8_DYNAMIC", 2) == pytest.approx(1 + 8 / 4096)
    assert bytes_per_weight("W4A8_DYNAMIC", 2) == pytest.approx(0.5 + 8 / 4096)
    w8 = bytes_per_weight("W8A8", 2)
    assert 1.0 < w8 < 1.01


def test_quantized_weights_make_a_memory_bound_decode_step_faster():
    bf16, w8 = model().step_s([Work(100, 1)]), model(linear_scheme="W8A8_DYNAMIC").step_s([Work(100, 1)])
    assert w8 < bf16


def test_graph_replay_saves_the_per_layer_launch_overhead_exactly():
    batch = [Work(100, 1)] * 4
    piecewise = model(full_graph_decode=False, piecewise_graph=True).step_s(batch)
    graph = model(full_graph_decode=True, max_capture_size=8).step_s(batch)
    assert piecewise - graph == pytest.approx(DENSE["num_hidden_layers"] * CONSTS.eager_layer_overhead_s)
    # a prefill step is not replayed as a full graph (FULL_AND_PIECEWISE replays it piecewise)
    mixed = batch + [Work(0, 64)]
    assert model(full_graph_decode=False, piecewise_graph=True).step_s(mixed) == pytest.approx(
        model(piecewise_graph=True).step_s(mixed))


def test_mtp_divides_a_decode_step_by_the_accept_length():
    m = model(spec_tokens=1)
    batch = [Work(100, 1)] * 4
    one = NpuStepModel(DENSE, m.layout, replace(CONSTS, mtp_accept_length=1.0), 300e12, 1.6e12).step_s(batch)
    assert m.step_s(batch) == pytest.approx(one / 1.85)


def test_tp_adds_two_all_reduces_per_layer_and_ep_replaces_the_moe_one():
    batch = [Work(100, 1)]
    graph = {"full_graph_decode": True, "max_capture_size": 512}
    no_lat = NpuStepModel(DENSE, NpuLayout(tp=2, **graph), replace(CONSTS, collective_latency_s=0.0), 300e12, 1.6e12)
    # 2 all-reduces per layer + the LM head's all-gather: 2 × layers + 1 collectives
    assert model(tp=2).step_s(batch) - no_lat.step_s(batch) == pytest.approx((2 * 4 + 1) * CONSTS.collective_latency_s)
    ep = NpuStepModel(MOE, NpuLayout(tp=2, ep=True, **graph), CONSTS, 300e12, 1.6e12)
    ep0 = NpuStepModel(MOE, NpuLayout(tp=2, ep=True, **graph), replace(CONSTS, collective_latency_s=0.0), 300e12,
                       1.6e12)
    # attention all-reduce + dispatch + combine per layer, + the LM head's all-gather
    assert ep.step_s(batch) - ep0.step_s(batch) == pytest.approx((3 * 4 + 1) * CONSTS.collective_latency_s)


def test_moe_reads_more_experts_as_the_batch_grows():
    m = model(MOE)
    per_token_1 = m.step_s([Work(10, 1)])
    per_token_64 = m.step_s([Work(10, 1)] * 64) / 64
    assert per_token_64 < per_token_1
    assert model_class(MOE) == "moe" and model_class(DENSE) == "dense"
    assert model_class({**MOE, "kv_lora_rank": 512}) == "mla_moe"


def test_packaged_calibrations_carry_constants_and_their_measured_error():
    for hw in ("atlas_800i_a2", "atlas_800i_a3"):
        cal = load_calibration(hw)
        assert cal["file"] == f"{hw}.yaml"
        NpuConstants(**cal["constants"])  # every field present, nothing else
        assert {"all", "dense", "moe", "mla_moe"} <= set(cal["measured_error"])
    assert load_calibration("cpu") is None


def test_mtp_acceptance_follows_the_iid_draft_formula():
    from ascendflow.perfmodel.npu import accepted_per_step
    assert accepted_per_step(0, 1.85) == 1.0
    assert accepted_per_step(1, 1.85) == pytest.approx(1.85)
    assert accepted_per_step(3, 1.85) == pytest.approx(1 + 0.85 + 0.85 ** 2 + 0.85 ** 3)  # 3.1826
    m3 = model(spec_tokens=3)
    batch = [Work(100, 1)] * 4
    flat = NpuStepModel(DENSE, m3.layout, replace(CONSTS, mtp_accept_length=1.0), 300e12, 1.6e12).step_s(batch)
    assert m3.step_s(batch) == pytest.approx(flat / (1 + 0.85 + 0.85 ** 2 + 0.85 ** 3))


def test_async_scheduling_hides_the_host_step_time_up_to_the_device_time():
    batch = [Work(100, 1)] * 4
    sync = model().step_s(batch)
    device = sync - CONSTS.step_overhead_s
    assert model(async_scheduling=True).step_s(batch) == pytest.approx(max(device, CONSTS.step_overhead_s))
    slow = replace(CONSTS, step_overhead_s=1.0)  # host-bound: the step is the host's time
    assert NpuStepModel(DENSE, NpuLayout(async_scheduling=True), slow, 300e12, 1.6e12).step_s(batch) == 1.0


def test_prefill_efficiency_scales_the_cube_rate_of_steps_with_a_prefill_chunk_only():
    half = NpuStepModel(DENSE, NpuLayout(), replace(CONSTS, gemm_efficiency=0.25), 300e12, 1.6e12)
    slow = NpuStepModel(DENSE, NpuLayout(), replace(CONSTS, prefill_efficiency=0.5), 300e12, 1.6e12)
    prefill, decode = [Work(0, 2048), Work(100, 1)], [Work(100, 1)] * 4
    assert slow.step_s(prefill) == half.step_s(prefill)
    assert slow.step_s(decode) == model(full_graph_decode=False).step_s(decode)


def test_the_300i_duo_takes_its_peaks_from_its_calibration():
    from ascendflow.perfmodel.predict import npu_peaks
    cal = load_calibration("atlas_300i_duo")
    hw = npu_peaks({"name": "atlas_300i_duo", "peak_tflops_bf16": None, "memory_bandwidth_gbps": None}, cal)
    assert (hw["peak_tflops_bf16"], hw["memory_bandwidth_gbps"]) == (70.0, 204.0)
    own = npu_peaks({"peak_tflops_bf16": 100.0, "memory_bandwidth_gbps": 300.0}, cal)  # the option's own win
    assert (own["peak_tflops_bf16"], own["memory_bandwidth_gbps"]) == (100.0, 300.0)
    NpuConstants(**cal["constants"])


def test_w4a16_experts_are_int4_plus_a_bf16_scale_and_offset_per_group_of_32():
    # vllm-ascend quantization/methods/w4a16.py: int32-packed int4 (0.5 B) + bf16 scale + bf16 offset per 32 inputs
    assert bytes_per_weight("W4A16", 2) == 0.625
    from ascendflow.compiler.memory.quant_bytes import quant_bytes
    assert quant_bytes(2048, 7168, "W4A16", "bfloat16", 2) == 2048 * 7168 // 2 + 2 * 2 * 2048 * (7168 // 32)


def test_a_compiled_step_beyond_the_largest_capture_size_launches_every_op_overlapped_with_the_device():
    consts = replace(CONSTS, eager_full_factor=3.0)
    layers, per_layer, step_s = DENSE["num_hidden_layers"], CONSTS.eager_layer_overhead_s, CONSTS.step_overhead_s

    def step(batch, **layout):
        return NpuStepModel(DENSE, NpuLayout(**layout), consts, 300e12, 1.6e12).step_s(batch)

    def device(batch):  # the step without launches or the per-step host time
        return NpuStepModel(DENSE, NpuLayout(), replace(consts, eager_layer_overhead_s=0.0, step_overhead_s=0.0),
                            300e12, 1.6e12).step_s(batch)
    small, big = [Work(100, 1)] * 10, [Work(4000, 1)] * 256
    assert device(small) < layers * per_layer < 3 * layers * per_layer < device(big)
    # PIECEWISE with capture sizes up to 8 (Kimi-K2's 1, 2, 4, 8 on vllm-ascend 0.20.2rc1): 8 rows replay the pieces
    # and add one eager_layer_overhead_s per layer; 10 rows replay no graph: host-bound at 3x per layer
    pw = {"piecewise_graph": True, "max_capture_size": 8}
    assert step(small[:8], **pw) == pytest.approx(device(small[:8]) + layers * per_layer + step_s)
    assert step(small, **pw) == pytest.approx(3 * layers * per_layer + step_s)
    # FULL_DECODE_ONLY: a decode batch within the sizes replays the full graph, one beyond them replays none and
    # launches at the eager rate (npugraph_ex compiles its general-shape graph)
    fdo = {"full_graph_decode": True, "max_capture_size": 8}
    assert step(small[:4], **fdo) == pytest.approx(device(small[:4]) + step_s)
    assert step(small, **fdo) == pytest.approx(layers * per_layer + step_s)
    # --enforce-eager launches at the fitted per-layer time; a device-bound ungraphed step hides its launches
    assert step(small) == pytest.approx(layers * per_layer + step_s)
    assert step(big, **pw) == pytest.approx(device(big) + step_s) == pytest.approx(step(big))


#: Kimi-K2's MoE layer (DeepSeek-V3 shapes, 384 experts, top-8, one shared expert): HF config.json.
KIMI = {**DENSE, "hidden_size": 7168, "n_routed_experts": 384, "num_experts_per_tok": 8, "moe_intermediate_size": 2048,
        "n_shared_experts": 1}


def test_the_busiest_ep_rank_holds_more_hit_experts_than_the_mean():
    from ascendflow.perfmodel.npu import busiest_rank_experts
    # E[max of 16 i.i.d. Binomial(24, p)], p = 1-(1-8/384)^B: 1.98917 at one token (mean 0.5), 7.06841 at eight
    # (mean 3.72); computed independently with scipy.stats.binom
    assert busiest_rank_experts(384, 8, 1, 16) == pytest.approx(1.9891693346359682, rel=1e-9)
    assert busiest_rank_experts(384, 8, 8, 16) == pytest.approx(7.0684104821582, rel=1e-9)
    assert busiest_rank_experts(384, 8, 5, 1) == pytest.approx(distinct_experts(384, 8, 5), rel=1e-12)
    assert busiest_rank_experts(384, 8, 1e6, 16) == 24.0  # every expert hit: each rank reads its 24
    assert busiest_rank_experts(0, 0, 8, 16) == 0.0


def test_an_ep_moe_layer_reads_the_busiest_ranks_experts_and_w4a16_experts_move_bf16_bytes():
    graph = {"full_graph_decode": True, "max_capture_size": 512}

    def mlp(tokens, **layout):
        return NpuStepModel(KIMI, NpuLayout(tp=16, **graph, **layout), CONSTS, 300e12, 1.6e12)._mlp_s(tokens, False)
    expert = 3 * 7168 * 2048 * 2  # bytes of one expert's gate/up/down at bf16 (W4A16 dequantized in the kernel)
    hbm = 0.5 * 1.6e12
    ep_comm = 2 * (CONSTS.collective_latency_s + 8 * 7168 * 2 * 15 / 16 / 100e9)  # MC2 dispatch + combine, one token
    # one token: the busiest of 16 EP ranks reads 1.98917 experts, without EP each rank 1/16 of the 8 hit
    assert mlp(1, ep=True, expert_scheme="W4A16") - mlp(1, expert_scheme="W4A16") == pytest.approx(
        (1.9891693346359682 - 0.5) * expert / hbm + ep_comm, rel=1e-9)
    # W4A16 experts are priced at the bf16 bytes their grouped matmul moves: the same MoE layer as bf16 experts
    assert mlp(8, ep=True, expert_scheme="W4A16") == mlp(8, ep=True)
    assert mlp(8, ep=True, expert_scheme="W8A8_DYNAMIC") < mlp(8, ep=True)

#: A toy Qwen3.5-MoE text model: 4 layers, every 4th full attention (one), Gated DeltaNet on the other three.
QWEN35 = {**MOE, "model_type": "qwen3_5_moe_text", "num_key_value_heads": 2, "head_dim": 256,
          "full_attention_interval": 4, "linear_num_key_heads": 4, "linear_num_value_heads": 8,
          "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
          "shared_expert_intermediate_size": 768}


def test_qwen3_5_mtp_takes_its_family_acceptance_not_the_calibration():
    batch = [Work(100, 1)] * 4
    layout = NpuLayout(full_graph_decode=True, max_capture_size=512, spec_tokens=3)
    at = {c: NpuStepModel(QWEN35, layout, replace(CONSTS, mtp_accept_length=c), 300e12, 1.6e12).step_s(batch)
          for c in (1.85, 1.2)}
    assert at[1.85] == at[1.2]  # the family default (1.89), whatever the calibration says
    other = {**QWEN35, "model_type": "qwen3_moe"}
    assert NpuStepModel(other, layout, CONSTS, 300e12, 1.6e12).step_s(batch) != NpuStepModel(
        other, layout, replace(CONSTS, mtp_accept_length=1.2), 300e12, 1.6e12).step_s(batch)
    assert MTP_ACCEPT_LENGTH["qwen3_5_moe_text"] == 1.89
    assert accepted_per_step(3, 1.89) == pytest.approx(3.387, abs=1e-3)  # the public 3.39 at 3 tokens


def test_gated_deltanet_layers_read_their_state_not_the_kv_cache():
    # decode over a long context: only the one full-attention layer of four reads the KV cache, so a hybrid step
    # grows with the context a quarter as fast as the same model priced as attention on every layer
    hybrid = model(QWEN35)
    attention_only = model({k: v for k, v in QWEN35.items() if not k.startswith("linear_")})
    grow_h = hybrid.step_s([Work(20_000, 1)] * 8) - hybrid.step_s([Work(10_000, 1)] * 8)
    grow_a = attention_only.step_s([Work(20_000, 1)] * 8) - attention_only.step_s([Work(10_000, 1)] * 8)
    assert grow_h == pytest.approx(grow_a / 4, rel=1e-9)
    # one request's state: 8 V heads x 128 x 128 recurrent + (2 x 512 + 1024) conv channels x 3, in bf16 unless the
    # plan gives its bytes; read and written once per row: 8 rows x 2 x state at 0.5 x 1.6 TB/s (memory-bound)
    state = 2 * (8 * 128 * 128 + 2048 * 3)
    assert replace(hybrid, gdn_state_bytes=state)._gdn(8, 8) == hybrid._gdn(8, 8)
    assert replace(hybrid, gdn_state_bytes=2 * state)._gdn(8, 8) - hybrid._gdn(8, 8) == pytest.approx(
        8 * 2 * state / (0.5 * 1.6e12))
    assert full_attention_layers(QWEN35) == 1 and full_attention_layers(MOE) is None


#: A one-layer EAGLE-3 draft of DENSE with a reduced vocabulary (``draft_vocab_size``), as ``plan.draft.architecture``.
DRAFT = {"hidden_size": 1024, "num_hidden_layers": 1, "num_attention_heads": 8, "num_key_value_heads": 8,
         "head_dim": 128, "intermediate_size": 4096, "vocab_size": 32000, "draft_vocab_size": 8000}


def test_eagle3_prices_its_one_layer_draft_per_token_and_divides_by_its_own_accept_length():
    """4 decode rows of 100 cached tokens, s = 3 (bf16, TP1, full decode graph): the target verifies 4 × (1 + 3) =
    16 tokens; the draft's first pass runs on those 16 (fc 3·1024 → 1024, the layer with qkv reading 2·1024, the
    draft LM head over 8000 rows on the 4 rows), then 2 passes on the 4 rows; the step ÷ (1 + α + α² + α³),
    α = 0.717 (vLLM's EAGLE-3 acceptance test: 2.60 tokens at s = 3)."""
    def roof(flops, nbytes):  # 0.5 × 300 TFLOP/s, 0.5 × 1.6 TB/s
        return max(flops / 150e12, nbytes / 0.8e12)

    def gemm(t, k, n):
        return roof(2 * t * k * n, 2 * k * n + 2 * t * (k + n))

    def layer(t):  # qkv, o, attention over 4 × 101 cached tokens (K+V: 2·8·128·2 B a token), elementwise, MLP
        return (gemm(t, 1024, 3072) + gemm(t, 1024, 1024) + roof(4 * 8 * 128 * 404, 4096 * 404)
                + roof(0, 10 * t * 1024 * 2) + gemm(t, 1024, 8192) + gemm(t, 4096, 1024))

    first = layer(16) + gemm(16, 3072, 1024) + gemm(16, 1024, 3072) + gemm(4, 1024, 8000)
    later = layer(4) + gemm(4, 1024, 8000)
    lay = NpuLayout(full_graph_decode=True, max_capture_size=512, spec_tokens=3, spec_method="eagle3")
    m = NpuStepModel(DENSE, lay, CONSTS, 300e12, 1.6e12, draft=DRAFT)
    draft = m.eagle3_draft_s(16, 4, 4, 404)
    assert draft == pytest.approx(first + 2 * later, rel=1e-12)
    # µs: 81.867 first pass (layer 45.240, fc + the second qkv half 16.056, LM head 20.570) + 2 × 64.889
    assert (round(first * 1e6, 3), round(later * 1e6, 3), round(draft * 1e6, 3)) == (81.867, 64.889, 211.645)
    batch = [Work(100, 1)] * 4
    flat = NpuStepModel(DENSE, lay, replace(CONSTS, eagle3_accept_length=1.0), 300e12, 1.6e12, draft=DRAFT)
    no_draft = NpuStepModel(DENSE, replace(lay, spec_tokens=0, spec_method=""), CONSTS, 300e12, 1.6e12)
    # the verify step at 16 tokens + the draft, before the division
    assert flat.step_s(batch) - draft > no_draft.step_s(batch)
    alpha = 0.717
    assert CONSTS.eagle3_accept_length == 1.717
    assert m.step_s(batch) == pytest.approx(flat.step_s(batch) / (1 + alpha + alpha ** 2 + alpha ** 3), rel=1e-12)
    assert round(1 + alpha + alpha ** 2 + alpha ** 3, 2) == 2.60
    # without a draft in the plan (an old plan.json) the MTP pricing stands, at mtp_accept_length
    assert NpuStepModel(DENSE, lay, CONSTS, 300e12, 1.6e12).step_s(batch) == \
        NpuStepModel(DENSE, replace(lay, spec_method="mtp"), CONSTS, 300e12, 1.6e12).step_s(batch)
