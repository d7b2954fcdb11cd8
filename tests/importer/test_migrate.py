"""``python -m ascendflow.import ... --to hardware=atlas_800i_a3``: the H200 deployments of the issue's acceptance
(Qwen3-235B-A22B FP8 TP4, Llama-3-70B bf16 TP4) planned on A3 beside the source, the per-release quantization
verdict (vllm_ascend/platform.py supported_quantization at each tag), and the baseline."""

from __future__ import annotations

import json

import pytest

from ascendflow.compiler import compile_plan
from ascendflow.importer.baseline import compare_baseline, read_baseline, render_comparison
from ascendflow.importer.command import parse_command
from ascendflow.importer.migrate import CUDA_ONLY, migrate, msmodelslim_command, render, served
from ascendflow.importer.recipe import to_recipe
from ascendflow.importer.roundtrip import plan_recipe
from ascendflow.models.resolve import resolve_model
from ascendflow.schema import load_spec
from ascendflow.schema.errors import ConfigError
from tests.conftest import compose_config

QWEN_FP8 = ["vllm", "serve", "Qwen/Qwen3-235B-A22B-FP8", "--tensor-parallel-size", "4", "--enable-expert-parallel",
            "--max-model-len", "32768"]
LLAMA = ["vllm", "serve", "meta-llama/Meta-Llama-3-70B-Instruct", "--tensor-parallel-size", "4", "--max-model-len",
         "8192", "--attention-backend", "FLASHINFER"]


def _plan(overrides):
    raw = compose_config(overrides)
    raw.pop("hydra", None)
    spec = load_spec(raw)
    return compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture, model_path="M")


@pytest.fixture(scope="module")
def qwen():
    return migrate(to_recipe([parse_command(QWEN_FP8)], hardware="nvidia_h200"), "atlas_800i_a3")


@pytest.fixture(scope="module")
def llama():
    return migrate(to_recipe([parse_command(LLAMA)], hardware="nvidia_h200"), "atlas_800i_a3")


def test_qwen_fp8_sides_are_the_compilers_plans(qwen):
    """Each side's figures are those the compiler plans for the same config written by hand."""
    common = ["model=qwen3_235b_a22b", "graph=compiled", "engine.max_model_len=32768",
              "parallel.tensor_parallel_size=4", "parallel.enable_expert_parallel=true"]
    h200 = _plan(["hardware=nvidia_h200", *common, "quantization.linear_scheme=W8A8_DYNAMIC",
                  "quantization.expert_scheme=W8A8_DYNAMIC"])
    assert (qwen.source.weights_bytes, qwen.source.kv_cache_bytes, qwen.source.kv_tokens) == (
        h200.memory.weights_bytes, h200.memory.kv_cache_bytes, h200.kv_cache.tokens)
    assert qwen.source.fits and qwen.source.devices == 4
    # A3 at TP4 x DP1: the W8A8 weights (msModelSlim re-quantized) leave a negative KV budget on a 64 GB die
    assert not qwen.target.fits and qwen.target.plan is None
    assert qwen.target.error.startswith("engine.gpu_memory_utilization=0.9: leaves a negative KV budget")
    a3 = _plan(["hardware=atlas_800i_a3", *common, "quantization=w8a8_dynamic_ascend",
                "parallel.data_parallel_size=2"])
    first = qwen.layouts[0]
    assert (first.layout, first.devices, first.kv_cache_bytes, first.kv_tokens) == (
        "TP4 × DP2 EP", 8, a3.memory.kv_cache_bytes, a3.kv_cache.tokens)
    assert all(x.fits for x in qwen.layouts) and [x.devices for x in qwen.layouts] == [8, 8, 8]
    assert qwen.recipe.recipe["parallel"] == {"tensor_parallel_size": 4, "enable_expert_parallel": True,
                                              "data_parallel_size": 2, "pipeline_parallel_size": 1}
    # the written target recipe plans, on A3, what the nearest fitting layout planned
    plan = plan_recipe(qwen.recipe)
    assert (plan.kv_cache.fits, plan.memory.kv_cache_bytes) == (True, a3.memory.kv_cache_bytes)
    assert qwen.recipe.text().splitlines()[3] == ("# Migrated to hardware=atlas_800i_a3, version-matrix row "
                                                  "vllm-ascend-0.23.0.")


