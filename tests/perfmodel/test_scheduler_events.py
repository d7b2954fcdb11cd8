"""The event-driven scheduler against the token-by-token simulator's whole values (``tests/data/
scheduler_reference.json``, see ``sim_cases.py``), and the DP split.

Tolerance: per-request TTFT, TPOT and E2EL and every metric within 1e-9 relative (the runs of identical decode
steps are summed in closed form, not step by step: only float rounding differs) and the step and preemption counts
exact; for the step model with a kink in the context (``kink_in_context``), 1e-6 relative."""

from __future__ import annotations

import json

import pytest

from ascendflow.perfmodel.scheduler import EngineLimits, simulate, simulate_dp
from tests.perfmodel.sim_cases import CASES, REFERENCE, AffineStep, run_case

REF = json.loads(REFERENCE.read_text())["cases"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_event_driven_scheduler_equals_the_token_by_token_reference(name):
    got, want = run_case(name), REF[name]
    rel = 1e-6 if name == "kink_in_context" else 1e-9
    assert got["metrics"]["steps"] == want["metrics"]["steps"]
    assert got["metrics"]["preemptions"] == want["metrics"]["preemptions"]
    assert got["output_tokens"] == want["output_tokens"]
    for key in ("ttft_s", "tpot_s", "e2el_s"):
        assert got[key] == pytest.approx(want[key], rel=rel, abs=1e-12), key
    assert got["metrics"] == pytest.approx(want["metrics"], rel=rel)


def test_reference_covers_preemption_rates_and_both_prefill_modes():
    # the reference is only a check of the rules when its workloads exercise them
    assert REF["kv_preemption"]["metrics"]["preemptions"] == 22
    assert REF["mixed_lengths_preemption"]["metrics"]["preemptions"] == 100
    assert REF["poisson_rate"]["metrics"]["completed"] == 100
    assert not CASES["no_chunked_prefill"][1].enable_chunked_prefill


def test_data_parallel_ranks_each_run_their_share_of_the_requests():
    # 2 ranks of max_num_seqs 8, concurrency 16, 16 equal requests: each rank runs 8 at once, exactly as one rank
    # runs 8 requests with concurrency 8; DP-1 with max_num_seqs 8 queues half of them instead.
    limits = EngineLimits(8, 4096, 100_000, 16)
    one = simulate([(256, 32)] * 8, limits, AffineStep(), max_concurrency=8)
    two = simulate_dp([(256, 32)] * 16, limits, AffineStep(), data_parallel_size=2, max_concurrency=16)
    assert two.e2el_s[0::2] == one.e2el_s and two.e2el_s[1::2] == one.e2el_s
    assert two.output_tokens == 16 * 32 and two.steps == one.steps
    assert two.duration_s == pytest.approx(one.duration_s)
    single = simulate([(256, 32)] * 16, limits, AffineStep(), max_concurrency=16)
    assert single.duration_s > 1.9 * two.duration_s


def test_data_parallel_size_one_is_the_plain_simulation():
    requests, limits, kwargs, step = CASES["poisson_rate"]
    a = simulate_dp(requests, limits, step, data_parallel_size=1, **kwargs)
    b = simulate(requests, limits, step, **kwargs)
    assert a.e2el_s == b.e2el_s and a.steps == b.steps


def test_dp_with_fewer_requests_in_flight_than_ranks_uses_that_many_ranks():
    requests, limits = [(64, 8)] * 6, EngineLimits(8, 256, 1000, 16)
    a = simulate_dp(requests, limits, AffineStep(), data_parallel_size=4, max_concurrency=1)
    b = simulate(requests, limits, AffineStep(), max_concurrency=1)
    assert a.e2el_s == b.e2el_s and a.duration_s == b.duration_s


def test_predict_metrics_simulates_every_dp_rank_of_the_plan():
    from ascendflow.perfmodel.predict import predict_metrics
    from ascendflow.schema.workload import WorkloadSpec

    def plan(dp: int) -> dict:
        return {"engine_args": {"max_num_seqs": 8, "max_num_batched_tokens": 4096, "data_parallel_size": dp},
                "kv_cache": {"num_blocks": 100_000, "block_size": 16}, "target": {"kind": "cpu"},
                "model": {"architecture": {}}}

    w = WorkloadSpec(name="random", dataset="random", num_prompts=32, max_concurrency=16, random_input_len=256,
                     random_output_len=32, ignore_eos=True)
    one, two = predict_metrics(plan(1), w, AffineStep()), predict_metrics(plan(2), w, AffineStep())
    # DP-1 runs 8 of the 16 in flight at a time, DP-2 all 16 (8 per rank): twice the output rate, same TPOT
    assert two["output_throughput"] == pytest.approx(2 * one["output_throughput"], rel=1e-9)
    assert two["median_tpot_ms"] == pytest.approx(one["median_tpot_ms"], rel=1e-9)
    assert two["completed"] == one["completed"] == 32
