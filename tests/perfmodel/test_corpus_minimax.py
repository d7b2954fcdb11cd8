"""The corpus importer on vllm-ascend's MiniMax-M2.5 CI configs (vendored under ``tests/data/ci_configs``): the
W8A8 QuaRot checkpoint maps to ``model=minimax_m2_5`` with ``quantization=w8a8_dynamic_ascend``; a case with an
EAGLE-3 draft maps to ``engine.speculative_config`` with that draft, and plans with the draft estimated from the
target's shape (its ``config.json`` is not public), labelled so."""

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


EAGLE3 = "engine.speculative_config={method:eagle3,model:'vllm-ascend/MiniMax-M2.5-eagle-model-0318',num_speculative_tokens:3}"


def test_minimax_m25_quarot_a2_case_with_an_eagle3_draft_maps_to_the_speculative_config():
    # vllm-ascend tests/e2e/nightly/single_node/models/configs/MiniMax-M2.5-w8a8-QuaRot-A2.yaml@20c7cb835bab
    case = _case("MiniMax-M2.5-w8a8-QuaRot-A2.yaml")
    assert case["bench"]["baseline"] == 1860.7
    assert ici.hardware_of("x/MiniMax-M2.5-w8a8-QuaRot-A2.yaml", {}, {}) == ("atlas_800i_a2", "file name (A2)")
    overrides, missing = ici.express(case, "atlas_800i_a2", "vllm-ascend-0.23.0")
    assert missing == [] and EAGLE3 in overrides
    assert ici.family_of(case["model"]) == "minimax-m2.5"
    # the draft's enforce_eager travels with it (vllm-ascend tests/e2e/weekly/single_node/configs/
    # MiniMax-M2.5-w8a8-QuaRot-A3.yaml@ec8bcaf3d8ca's in128k cases give it, at 1 speculative token)
    argv = [a.replace('"num_speculative_tokens":3', '"enforce_eager": true, "num_speculative_tokens": 1')
            for a in case["argv"][0]]
    overrides, missing = ici.express({**case, "argv": [argv]}, "atlas_800i_a2", "vllm-ascend-0.23.0")
    assert missing == [] and ("engine.speculative_config={method:eagle3,model:'vllm-ascend/MiniMax-M2.5-eagle-model-"
                              "0318',num_speculative_tokens:1,enforce_eager:true}") in overrides


def test_minimax_m25_quarot_a2_eagle3_case_plans_the_draft_from_the_targets_shape():
    # vllm-ascend tests/e2e/nightly/single_node/models/configs/MiniMax-M2.5-w8a8-QuaRot-A2.yaml@20c7cb835bab
    from ascendflow.models.resolve import resolve_model
    from ascendflow.perfmodel.arch import _spec
    from ascendflow.runner.detect import compile_for_this_host

    case = _case("MiniMax-M2.5-w8a8-QuaRot-A2.yaml")
    overrides, missing = ici.express(case, "atlas_800i_a2", "vllm-ascend-0.23.0")
    assert missing == [] and EAGLE3 in overrides
    spec = _spec(["run.mode=plan", "tracking=none", *overrides])
    plan = compile_for_this_host(spec, resolve_model(spec.model, need_weights=False))
    label = ("ESTIMATE: EAGLE-3 draft planned from the target's shape (its config.json is not on this machine): "
             "1 decoder layer, hidden 3072, 48 heads / 8 KV heads x 128, MLP 1536, draft vocab = target vocab "
             "200064; unmeasured")
    assert plan.warnings[0] == (f"engine.speculative_config.model='vllm-ascend/MiniMax-M2.5-eagle-model-0318': "
                                f"{label}; point engine.speculative_config.model at the draft's directory (its "
                                f"config.json then wins)")
    assert plan.estimates["draft"] == label
    assert plan.draft["estimated"] is True
    assert {k: plan.draft["architecture"][k] for k in ("num_hidden_layers", "hidden_size", "vocab_size")} == {
        "num_hidden_layers": 1, "hidden_size": 3072, "vocab_size": 200064}
    # one llama_eagle3 layer at TP8, bf16: 3 norms, qkv (6 + 2·1 heads × 128) × 2·3072, o_proj 3072 × 768,
    # gate_up 384 × 3072, down 3072 × 192, fc 3072 × 3·3072, norm, lm_head 200064/8 × 3072; no d2t (same vocab)
    elements = (3 * 3072 + 1024 * 6144 + 3072 * 768 + 384 * 3072 + 3072 * 192 + 3072 * 9216 + 3072
                + 25008 * 3072)
    assert plan.memory.draft_weights_bytes == 2 * elements == 231_137_280
    assert plan.engine_args["speculative_config"] == {
        "method": "eagle3", "num_speculative_tokens": 3, "model": "vllm-ascend/MiniMax-M2.5-eagle-model-0318"}
    assert '"draft"' in plan.to_json()
