"""Public start-up logs as memory tests: each log parsed by calibrate's formats and compared with the plan compiled
for the same deployment at that release (``tests/calibrate/public_logs.py``; errors per kind in docs/calibrate.md)."""

from __future__ import annotations

import pytest

from ascendflow.compiler.memory.kv_budget import kv_cache_plan
from ascendflow.models.resolve import resolve_model
from ascendflow.runner.engine_facts import parse_engine_facts
from ascendflow.schema import load_spec
from ascendflow.schema.errors import ConfigError
from tests.calibrate import excerpts as ex
from tests.calibrate import public_logs as pl
from tests.calibrate.test_calibrate import _plan
from tests.conftest import compose_config

GIB = 2**30


def _error_pct(plan: float, log: float) -> float:
    return 100 * (plan - log) / log


def _arch(overrides: list[str]):
    raw = compose_config(overrides)
    raw.pop("hydra", None)
    return resolve_model(load_spec(raw).model, need_weights=False).architecture


def test_every_public_log_parses_to_its_logged_values():
    facts = {log.url: parse_engine_facts(log.log) for log in (
        pl.V0221RC1_310P_QWEN3_0_6B, pl.V0110_A2_QWEN3_8B, pl.V0110RC0_300I_DUO_QWEN3_4B, pl.V0110RC0_QWEN3_NEXT_TP8,
        pl.V0102RC1_QWEN3_NEXT_TP4)}
    kv = facts[pl.V0221RC1_310P_QWEN3_0_6B.url].items["kv_cache_bytes"]
    assert (kv.logged, kv.logged_unit, kv.value) == (0.09, "GiB", int(0.09 * GIB))
    assert facts[pl.V0110_A2_QWEN3_8B.url].value("max_concurrency") == 10.56
    duo = facts[pl.V0110RC0_300I_DUO_QWEN3_4B.url]
    assert (duo.value("kv_cache_bytes"), duo.value("kv_cache_tokens")) == (26_954_181_529, 182_784)
    assert facts[pl.V0110RC0_QWEN3_NEXT_TP8.url].items["weights_bytes"].logged == 18.7767
    assert facts[pl.V0102RC1_QWEN3_NEXT_TP4.url].items["weights_bytes"].logged == 37.2362


def test_kv_layout_turns_each_logged_kv_budget_into_the_logged_tokens():
    # Where the log prints the KV bytes, the layout alone must give the logged tokens exactly (vLLM < 0.20: blocks ×
    # block_size; max_model_len is a multiple of 128 in both logs, so the 0.20 formula agrees).
    qwen3_4b = _arch(list(pl.V0110RC0_300I_DUO_QWEN3_4B.overrides))
    duo = kv_cache_plan(qwen3_4b, kv_cache_bytes=26_954_181_529, layers_on_device=36, tensor_parallel_size=1,
                        kv_dtype="float16", block_size=128, max_model_len=4096)
    assert (duo.tokens, round(duo.max_concurrency, 2)) == (182_784, 44.62)
    # #3800 (MoE, Qwen3-VL-235B text layers = Qwen3-235B-A22B: 94 layers, 4 KV heads replicated to 1 per rank at TP8):
    # the smallest rank's bytes give the first line, Worker_DP0_TP2_EP2's the second.
    qwen3_235b = _arch(["model=qwen3_235b_a22b"])
    facts = parse_engine_facts(ex.V0110RC0_DP_TP_EP)
    assert facts.items["kv_cache_tokens"].all_values == [236_416, 246_272]
    tokens = [kv_cache_plan(qwen3_235b, kv_cache_bytes=ex.DP_AVAILABLE[rank], layers_on_device=94,
                            tensor_parallel_size=8, kv_dtype="bfloat16", block_size=128, max_model_len=32_768).tokens
              for rank in ("Worker_DP0_TP0_EP0", "Worker_DP0_TP2_EP2")]
    assert tokens == [236_416, 246_272]