def test_qwen_fp8_is_not_served_and_gets_the_msmodelslim_command(qwen):
    q = qwen.quantization
    assert (q.method, q.served, q.target) == ("fp8", False, "w8a8_dynamic_ascend")
    assert q.command == ("msmodelslim quant --model_path /path/to/Qwen3-235B-A22B --save_path "
                         "/path/to/Qwen3-235B-A22B-W8A8 --device npu --model_type Qwen3-235B --quant_type w8a8 "
                         "--trust_remote_code True")
    text = render(qwen)
    assert "quantization fp8: not served by the target (vllm-ascend's fp8 config" in text
    assert f"  make a checkpoint it serves: {q.command}" in text
    assert "version matrix row vllm-ascend-0.23.0: platform npu, vllm 0.23.0, vllm_ascend 0.23.0.post1" in text
    assert qwen.recipe.recipe["defaults"] == [
        {"override /hardware": "atlas_800i_a3"}, {"override /model": "qwen3_235b_a22b"},
        {"override /graph": "compiled"}, {"override /quantization": "w8a8_dynamic_ascend"}]


def test_llama_bf16_fits_and_shows_the_kv_difference(llama):
    common = ["model=llama3_70b", "graph=compiled", "engine.max_model_len=8192", "parallel.tensor_parallel_size=4"]
    h200, a3 = _plan(["hardware=nvidia_h200", *common]), _plan(["hardware=atlas_800i_a3", *common])
    assert (llama.source.kv_cache_bytes, llama.target.kv_cache_bytes) == (h200.memory.kv_cache_bytes,
                                                                          a3.memory.kv_cache_bytes)
    assert llama.target.fits and llama.layouts[0].layout == "TP4 × DP1"
    assert llama.quantization.method is None and llama.quantization.command is None
    delta = (a3.memory.kv_cache_bytes - h200.memory.kv_cache_bytes) / 2**30
    assert f"KV cache per device: {delta:+.2f} GiB" in render(llama)
    assert llama.removed == [("--attention-backend", CUDA_ONLY["attention_backend"])]
    assert llama.recipe.recipe["engine"]["extra_args"] is None
    assert ("--block-size", 16, 128) in llama.changed
    assert llama.env_added["PYTORCH_NPU_ALLOC_CONF"] == "expandable_segments:True"
    assert llama.env_added["HCCL_OP_EXPANSION_MODE"] == "AIV"


@pytest.mark.parametrize("method, version, arch, verdict", [
    ("fp8", "0.23.0.post1", "Qwen3MoeForCausalLM", False),   # DeepSeek-V4 layout only (fp8_config.py)
    ("fp8", "0.23.0", "DeepseekV4ForCausalLM", True),
    ("fp8", "0.20.2rc1", "DeepseekV4ForCausalLM", False),    # not in supported_quantization before v0.21.0rc1
    ("awq", "0.25.1rc1", "LlamaForCausalLM", False),
    ("compressed-tensors", "0.11.0", "LlamaForCausalLM", False),
    ("compressed-tensors", "0.13.0", "LlamaForCausalLM", True),
    ("ascend", "0.11.0", "LlamaForCausalLM", True),
])
def test_served_follows_supported_quantization_per_tag(method, version, arch, verdict):
    assert served(method, version, arch)[0] is verdict


def test_msmodelslim_command_for_a_model_without_a_verified_practice():
    assert msmodelslim_command("llama3_70b", "TheBloke/Llama-3-70B-AWQ") == (
        "msmodelslim quant --model_path /path/to/Llama-3-70B --save_path /path/to/Llama-3-70B-W8A8 --device npu "
        "--model_type default --quant_type w8a8 --trust_remote_code True")


def test_unknown_target_is_one_line():
    imported = to_recipe([parse_command(LLAMA)], hardware="nvidia_h200")
    with pytest.raises(ConfigError) as error:
        migrate(imported, "atlas_9000")
    assert str(error.value) == (
        "--to hardware='atlas_9000': is not a hardware option (conf/hardware); fix: did you mean "
        "hardware=atlas_800i_a3? pick from: ascend_950dt, "
        "atlas_300i_duo, atlas_800i_a2, atlas_800i_a2_910b4, atlas_800i_a3, cpu, nvidia_a100_80gb, nvidia_h100, "
        "nvidia_h200")


