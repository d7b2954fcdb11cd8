"""The corpus importer on vllm-ascend's MiniMax-M2.5 CI configs (vendored under ``tests/data/ci_configs``): the
W8A8 QuaRot checkpoint maps to ``model=minimax_m2_5`` with ``quantization=w8a8_dynamic_ascend``; a case with an
EAGLE-3 draft names that knob as missing."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import import_ci_config as ici  # noqa: E402

DATA = ROOT / "tests" / "data" / "ci_configs"


def _case(name: str) -> dict:
    (case,) = ici.perf_cases(yaml.safe_load((DATA / name).read_text()))
    return case


def test_minimax_m25_w8a8_a3_case_is_expressed_as_its_argv_says():
    # vllm-ascend tests/e2e/nightly/single_node/models/configs/MiniMax-M2.5-W8A8-A3.yaml@2599328c143a
    case = _case("MiniMax-M2.5-W8A8-A3.yaml")
    assert (case["case"], case["model"], case["bench"]["baseline"]) == (
        "MiniMax-M2.5-w8a8/perf", "Eco-Tech/MiniMax-M2.5-w8a8-QuaRot", 730.0832)
    assert ici.model_option(case["model"]) == ("minimax_m2_5", "W8A8")
    assert ici.model_option("vllm-ascend/MiniMax-M2.7-w8a8-QuaRot") == ("minimax_m2_5", "W8A8")
    assert ici.model_option("MiniMax/MiniMax-M3") == (None, None)
    assert ici.express(case, "atlas_800i_a3", "vllm-ascend-0.13.0") == ([
        "hardware=atlas_800i_a3", "hardware.software=vllm-ascend-0.13.0", "model=minimax_m2_5",
        "parallel.tensor_parallel_size=4", "parallel.data_parallel_size=4", "parallel.enable_expert_parallel=true",
        "parallel.nodes=1", "quantization=w8a8_dynamic_ascend", "graph=full_decode_only", "engine.max_num_seqs=128",
        "engine.max_model_len=153600", "engine.max_num_batched_tokens=16384", "engine.gpu_memory_utilization=0.8",
        "engine.enable_prefix_caching=false", "engine.async_scheduling=true", "workload=random",
        "workload.ignore_eos=true", "workload.random_input_len=3500", "workload.random_output_len=1500",
        "workload.num_prompts=80", "workload.max_concurrency=20", "workload.request_rate=inf"], [])


def test_minimax_m25_quarot_a2_case_with_an_eagle3_draft_names_the_missing_knob():
    # vllm-ascend tests/e2e/nightly/single_node/models/configs/MiniMax-M2.5-w8a8-QuaRot-A2.yaml@20c7cb835bab
    case = _case("MiniMax-M2.5-w8a8-QuaRot-A2.yaml")
    assert case["bench"]["baseline"] == 1860.7
    assert ici.hardware_of("x/MiniMax-M2.5-w8a8-QuaRot-A2.yaml", {}, {}) == ("atlas_800i_a2", "file name (A2)")
    overrides, missing = ici.express(case, "atlas_800i_a2", "vllm-ascend-0.23.0")
    assert (overrides, missing) == (None, ["--speculative-config method eagle3"])
    assert ici.family_of(case["model"]) == "minimax-m2.5"
