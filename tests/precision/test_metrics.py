"""The report's arithmetic on two small hand-made worker results (pure functions, no engine)."""

from __future__ import annotations

import math

import pytest

from ascendflow.precision.metrics import breaches, compare, perplexity


def _result(greedy, logprobs, top1, margin=None) -> dict:
    teacher = [[1, 2, 3, 4], [1, 2, 5]]
    return {"greedy": greedy, "teacher": teacher, "teacher_logprobs": logprobs, "teacher_top1": top1,
            "teacher_top1_margin": margin or [[None] * 4, [None] * 3],
            "text_logprobs": [[None, math.log(0.5), math.log(0.25)]]}


def test_compare_and_thresholds() -> None:
    # Prompts are 2 tokens long: positions 2.. are the generated tokens (3, 4) and (5,).
    ref = _result([[3, 4], [5]], [[None, -1.0, -0.5, -0.25], [None, -1.0, -2.0]], [[None, 2, 3, 4], [None, 2, 5]],
                  margin=[[None, 1.0, 0.75, 0.5], [None, 1.0, 0.05]])
    cand = _result([[3, 4], [6]], [[None, -9.0, -0.5, -0.75], [None, -9.0, -3.0]], [[None, 2, 3, 9], [None, 2, 6]])
    cand["text_logprobs"] = [[None, math.log(0.25), math.log(0.25)]]
    report = compare(ref, cand, [2, 2])
    assert {k: v for k, v in report.items() if k not in ("perplexity_reference", "perplexity_candidate")} == {
        "prompts": 2, "greedy_agreement": 0.5, "first_divergence": [None, 0], "earliest_divergence": 0,
        "divergence_margin": [None, 0.05], "scored_tokens": 3, "top1_agreement": 1 / 3,
        "mean_abs_dlogprob": 0.5, "max_abs_dlogprob": 1.0, "dlogprob": [0.0, -0.5, -1.0]}
    assert report["perplexity_reference"] == pytest.approx(math.sqrt(8))
    assert report["perplexity_candidate"] == pytest.approx(4.0)
    assert perplexity([[None, math.log(0.5)]]) == pytest.approx(2.0)
    assert breaches(report, {"min_greedy_agreement": None, "min_top1_agreement": 0.3, "max_mean_abs_dlogprob": 0.5,
                             "max_max_abs_dlogprob": None, "max_perplexity_ratio": 2.0}) == []
    assert breaches(report, {"min_greedy_agreement": 1.0, "min_top1_agreement": 0.5, "max_mean_abs_dlogprob": 0.25,
                             "max_max_abs_dlogprob": 0.5, "max_perplexity_ratio": 1.1}) == [
        "greedy_agreement=0.5 is not >= 1.0", "top1_agreement=0.3333 is not >= 0.5",
        "mean_abs_dlogprob=0.5 is not <= 0.25", "max_abs_dlogprob=1 is not <= 0.5",
        "perplexity_ratio=1.414 is not <= 1.1"]


def test_results_on_other_sequences_are_refused() -> None:
    ref = _result([[3, 4], [5]], [[None] * 4, [None] * 3], [[None] * 4, [None] * 3])
    cand = dict(ref, teacher=[[1, 2, 3, 4], [1, 2, 6]])
    with pytest.raises(ValueError, match="^candidate was not scored on the reference's sequences$"):
        compare(ref, cand, [2, 2])


def test_same_engine_is_what_decides_the_computation() -> None:
    # Issue 20 row 12f: the README's command compares bf16 with itself; the report notes it, and only then.
    from ascendflow.precision.app import same_engine

    ref = {"model": "/models/smollm2", "dtype": "bfloat16", "enforce_eager": True, "seed": 0, "max_model_len": 1024}
    assert same_engine(ref, {**ref, "seed": 1, "max_model_len": 2048})
    assert same_engine(ref, {**ref, "model": "/models/../models/smollm2/"})
    for change in ({"dtype": "float32"}, {"quantization": "ascend"}, {"enforce_eager": None},
                   {"compilation_config": {"mode": 3}}, {"model": "/models/smollm2-w8a8"}, {"kv_cache_dtype": "fp8"}):
        assert not same_engine(ref, {**ref, **change}), change
