"""Workload option (``conf/workload/*.yaml``): what vLLM's benchmark client sends."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from ascendflow.schema.base import Spec
from ascendflow.schema.bounds import MAX_COUNT, MAX_SEED, MAX_TOKENS, MIN_REQUEST_RATE


class WorkloadSpec(Spec):
    """A benchmark workload for ``vllm bench serve`` (``vllm/benchmarks/serve.py``) or offline generation.

    Attributes:
        name: option name.
        dataset: ``chat``: ascendflow's shipped chat prompts (``ascendflow/workloads/chat_prompts.jsonl``) through
            vLLM's ``custom`` dataset, with the tokenizer's chat template; ``random``: vLLM's ``random`` dataset;
            ``prefix_repetition``: vLLM's dataset of prompts sharing a few long prefixes (RAG-like, exercises prefix
            caching).
        num_prompts: requests to send.
        max_concurrency: most requests in flight; ``None``: unbounded.
        request_rate: requests per second (Poisson arrivals); ``inf`` sends all at once.
        max_output_tokens: upper bound on each chat request's output tokens (each prompt has its own length).
        random_input_len / random_output_len: tokens per request for ``random``; for ``prefix_repetition`` the
            shared prefix is ``random_input_len`` and the output ``random_output_len`` tokens.
        prefix_suffix_len: unique suffix tokens per request (``prefix_repetition``).
        num_prefixes: distinct shared prefixes (``prefix_repetition``).
        temperature: sampling temperature sent with every request (0: greedy, reproducible outputs).
        ignore_eos: keep generating past EOS so output lengths are exact.
        seed: sampling seed of the dataset.
    """

    name: str
    dataset: Literal["chat", "random", "prefix_repetition"]
    num_prompts: int = Field(ge=1, le=MAX_COUNT)
    max_concurrency: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    request_rate: float = Field(default=math.inf, ge=MIN_REQUEST_RATE)
    max_output_tokens: int = Field(default=64, ge=1, le=MAX_TOKENS)
    random_input_len: int = Field(default=256, ge=1, le=MAX_TOKENS)
    random_output_len: int = Field(default=128, ge=1, le=MAX_TOKENS)
    prefix_suffix_len: int = Field(default=64, ge=1, le=MAX_TOKENS)
    num_prefixes: int = Field(default=4, ge=1, le=MAX_COUNT)
    temperature: float = Field(default=0.0, ge=0, le=100)
    ignore_eos: bool = False
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
