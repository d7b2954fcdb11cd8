"""Precision metrics of a candidate engine against a reference, from the two workers' results (pure functions).

Definitions (positions are the reference's generated tokens, scored teacher-forced on the same token sequences by
both engines):

* greedy agreement: share of prompts whose greedy output token ids are identical; first divergence: index of the
  first differing output token of each prompt (``None`` when identical), and the reference's margin there (its
  top-1 minus top-2 logprob, nats; small = a near-tie);
* top-1 agreement: share of positions where the candidate's most likely token equals the reference's;
* Δ logprob: candidate minus reference log-probability of the reference token; mean and max of its absolute value;
* perplexity: ``exp(-mean logprob)`` over the text's tokens after the first, for each engine.
"""

from __future__ import annotations

import math
from typing import Any


def _first_divergence(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def perplexity(text_logprobs: list[list[float | None]]) -> float:
    """``exp(-mean)`` of every scored token's logprob over all texts (position 0 has none)."""
    values = [lp for seq in text_logprobs for lp in seq[1:]]
    return math.exp(-sum(values) / len(values))


def compare(reference: dict[str, Any], candidate: dict[str, Any], prompt_lengths: list[int]) -> dict[str, Any]:
    """Return the report dict comparing ``candidate`` with ``reference`` (worker results on the same teacher tokens).

    Args:
        reference: the reference worker's result.
        candidate: the candidate worker's result, scored on ``reference["teacher"]``.
        prompt_lengths: tokens of each prompt (the generated part of a teacher sequence starts there).

    Raises:
        ValueError: the two results were not scored on the same sequences.
    """
    if reference["teacher"] != candidate["teacher"]:
        raise ValueError("candidate was not scored on the reference's sequences")
    same = [r == c for r, c in zip(reference["greedy"], candidate["greedy"])]
    divergence = [_first_divergence(r, c) for r, c in zip(reference["greedy"], candidate["greedy"])]
    deltas: list[float] = []
    agree = 0
    for n, r_lp, c_lp, r_top, c_top in zip(prompt_lengths, reference["teacher_logprobs"],
                                          candidate["teacher_logprobs"], reference["teacher_top1"],
                                          candidate["teacher_top1"]):
        for pos in range(n, len(r_lp)):
            deltas.append(c_lp[pos] - r_lp[pos])
            agree += int(r_top[pos] == c_top[pos])
    abs_d = [abs(d) for d in deltas]
    diverged = [d for d in divergence if d is not None]
    # Where a greedy output first differs, how close the reference's own top two tokens were (nats): a small gap is
    # a near-tie that any rounding difference may flip, a large one is a real change of the model's choice.
    margins = [None if d is None or d >= len(g) else reference["teacher_top1_margin"][i][n + d]
               for i, (d, n, g) in enumerate(zip(divergence, prompt_lengths, reference["greedy"]))]
    return {
        "prompts": len(same),
        "greedy_agreement": sum(same) / len(same),
        "first_divergence": divergence,
        "earliest_divergence": min(diverged) if diverged else None,
        "divergence_margin": margins,
        "scored_tokens": len(deltas),
        "top1_agreement": agree / len(deltas),
        "mean_abs_dlogprob": sum(abs_d) / len(abs_d),
        "max_abs_dlogprob": max(abs_d),
        "perplexity_reference": perplexity(reference["text_logprobs"]),
        "perplexity_candidate": perplexity(candidate["text_logprobs"]),
        "dlogprob": deltas,
    }


def breaches(report: dict[str, Any], thresholds: dict[str, float]) -> list[str]:
    """Return one line per threshold the report breaks (empty when it passes).

    Thresholds: ``min_greedy_agreement``, ``min_top1_agreement``, ``max_mean_abs_dlogprob``, ``max_max_abs_dlogprob``,
    ``max_perplexity_ratio`` (candidate / reference); a threshold set to null is not checked.
    """
    ratio = report["perplexity_candidate"] / report["perplexity_reference"]
    checks = [
        ("greedy_agreement", report["greedy_agreement"], thresholds.get("min_greedy_agreement"), ">="),
        ("top1_agreement", report["top1_agreement"], thresholds.get("min_top1_agreement"), ">="),
        ("mean_abs_dlogprob", report["mean_abs_dlogprob"], thresholds.get("max_mean_abs_dlogprob"), "<="),
        ("max_abs_dlogprob", report["max_abs_dlogprob"], thresholds.get("max_max_abs_dlogprob"), "<="),
        ("perplexity_ratio", ratio, thresholds.get("max_perplexity_ratio"), "<="),
    ]
    return [f"{name}={value:.4g} is not {op} {limit}" for name, value, limit, op in checks
            if limit is not None and not (value >= limit if op == ">=" else value <= limit)]
