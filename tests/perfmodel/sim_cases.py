"""Workloads and step-time models for the scheduler equivalence test (``test_scheduler_events.py``).

The reference values in ``tests/data/scheduler_reference.json`` were computed by the token-by-token simulator (one
loop iteration per engine step, ``ascendflow/perfmodel/scheduler.py`` before the event-driven rewrite) with
``python tests/perfmodel/sim_cases.py``. The step models are defined here, not taken from ``steptime.py``, so the
reference stays valid whatever the step-time pricing becomes.
"""

from __future__ import annotations

import json
import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ascendflow.perfmodel.scheduler import EngineLimits, simulate
from ascendflow.perfmodel.steptime import Work

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "scheduler_reference.json"


@dataclass(frozen=True)
class AffineStep:
    """A step time of the table model's form: fixed + per token + per decode context token + causal prefill
    attention (chunk × its mean context) + per sampled row (LM head), seconds."""

    fixed: float = 0.004
    per_token: float = 2e-6
    per_ctx: float = 1e-8
    per_prefill_pair: float = 3e-10
    per_row: float = 5e-5

    def step_s(self, batch: Sequence[Work]) -> float:
        tokens = sum(w.new for w in batch)
        ctx = sum(w.cached + 1 for w in batch if w.new == 1)
        pairs = sum(w.new * (w.cached + (w.new + 1) / 2) for w in batch if w.new > 1)
        return (self.fixed + self.per_token * tokens + self.per_ctx * ctx + self.per_prefill_pair * pairs
                + self.per_row * len(batch))


@dataclass(frozen=True)
class KinkStep:
    """A step time that is not linear in the context: per row ``max(1e-7 × context, 3e-5)`` (a roofline-like
    kink at context 300) plus 2 ms and 1 µs per token."""

    def step_s(self, batch: Sequence[Work]) -> float:
        return 0.002 + 1e-6 * sum(w.new for w in batch) + sum(
            max(1e-7 * (w.cached + w.new), 3e-5) for w in batch)


def _mixed(n: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.randint(20, 900), rng.randint(1, 160)) for _ in range(n)]


#: name: (requests, limits, simulate kwargs, step model)
CASES: dict[str, tuple[list[tuple[int, int]], EngineLimits, dict[str, Any], Any]] = {
    "decode_bound": ([(512, 128)] * 64, EngineLimits(16, 2048, 100_000, 16), {"max_concurrency": 64}, AffineStep()),
    "chunked_prefill_latency": ([(1000, 64)] * 48, EngineLimits(8, 256, 100_000, 16),
                                {"max_concurrency": 24, "request_latency_s": 0.0202}, AffineStep()),
    "no_chunked_prefill": ([(300, 50)] * 40, EngineLimits(8, 512, 100_000, 16, enable_chunked_prefill=False),
                           {"max_concurrency": 40}, AffineStep()),
    "kv_preemption": ([(200, 300)] * 32, EngineLimits(16, 1024, 300, 16), {"max_concurrency": 32}, AffineStep()),
    "poisson_rate": ([(256, 96)] * 100, EngineLimits(32, 2048, 100_000, 16),
                     {"max_concurrency": None, "request_rate": 5.0, "seed": 3, "request_latency_s": 0.0202},
                     AffineStep()),
    "mixed_lengths_preemption": (_mixed(80, 7), EngineLimits(12, 512, 260, 16),
                                 {"max_concurrency": 20, "request_latency_s": 0.01}, AffineStep()),
    "seqs_above_budget": ([(20, 40)] * 50, EngineLimits(64, 32, 100_000, 16), {"max_concurrency": 50},
                          AffineStep()),
    "rate_and_concurrency": (_mixed(90, 11), EngineLimits(16, 512, 100_000, 16),
                             {"max_concurrency": 10, "request_rate": 20.0, "seed": 5}, AffineStep()),
    "kink_in_context": ([(150, 400)] * 24, EngineLimits(8, 512, 100_000, 16), {"max_concurrency": 24}, KinkStep()),
}


def run_case(name: str, simulate_fn=simulate) -> dict[str, Any]:
    """Whole values of one case: ``metrics()`` and the per-request TTFT, TPOT and E2EL (seconds)."""
    requests, limits, kwargs, step = CASES[name]
    res = simulate_fn(requests, limits, step, **kwargs)
    return {"metrics": res.metrics(), "ttft_s": res.ttft_s, "tpot_s": res.tpot_s, "e2el_s": res.e2el_s,
            "output_tokens": res.output_tokens, "duration_s": res.duration_s}


if __name__ == "__main__":  # regenerate the reference (only with the token-by-token simulator)
    out = {"generated_by": sys.argv[1] if len(sys.argv) > 1 else "token-by-token simulator",
           "cases": {name: run_case(name) for name in CASES}}
    REFERENCE.write_text(json.dumps(out, indent=1) + "\n")
    print({k: (v["metrics"]["steps"], v["metrics"]["preemptions"]) for k, v in out["cases"].items()})
    assert all(math.isfinite(x) for c in out["cases"].values() for x in c["e2el_s"])
