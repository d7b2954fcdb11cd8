"""P:D ratio by rate matching (ascendflow/perfmodel/pd_ratio.py) and the scheduler's received KV (PD decode)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ascendflow.perfmodel.attach import with_performance
from ascendflow.perfmodel.calibration import load_calibration
from ascendflow.perfmodel.pd_ratio import match_rates, pd_ratio
from ascendflow.perfmodel.scheduler import EngineLimits, simulate
from ascendflow.perfmodel.steptime import Work
from tests.compiler.test_pd import _plan, _spec


class _FixedStep:
    """A step model of 10 ms a step that records every batch it prices."""

    overhead_s = 0.0

    def __init__(self):
        self.batches: list[list[Work]] = []

    def step_s(self, batch):
        self.batches.append(list(batch))
        return 0.01


def test_received_kv_leaves_only_the_last_prompt_token():
    step = _FixedStep()
    limits = EngineLimits(max_num_seqs=4, max_num_batched_tokens=64, num_blocks=100, block_size=16)
    res = simulate([(100, 3)], limits, step, max_concurrency=None, received_tokens=100)
    # vLLM _update_waiting_for_remote_kv: all 100 loaded -> 99 computed, the last prompt token computed locally
    assert step.batches[0] == [Work(99, 1)]
    assert res.steps == 3 and res.ttft_s == [pytest.approx(0.01)] and res.tpot_s == [pytest.approx(0.01)]
    plain = simulate([(100, 3)], limits, _FixedStep(), max_concurrency=None)
    assert plain.steps == 4  # 64 + 36 prompt tokens in two steps, then two decode steps


def test_match_rates():
    assert match_rates(3.0, 7.0, 10.0) == {"prefill_instances": 4, "decode_instances": 2,
                                           "sizing": "request_rate=10 req/s"}
    balanced = match_rates(50.0, 100.0, math.inf)
    assert (balanced["prefill_instances"], balanced["decode_instances"]) == (2, 1)
    assert match_rates(35.5623, 174.1537, math.inf)["prefill_instances"] == 5
    with pytest.raises(ValueError, match="rates must be positive"):
        match_rates(0.0, 1.0, 1.0)


def test_deepseek_2p1d_recommendation(tmp_path: Path):
    spec = _spec("deepseek_r1_pd_2p1d")
    plan = with_performance(_plan("deepseek_r1_pd_2p1d"), spec, None, tmp_path)
    r = plan.performance["pd_ratio"]
    assert (r["status"], r["ratio"], r["isl"], r["osl"]) == ("estimate", "4:1", 256, 128)
    assert r["prefill"]["rps_per_instance"] == 41.971 and r["prefill"]["target_ms"] == 2000.0
    assert r["prefill"]["at"]["p99_ttft_ms"] == 855.912
    assert r["decode"]["rps_per_instance"] == 161.0989 and r["decode"]["target_ms"] == 150.0
    assert r["decode"]["at"]["p99_tpot_ms"] == 55.335
    q = load_calibration("atlas_800i_a3")["intervals"]["classes"]["atlas_a2_a3"]["output_throughput"]
    lo, hi = round(41.971 / math.exp(q["q90_log"]), 3), round(41.971 / math.exp(q["q10_log"]), 3)
    assert (r["prefill"]["rps_per_instance_low"], r["prefill"]["rps_per_instance_high"]) == (lo, hi)
    assert r["planned"] == {"ratio": "2:1", "throughput_rps": 83.942, "bottleneck": "prefill",
                            "throughput_rps_low": round(2 * lo, 4), "throughput_rps_high": round(2 * hi, 4)}
    assert {k: r["interval"][k] for k in ("coverage", "class", "source")} == {
        "coverage": 0.8, "class": "atlas_a2_a3", "source": "intervals.yaml"}
    assert r["measured_error"]["class"] == "mla_moe"
    assert r["line"] == (
        "P:D = 4:1 (basis: NPU step model (ascendflow/perfmodel/npu.py), calibration atlas_800i_a3.yaml; ISL 256 / "
        "OSL 128, request_rate=inf: capacities balanced (at most 8 instances per role); prefill 41.97 req/s per "
        "instance at TTFT<=2000 ms, decode 161.10 req/s per instance at TPOT<=150 ms; model error (LOO, mla_moe): "
        "tok/s ±10.3%, TPOT ±3.7%, TTFT ±59.6%); planned 2:1: 83.94 req/s, prefill-bound")


def test_measured_capacity_and_rate(tmp_path: Path):
    overrides = ("pd.prefill.measured_capacity_rps=50", "pd.decode.measured_capacity_rps=100",
                 "workload.request_rate=240")
    spec = _spec("deepseek_r1_pd_2p1d", *overrides)
    r = with_performance(_plan("deepseek_r1_pd_2p1d", *overrides), spec, None, tmp_path).performance["pd_ratio"]
    assert (r["ratio"], r["sizing"], r["basis"]) == ("5:3", "request_rate=240 req/s", "measured")
    assert r["measured_error"] == "measured per-role capacity"
    assert r["planned"] == {"ratio": "2:1", "throughput_rps": 100.0, "bottleneck": "balanced",
                            "throughput_rps_low": 100.0, "throughput_rps_high": 100.0}  # measured: no model error
    assert r["line"].endswith("planned 2:1: 100.00 req/s, balanced")


def test_chat_workload_not_estimated():
    spec = _spec("deepseek_r1_pd_2p1d")
    chat = spec.workload.model_copy(update={"dataset": "chat"})
    plan = json.loads(_plan("deepseek_r1_pd_2p1d").to_json())
    assert pd_ratio(plan, spec.hardware.model_dump(), chat, spec.slo, None, None) == {
        "status": "not estimated", "reason": "chat dataset has no fixed ISL/OSL; use workload=random"}


def test_unmeetable_target_is_said(tmp_path: Path):
    spec = _spec("deepseek_r1_pd_2p1d", "slo.p99_tpot_ms=1")
    r = with_performance(_plan("deepseek_r1_pd_2p1d"), spec, None, tmp_path).performance["pd_ratio"]
    assert r["status"] == "not estimated"
    assert r["reason"].startswith("decode: p99_tpot_ms <= 1 ms is not met at any rate by one instance (predicted ")
    assert r["reason"].endswith(" ms at the lowest); relax slo.p99_tpot_ms")
