"""KV-cache formulas against vLLM's reports and public checks (shared/reference/vllm_ascend.md §3)."""

from __future__ import annotations

from ascendflow.compiler.memory.kv_budget import kv_bytes_per_token_per_layer, kv_cache_plan
from ascendflow.schema import ModelArchitecture

SMOLLM2 = ModelArchitecture(hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                            head_dim=64, vocab_size=49152, max_position_embeddings=8192)
QWEN3_4B = ModelArchitecture(hidden_size=2560, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
                             head_dim=128, vocab_size=151936, max_position_embeddings=40960, torch_dtype="float16")
DEEPSEEK_R1 = ModelArchitecture(hidden_size=7168, num_hidden_layers=61, num_attention_heads=128,
                                num_key_value_heads=128, vocab_size=129280, max_position_embeddings=163840,
                                kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                                q_lora_rank=1536)


def test_smollm2_one_gib_matches_vllm_cpu_report():
    # Measured here (DESIGN.md §4 and this repo's e2e test): "CPU KV cache size: 46,592 tokens ... 22.75x".
    plan = kv_cache_plan(SMOLLM2, kv_cache_bytes=2**30, layers_on_device=30, tensor_parallel_size=1,
                         kv_dtype="bfloat16", block_size=128, max_model_len=2048)
    assert plan.bytes_per_token == 23_040
    assert (plan.num_blocks, plan.tokens, plan.max_concurrency) == (364, 46_592, 22.75)


def test_public_check_qwen3_4b_on_300i_duo():
    # vllm-ascend issue #3479: available 26,954,181,529 B, fp16, TP1, max_model_len 4096 -> 182,784 tokens, 44.62x.
    plan = kv_cache_plan(QWEN3_4B, kv_cache_bytes=26_954_181_529, layers_on_device=36, tensor_parallel_size=1,
                         kv_dtype="float16", block_size=128, max_model_len=4096)
    assert plan.bytes_per_token == 147_456
    assert plan.tokens == 182_784
    assert round(plan.max_concurrency, 2) == 44.62


def test_mla_latent_is_not_split_by_tp():
    per_layer_tp1 = kv_bytes_per_token_per_layer(DEEPSEEK_R1, 1, "bfloat16")
    per_layer_tp8 = kv_bytes_per_token_per_layer(DEEPSEEK_R1, 8, "bfloat16")
    assert per_layer_tp1 == per_layer_tp8 == (512 + 64) * 2


def test_gqa_heads_split_by_tp_and_replicated_below_one_per_rank():
    assert kv_bytes_per_token_per_layer(QWEN3_4B, 2, "bfloat16") == 2 * 4 * 128 * 2
    assert kv_bytes_per_token_per_layer(QWEN3_4B, 16, "bfloat16") == 2 * 1 * 128 * 2  # max(1, 8 // 16)


def test_tokens_follow_vllm_when_max_model_len_is_not_a_block_multiple():
    # get_kv_cache_capacity: int(num_blocks / ceil(mml / block) * mml), not num_blocks * block.
    plan = kv_cache_plan(SMOLLM2, kv_cache_bytes=2**30, layers_on_device=30, tensor_parallel_size=1,
                         kv_dtype="bfloat16", block_size=128, max_model_len=1000)
    assert plan.num_blocks == 364
    assert plan.tokens == int(364 / 8 * 1000) == 45_500