def test_baseline_from_a_bench_result(tmp_path):
    result = {"date": "20261203", "backend": "vllm", "completed": 200, "request_throughput": 4.0,
              "output_throughput": 1024.5, "median_ttft_ms": 120.0, "p99_ttft_ms": 480.0, "median_tpot_ms": 20.0,
              "p99_tpot_ms": 35.0, "ttfts": [0.1, 0.2]}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(result))
    base = read_baseline(str(path))
    assert base == {"request_throughput": 4.0, "output_throughput": 1024.5, "median_ttft_ms": 120.0,
                    "p99_ttft_ms": 480.0, "median_tpot_ms": 20.0, "p99_tpot_ms": 35.0}
    rows = compare_baseline(base, {"output_throughput": 819.6, "median_ttft_ms": 150.0, "p99_tpot_ms": 28.0})
    assert rows == [("median_ttft_ms", 120.0, 150.0, 1.25), ("p99_tpot_ms", 35.0, 28.0, 0.8),
                    ("output_throughput", 1024.5, 819.6, 819.6 / 1024.5)]
    assert render_comparison(rows).splitlines()[1:] == [
        "median_ttft_ms           120.00        150.00  1.250 (worse)",
        "p99_tpot_ms               35.00         28.00  0.800 (better)",
        "output_throughput       1024.50        819.60  0.800 (worse)"]


def test_bad_baseline_is_one_line(tmp_path):
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ConfigError) as error:
        read_baseline(str(tmp_path / "x.json"))
    assert str(error.value).startswith(f"--baseline='{tmp_path / 'x.json'}': is not JSON (")


def test_baseline_from_an_mlflow_run(mlflow_uri):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_uri)
    run = client.create_run(client.create_experiment("h200"))
    for name, value in (("output_throughput", 1800.0), ("p99_ttft_ms", 420.0), ("completed", 200.0)):
        client.log_metric(run.info.run_id, name, value)
    assert read_baseline(run.info.run_id, mlflow_uri) == {"output_throughput": 1800.0, "p99_ttft_ms": 420.0}
    with pytest.raises(ConfigError) as error:
        read_baseline("0" * 32, mlflow_uri)
    assert str(error.value) == f"--baseline='{'0' * 32}': no such run in this MLflow store"


def test_fp8_kv_cache_and_cuda_env_are_removed_on_ascend(tmp_path):
    script = tmp_path / "serve.sh"
    script.write_text("export NCCL_IB_DISABLE=1\nexport HF_HUB_OFFLINE=1\n"
                      "vllm serve Qwen/Qwen3-8B --max-model-len 8192 --kv-cache-dtype fp8 \\\n"
                      "    --all2all-backend deepep_low_latency\n")
    from ascendflow.importer.sources import read_source

    imported = to_recipe(read_source(str(script)), hardware="nvidia_h200")
    assert imported.recipe["ascend"]["env"] == {"NCCL_IB_DISABLE": "1", "HF_HUB_OFFLINE": "1"}
    m = migrate(imported, "atlas_800i_a2")
    assert [flag for flag, _ in m.removed] == ["--kv-cache-dtype fp8", "--all2all-backend", "env NCCL_IB_DISABLE"]
    assert m.recipe.recipe["ascend"]["env"] == {"HF_HUB_OFFLINE": "1"}
    assert m.target.fits and m.target.plan.kv_cache.dtype == "bfloat16"


def test_the_worked_example_in_the_docs_is_what_migrate_prints(qwen):
    """docs/nvidia.md shows the Qwen3-235B FP8 migration's stdout, abridged by the removal line only."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "nvidia.md").read_text()
    block = text[text.index("stdout (abridged"):]
    block = block[block.index("```text\n") + 8:]
    shown = block[:block.index("```")].splitlines()
    printed = [line for line in render(qwen).splitlines() if not line.startswith("removed quantization fp8")]
    assert shown == printed
