"""The fit's prior (:func:`ascendflow.perfmodel.calibration.fitting.fit_constants`, ``prior_strength``): infinite
strength returns the start constants exactly, zero is the plain least-squares fit, and a finite strength trades
data fit for closeness to the start (MAP / ridge in log space). Rows: a 0.6B model on atlas_800i_a2, measured
figures made by the NPU step model at known constants."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.optimize import least_squares

from ascendflow.perfmodel.calibration.fitting import FITTED, START, Row, fit_constants, log_residuals, predicted, \
    with_values
from tests.conftest import plan_for

BASE = ["hardware=atlas_800i_a2", "model=qwen3_0_6b", "workload=random", "workload.random_output_len=32",
        "workload.num_prompts=4"]
CASES = [["workload.max_concurrency=1", "workload.random_input_len=128"],
         ["workload.max_concurrency=4", "workload.random_input_len=1024"]]
TRUTH = replace(START, memory_efficiency=0.4, step_overhead_s=0.02)


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    out = []
    for i, case in enumerate(CASES):
        spec, plan = plan_for(BASE + case)
        row = Row(str(i), json.loads(plan.to_json()), spec.hardware.model_dump(), spec.workload,
                  spec.quantization.model_dump(), {})
        pred = predicted(row, TRUTH)
        out.append(replace(row, measured={m: pred[m] for m in ("output_throughput", "median_tpot_ms")}))
    return out


def logs(c) -> np.ndarray:
    return np.log([getattr(c, k) for k in FITTED])


def test_infinite_prior_returns_the_start_constants_exactly(rows: list[Row]) -> None:
    assert fit_constants(rows, START, prior_strength=math.inf) == START


def test_zero_prior_is_the_plain_least_squares_fit(rows: list[Row]) -> None:
    lo, hi = np.log([b[0] for b in FITTED.values()]), np.log([b[1] for b in FITTED.values()])
    plain = least_squares(lambda x: np.array(log_residuals(rows, with_values(START, x))),
                          np.clip(logs(START), lo + 1e-6, hi - 1e-6), bounds=(lo, hi), diff_step=0.05, max_nfev=8,
                          x_scale=1.0)
    assert fit_constants(rows, START, max_nfev=8, prior_strength=0.0) == with_values(START, plain.x)


def test_a_prior_keeps_the_fit_nearer_the_start_at_a_higher_data_loss(rows: list[Row]) -> None:
    free = fit_constants(rows, START, max_nfev=8, prior_strength=0.0)
    held = fit_constants(rows, START, max_nfev=8, prior_strength=3.0)
    loss = lambda c: float(np.sum(np.square(log_residuals(rows, c))))  # noqa: E731
    assert loss(free) < 1e-3 < loss(held)  # the free fit reproduces the figures; the prior one does not
    assert np.linalg.norm(logs(held) - logs(START)) < np.linalg.norm(logs(free) - logs(START))
    # the constants not fitted stay the start's
    assert (held.hccs_bandwidth_gbps, held.mtp_accept_length) == (START.hccs_bandwidth_gbps, START.mtp_accept_length)


def test_a_negative_prior_is_refused(rows: list[Row]) -> None:
    with pytest.raises(ValueError, match="prior_strength must be >= 0, got -1"):
        fit_constants(rows, START, prior_strength=-1.0)
