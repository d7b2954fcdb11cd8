"""Upper (and a few lower) bounds on every size a user can type, so that any value is answered in seconds.

A size past its bound is refused by the schema as one line (``workload.num_prompts=100000000000.0: Input should be
less than or equal to 1000000; set workload.num_prompts to 1000000 or less``). The bounds are ascendflow's, not
vLLM's: each is far above any deployment the shipped recipes and the vllm-ascend tutorials describe, and low enough
that the plan (the compiler and the performance model, which simulates at most
:data:`ascendflow.perfmodel.predict.SIMULATED_REQUESTS` requests) stays cheap. Before them a typo
(``workload.num_prompts=100000000000``) made the prediction build one list entry per prompt and grow past 11 GB.
"""

from __future__ import annotations

#: Most requests, requests in flight, distinct prefixes, load points (concurrency or req/s) and pruned configs: a
#: million (a benchmark of a million prompts is hours of serving even at thousands of requests per second).
MAX_COUNT = 1_000_000
#: Most tokens in any length (prompt, output, prefix, context, tokens per step): 2^24 = 16,777,216, above the
#: longest context a public model declares (Llama 4 Scout's ``max_position_embeddings``, 10,485,760; DeepSeek-V3/R1:
#: 163,840).
MAX_TOKENS = 2**24
#: Most sequences per engine step (``max_num_seqs``) and largest graph capture size: 65,536 (vLLM's defaults are
#: 256-1024; vllm-ascend's recipes use at most 512).
MAX_NUM_SEQS = 65_536
#: Lowest request rate, requests/s: one request every 1,000 s (below it a benchmark of even a few prompts lasts hours).
MIN_REQUEST_RATE = 0.001
#: Most devices in any parallel dimension (TP, PP, DP, DP ranks per node) and PD instances: 4,096.
MAX_PARALLEL = 4_096
#: Most nodes of a deployment or a PD role, and devices per node: 1,024 (one launch script is written per node).
MAX_NODES = 1_024
#: Most bytes in any memory figure (device memory, KV budget, reserves): 2^50 = 1 PiB.
MAX_BYTES = 2**50
#: Largest seed: 2^32 - 1 (NumPy's ``RandomState``, which ``vllm bench serve`` seeds, takes 32-bit seeds).
MAX_SEED = 2**32 - 1
#: Largest KV block size in tokens, and its multiple: 65,536.
MAX_BLOCK_SIZE = 65_536
#: Most speculative (MTP) draft tokens per step: 64 (vllm-ascend's DeepSeek MTP recipes use 1-3).
MAX_SPECULATIVE_TOKENS = 64
#: Longest wait in seconds (engine health time-out, shutdown grace): one week.
MAX_SECONDS = 7 * 24 * 3600.0
#: Largest latency target in ms (SLO p99 TTFT/TPOT): 10^7 ms, about 2.8 hours.
MAX_LATENCY_MS = 1e7
#: Largest peak compute (TFLOPS) and bandwidth (GB/s) a hardware option may claim: 10^6 each.
MAX_PEAK = 1e6
#: Largest value of an integer environment setting (``HCCL_BUFFSIZE`` MB, ``OMP_NUM_THREADS``, HCCL time-outs):
#: 2^31 - 1, the C ``int`` the runtimes parse them into.
MAX_ENV_INT = 2**31 - 1
#: Most jobs one sweep may launch (the product of the swept values, or an Optuna sweep's ``n_trials``): 10,000
#: (Hydra's basic sweeper lists every job before the first runs; a plan job costs about 0.5 s).
MAX_SWEEP_JOBS = 10_000
#: Most layers a model architecture may declare: 4,096 (the deepest public LLMs have about 126; the compiler and the
#: performance model walk the layers one by one).
MAX_LAYERS = 4_096
#: Widest hidden size or head count a model architecture may declare: 2^20 (public LLMs: at most 16,384 / 128).
MAX_WIDTH = 2**20
#: Most routed experts a model architecture may declare: 65,536 (DeepSeek-V3/R1: 256).
MAX_EXPERTS = 65_536
