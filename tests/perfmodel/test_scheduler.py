"""The continuous-batching model on cases computed by hand with a constant step time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pytest

from ascendflow.perfmodel.scheduler import EngineLimits, simulate
from ascendflow.perfmodel.steptime import Work


@dataclass(frozen=True)
class FixedStep:
    """Every step takes ``s`` seconds, whatever its batch; records the batches it priced."""

    s: float
    seen: list

    def step_s(self, batch: Sequence[Work]) -> float:
        self.seen.append([(w.cached, w.new) for w in batch])
        return self.s


BIG = EngineLimits(max_num_seqs=16, max_num_batched_tokens=2048, num_blocks=10_000, block_size=16)


def test_one_request_ttft_is_one_prefill_step_and_decode_takes_output_len_minus_one_steps():
    step = FixedStep(0.01, [])
    res = simulate([(100, 8)], BIG, step, max_concurrency=1)
    assert res.steps == 8  # 1 prefill step (samples the first token) + 7 decode steps
    # the 7 decode steps are one run of identical steps, priced at its first, last and middle step (event-driven)
    assert step.seen == [[(0, 100)], [(100, 1)], [(106, 1)], [(103, 1)]]
    assert res.ttft_s == [pytest.approx(0.01)]
    assert res.tpot_s == [pytest.approx(0.01)]
    assert res.e2el_s == [pytest.approx(0.08)]
    m = res.metrics()
    assert m["output_throughput"] == pytest.approx(8 / 0.08)
    assert m["request_throughput"] == pytest.approx(1 / 0.08)


def test_chunked_prefill_splits_a_long_prompt_by_the_token_budget():
    step = FixedStep(0.01, [])
    limits = EngineLimits(max_num_seqs=4, max_num_batched_tokens=256, num_blocks=1000, block_size=16)
    res = simulate([(1000, 2)], limits, step, max_concurrency=1)
    assert [b[0] for b in step.seen] == [(0, 256), (256, 256), (512, 256), (768, 232), (1000, 1)]
    assert res.ttft_s == [pytest.approx(0.04)]


def test_max_num_seqs_queues_the_second_request():
    step = FixedStep(0.01, [])
    limits = EngineLimits(max_num_seqs=1, max_num_batched_tokens=2048, num_blocks=1000, block_size=16)
    res = simulate([(10, 4), (10, 4)], limits, step, max_concurrency=2)
    # The first runs steps 1-4; the second is admitted at step 5 and samples its first token then.
    assert res.ttft_s == [pytest.approx(0.01), pytest.approx(0.05)]
    assert res.e2el_s == [pytest.approx(0.04), pytest.approx(0.08)]


def test_concurrency_one_sends_the_next_request_when_the_previous_finishes():
    res = simulate([(10, 3), (10, 3)], BIG, FixedStep(0.01, []), max_concurrency=1)
    assert res.ttft_s == [pytest.approx(0.01), pytest.approx(0.01)]
    assert res.duration_s == pytest.approx(0.06)


def test_kv_exhaustion_preempts_the_last_running_request_and_recomputes_it():
    # 4 blocks of 4 tokens; two requests of 4 prompt + 6 output tokens. Steps 1-5 fit (2 blocks each); at step 6
    # the first needs a third block: the second is preempted (blocks freed, nothing admitted that step); the first
    # finishes at step 6, the second resumes at step 7 recomputing its 4 + 5 tokens and samples its 6th token.
    step = FixedStep(1.0, [])
    limits = EngineLimits(max_num_seqs=8, max_num_batched_tokens=64, num_blocks=4, block_size=4)
    res = simulate([(4, 6), (4, 6)], limits, step, max_concurrency=2)
    assert res.preemptions == 1
    assert step.seen[-2:] == [[(8, 1)], [(0, 9)]]  # steps 6 and 7 (steps 2-5: one decode run, priced 3 times)
    assert res.e2el_s == [pytest.approx(6.0), pytest.approx(7.0)]
    assert res.steps == 7


def test_a_prompt_larger_than_the_kv_cache_is_refused():
    limits = EngineLimits(max_num_seqs=8, max_num_batched_tokens=64, num_blocks=2, block_size=4)
    with pytest.raises(ValueError, match="needs more than 2 KV blocks"):
        simulate([(20, 2)], limits, FixedStep(1.0, []), max_concurrency=1)


def test_request_rate_arrivals_wait_for_idle_engine_time():
    # One request per second on average (exponential gaps); steps of 1 ms: every request finishes before the next
    # arrives, so TTFT is one step, and the duration is the last arrival plus its 3 steps.
    res = simulate([(10, 3)] * 5, BIG, FixedStep(0.001, []), max_concurrency=None, request_rate=1.0, seed=0)
    assert res.ttft_s == [pytest.approx(0.001)] * 5
    assert res.steps == 15
    assert res.duration_s > 1.0


def test_request_latency_delays_admission_and_counts_in_ttft():
    # Sent at 0, in the engine's queue at 0.005 s: the first step starts then; TTFT = 0.005 + one step.
    res = simulate([(10, 3), (10, 3)], BIG, FixedStep(0.01, []), max_concurrency=1, request_latency_s=0.005)
    assert res.ttft_s == [pytest.approx(0.015), pytest.approx(0.015)]
    assert res.duration_s == pytest.approx(0.07)


def test_a_shared_prefix_is_computed_once_and_later_requests_start_at_its_full_blocks():
    # vLLM KVCacheManager.get_computed_blocks: the longest cached run of full blocks, at most prompt - 1 tokens
    step = FixedStep(0.01, [])
    limits = EngineLimits(max_num_seqs=4, max_num_batched_tokens=2048, num_blocks=1000, block_size=16,
                          enable_prefix_caching=True)
    # 100-token prefix (6 full blocks = 96 tokens) + 20-token suffix; one request at a time
    res = simulate([(120, 2)] * 3, limits, step, max_concurrency=1, prefixes=[(0, 100)] * 3)
    prefills = [b[0] for b in step.seen if b[0][1] > 1]
    assert prefills == [(0, 120), (96, 24), (96, 24)]
    assert res.ttft_s == [pytest.approx(0.01)] * 3
    # without prefix caching (or without prefixes) every prompt is computed whole
    step2 = FixedStep(0.01, [])
    simulate([(120, 2)] * 3, limits, step2, max_concurrency=1)
    assert [b[0] for b in step2.seen if b[0][1] > 1] == [(0, 120)] * 3


def test_requests_admitted_in_the_prefix_owners_step_hit_it_and_the_hit_is_capped_below_the_prompt():
    step = FixedStep(0.01, [])
    limits = EngineLimits(max_num_seqs=4, max_num_batched_tokens=2048, num_blocks=1000, block_size=16,
                          enable_prefix_caching=True)
    # the owner's blocks are cached when allocated, so the second request of the same step already hits them
    simulate([(120, 2), (120, 2)], limits, step, max_concurrency=2, prefixes=[(0, 100), (0, 100)])
    assert step.seen[0] == [(0, 120), (96, 24)]
    # a prompt made of the prefix alone: the hit stops one token short, at the last full block before it (96 -> 80)
    step = FixedStep(0.01, [])
    simulate([(96, 2), (96, 2)], limits, step, max_concurrency=1, prefixes=[(0, 96), (0, 96)])
    assert [b[0] for b in step.seen if b[0][1] > 1] == [(0, 96), (80, 16)]


def test_shared_prefix_blocks_are_allocated_once():
    # 40 blocks of 16: a 320-token prefix (20 blocks) + 32 own tokens each; three requests hold 20 + 3 x (2 + 1) blocks
    limits = EngineLimits(max_num_seqs=4, max_num_batched_tokens=4096, num_blocks=40, block_size=16,
                          enable_prefix_caching=True)
    res = simulate([(352, 8)] * 3, limits, FixedStep(0.01, []), max_concurrency=3, prefixes=[(0, 320)] * 3)
    assert (res.preemptions, res.ttft_s) == (0, [pytest.approx(0.01)] * 3)  # all three admitted in the first step
    # without the cache each needs 23 of the 40 blocks: one at a time
    res = simulate([(352, 8)] * 3, limits, FixedStep(0.01, []), max_concurrency=3)
    assert res.ttft_s == [pytest.approx(0.01), pytest.approx(0.09), pytest.approx(0.17)]


def test_prefix_repetition_requests_carry_their_prefix_and_plans_cache_unless_turned_off():
    from ascendflow.perfmodel.predict import limits_of, workload_prefixes
    from ascendflow.schema.workload import WorkloadSpec
    w = WorkloadSpec(name="p", dataset="prefix_repetition", num_prompts=5, num_prefixes=2, random_input_len=1000)
    assert workload_prefixes(w) == [(0, 1000), (1, 1000), (0, 1000), (1, 1000), (0, 1000)]
    assert workload_prefixes(WorkloadSpec(name="r", dataset="random", num_prompts=5)) is None
    plan = {"engine_args": {"max_num_seqs": 8, "max_num_batched_tokens": 2048}, "kv_cache": {"num_blocks": 100,
            "block_size": 128}, "target": {"kind": "npu"}, "model": {"architecture": {}}}
    assert limits_of(plan).enable_prefix_caching is True  # vLLM's default
    plan["engine_args"]["enable_prefix_caching"] = False
    assert limits_of(plan).enable_prefix_caching is False
