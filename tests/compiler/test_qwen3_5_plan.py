"""Qwen3.5 / Qwen3.6 MoE (issue 28): the catalogue options plan from their public config.json values: the hybrid
Gated-DeltaNet KV groups, the vision tower (``--mm-encoder-tp-mode``), the MTP draft and W4A8 experts, on the
deployment of a vendored vllm-ascend CI config (``tests/data/ci_configs/Qwen3.5-122B-A10B-W8A8-A3.yaml``, nightly
``tests/e2e/nightly/single_node/models/configs/Qwen3.5-122B-A10B-W8A8-A3.yaml@1f95052cb43a``), with whole figures."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from ascendflow.compiler import compile_plan
from ascendflow.compiler.memory.quant_bytes import quant_bytes
from ascendflow.compiler.memory.vision_weights import vision_weight_bytes
from ascendflow.models.resolve import resolve_draft, resolve_model
from ascendflow.platforms import HostFacts
from ascendflow.schema import load_spec
from tests.conftest import compose_config

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import import_ci_config as ici  # noqa: E402

CI = ROOT / "tests" / "data" / "ci_configs" / "Qwen3.5-122B-A10B-W8A8-A3.yaml"
VISION_122B = {"depth": 27, "hidden_size": 1152, "in_channels": 3, "intermediate_size": 4304, "num_heads": 16,
               "num_position_embeddings": 2304, "out_hidden_size": 3072, "patch_size": 16, "spatial_merge_size": 2,
               "temporal_patch_size": 2}


def _plan(overrides: list[str]):
    raw = compose_config(overrides)
    raw.pop("hydra", None)
    spec = load_spec(raw)
    model = resolve_model(spec.model, need_weights=False)
    return compile_plan(spec, model.architecture, model_path="/m", host=HostFacts(cpu_memory_bytes=1024 * 2**30),
                        draft=resolve_draft(spec.engine))


def _ci_overrides() -> list[str]:
    (case,) = ici.perf_cases(yaml.safe_load(CI.read_text()))
    overrides, missing = ici.express(case, "atlas_800i_a3", "vllm-ascend-0.25.1rc1")
    assert missing == []
    return overrides


def _vision_elements(tp: int) -> int:
    """Qwen3_VisionTransformer (vLLM 0.32.0 qwen3_vl.py, built by qwen3_5.py) of the 122B, by hand: patch embed
    (1152 x 3·2·16² + bias), pos_embed 2304 x 1152, 27 blocks (2 LayerNorms with bias, qkv + bias split by TP, proj
    + whole bias, fc1 + bias split, fc2 + whole bias), one merger (LayerNorm over 1152, fc1 4608/TP x 4608 + bias,
    fc2 3072 x 4608/TP + bias), no deepstack mergers."""
    h, inter, out, merged = 1152, 4304, 3072, 1152 * 4
    hr, ir, mr = h // tp, inter // tp, merged // tp
    block = 4 * h + 3 * hr * h + 3 * hr + h * hr + h + ir * h + ir + h * ir + h
    return h * 1536 + h + 2304 * h + 27 * block + 2 * h + mr * merged + mr + out * mr + out


def test_qwen3_5_vision_tower_by_hand_split_or_replicated():
    assert _vision_elements(4) == 116_285_340 and _vision_elements(1) == 451_290_864
    assert vision_weight_bytes(VISION_122B, "qwen3_5_moe", tp=4, dtype_bytes=2) == 2 * 116_285_340
    assert vision_weight_bytes(VISION_122B, "qwen3_5_moe", tp=4, dtype_bytes=2,
                               mm_encoder_tp_mode="data") == 2 * 451_290_864


def test_w4a8_experts_take_the_bytes_of_vllm_ascend_w4a8_moe_method():
    # 64 local experts of Qwen3.5-397B at EP8: w13 64·2·1024 rows x 4096, w2 64·4096 rows x 1024; 0.5 B per
    # element + int64 scale, float32 offset, float32 scale_bias (16 B) per row
    assert quant_bytes(131072, 4096, "W4A8_DYNAMIC", "bfloat16", 2, moe=True) == 268_435_456 + 2_097_152
    assert quant_bytes(262144, 1024, "W4A8_DYNAMIC", "bfloat16", 2, moe_w2=True) == 134_217_728 + 4_194_304


def test_the_ci_deployment_plans_with_its_hybrid_kv_mtp_and_mm_flags():
    overrides = _ci_overrides()
    assert "engine.speculative_config={method:qwen3_5_mtp,num_speculative_tokens:3,enforce_eager:true}" in overrides
    plan = _plan(overrides)
    mem, kv = plan.memory, plan.kv_cache
    assert mem.weights_bytes == 33_112_666_296
    assert (mem.activation_bytes, mem.kv_cache_bytes) == (2_493_094_297, 22_738_266_338)
    # 36 GDN layers in three groups of 12, 12 full-attention layers + the MTP layer (index 48) in one of 13
    assert [(g["kind"], len(g["layers"])) for g in kv.groups] == [("mamba", 12)] * 3 + [("full", 13)]
    assert kv.groups[3]["layers"][-1] == 48
    # one request's GDN state at TP4: 16 V heads x 128 x 128 float32 + conv (2·2048 + 8192)/4 channels x (3 + 3
    # speculative) rows in bf16; the attention page (block 1024 x 1 KV head x 256 x 2 x 2 B = 1,048,576) padded to it
    assert kv.mamba_page_bytes == 16 * 128 * 128 * 4 + 3072 * 6 * 2 == 1_085_440
    assert (kv.block_size, kv.num_blocks) == (1024, 1611)  # 22,738,266,338 B of KV at the 0.23.0 row
    argv = plan.serve_command
    assert argv[argv.index("--mm-processor-cache-gb") + 1] == "0.0"
    assert argv[argv.index("--speculative-config") + 1] == \
        '{"method":"qwen3_5_mtp","num_speculative_tokens":3,"enforce_eager":true}'
    # --mm-encoder-tp-mode data replicates the tower: + (451,290,864 - 116,285,340) x 2 B on each rank
    data = _plan(overrides + ["model.mm_encoder_tp_mode=data"])
    assert data.memory.weights_bytes - mem.weights_bytes == 2 * (451_290_864 - 116_285_340) == 670_011_048
    assert data.serve_command[data.serve_command.index("--mm-encoder-tp-mode") + 1] == "data"


def test_w4a8_halves_the_397b_experts_on_each_of_its_60_layers():
    base = ["hardware=atlas_800i_a2", "model=qwen3_5_397b_a17b", "parallel.tensor_parallel_size=8",
            "parallel.enable_expert_parallel=true", "engine.max_model_len=32768",
            "hardware.software=vllm-ascend-0.25.1rc1"]
    w8 = _plan(base + ["quantization=w8a8_dynamic_ascend"]).memory.weights_bytes
    w4 = _plan(base + ["quantization=w4a8_dynamic_ascend"]).memory.weights_bytes
    # per layer: w13 131072 x 4096 and w2 262144 x 1024 (64 local experts) from W8A8_DYNAMIC (1 B + 8 / 4 B per
    # row) to W4A8_DYNAMIC (0.5 B + 16 B per row); the MTP layer's experts are not quantized
    per_layer = (131072 * 4096 // 2 - 131072 * 8) + (262144 * 1024 // 2 - 262144 * 12)
    assert (w8, w4) == (50_848_862_732, 26_941_329_932)
    assert w8 - w4 == 60 * per_layer == 23_907_532_800