def test_dense_plans_against_their_logs():
    # #3479 (v0.11.0rc0, 300I Duo, `vllm serve`): rc0 raises max_num_batched_tokens to max_model_len (4,096), the
    # profile run computes the logits in fp16 without a sampler and the 310P's SwiGLU keeps float32 copies
    # (EngineRules.profile_logits, p310_swiglu_fp32): 187,904 tokens, +2.8 % (191,616, +4.8 %, before). The rest
    # (0.71 GiB of activation + non-torch under-counted on a 26.95 GiB budget) has no source form here.
    duo = _plan(list(pl.V0110RC0_300I_DUO_QWEN3_4B.overrides))
    assert duo.kv_cache.tokens == 187_904
    assert _error_pct(duo.kv_cache.tokens, 182_784) == pytest.approx(2.80, abs=0.01)
    assert round((duo.memory.kv_cache_bytes - 26_954_181_529) / GIB, 2) == 0.71  # the dense band (checks/memory.py)
    # #4807 (v0.11.0, A2, the script's offline LLM(): 8,192 batched tokens, the 2025 stack's 60.96 GiB): concurrency
    # 10.63x planned against 10.56x logged, +0.7 % (±0.05 % from the log's two decimals); 10.84x (+2.6 %) before, at
    # the server's 2,048 tokens and 61.27 GiB.
    a2 = _plan(list(pl.V0110_A2_QWEN3_8B.overrides))
    assert a2.kv_cache.tokens == 278_912
    assert round(a2.kv_cache.max_concurrency, 2) == 10.63
    assert _error_pct(a2.kv_cache.max_concurrency, 10.56) == pytest.approx(0.66, abs=0.06)


def test_310p_shared_device_refused_as_the_engine_failed():
    # #14274 (v0.22.1rc1): with 20,687 MB held by another service, the 310P worker subtracts that memory again
    # (non_torch_memory_cleared_by_empty_cache) and leaves 0.09 GiB, fewer than one 4,096-token request needs
    # (4,096 × 28 layers × 2 × 8 heads × 128 × 2 B = 0.44 GiB): the engine stops. The plan refuses the same deployment.
    with pytest.raises(ConfigError, match="negative KV budget"):
        _plan(list(pl.V0221RC1_310P_QWEN3_0_6B.overrides))
    # Without the other service the plan's non-KV memory (weights + activation + non-torch) is the profile's
    # "Total non KV cache memory: 1.65GiB" within 0.02 GiB (+1 %).
    alone = _plan([o for o in pl.V0221RC1_310P_QWEN3_0_6B.overrides if not o.startswith("hardware.occupied")])
    m = alone.memory
    non_kv_gib = (m.weights_bytes + m.activation_bytes + m.non_torch_bytes) / GIB
    assert non_kv_gib == pytest.approx(pl.V0221RC1_310P_NON_KV_GIB, abs=0.025)
    # 1.6649 GiB: v0.22.1rc1's profile computes model-dtype logits after the forward (EngineRules.profile_logits), so
    # the activation is the forward's alone (1.67 with v0.13.0's fp32 logits summed); the 310P keeps its 0.5 GiB
    # runtime non-torch memory since set_device (no hardware.non_torch_since_set_device_bytes), which this line fits.
    assert round(non_kv_gib, 2) == 1.66


@pytest.mark.parametrize(("log", "planned_gib", "error_pct"), [
    (pl.V0110RC0_QWEN3_NEXT_TP8, 18.6508, -0.67),
    (pl.V0102RC1_QWEN3_NEXT_TP4, 37.1837, -0.14),
])
def test_hybrid_weights_per_rank_against_their_logs(log, planned_gib, error_pct):
    # Qwen3-Next-80B-A3B (Gated DeltaNet + full attention, 512 experts) from its public config.json: weights per rank
    # within 1 % of "Loading model weights took X GB" (a GiB figure, model_runner_v1.py).
    plan = _plan(list(log.overrides))
    logged = parse_engine_facts(log.log).items["weights_bytes"].logged
    assert round(plan.memory.weights_bytes / GIB, 4) == planned_gib
    assert _error_pct(plan.memory.weights_bytes / GIB, logged) == pytest.approx(error_pct, abs=0.01)


def test_unpinned_logs_name_what_is_missing():
    # The logs at v0.13+ that could not be tests: each entry says which input the issue leaves out.
    assert len(pl.UNPINNED) == 13  # + PR #12609 (issue 27, session 5)
    assert all(url.startswith("https://github.com/vllm-project/vllm-ascend/") for url in pl.UNPINNED)
    # None of them is also a pinned log (a log is a test or a gap, never both).
    pinned = {log.url for log in (pl.V0221RC1_310P_QWEN3_0_6B, pl.V0110_A2_QWEN3_8B, pl.V0110RC0_300I_DUO_QWEN3_4B,
                                  pl.V0110RC0_QWEN3_NEXT_TP8, pl.V0102RC1_QWEN3_NEXT_TP4)}
    assert not pinned & set(pl.UNPINNED)
