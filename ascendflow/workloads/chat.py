"""Workload materialisation: the dataset file and the request list a run sends."""

from __future__ import annotations

import json
import random
from pathlib import Path

from ascendflow.schema.workload import WorkloadSpec
from ascendflow.workloads import CHAT_PROMPTS


def chat_requests(workload: WorkloadSpec) -> list[dict]:
    """The chat workload's requests: ``num_prompts`` prompts drawn with ``seed`` (cycling through the shipped list
    when more are asked for), each ``{"prompt", "output_tokens"}`` with ``output_tokens <= max_output_tokens``."""
    items = [json.loads(line) for line in CHAT_PROMPTS.read_text().splitlines() if line.strip()]
    rng = random.Random(workload.seed)
    order: list[dict] = []
    while len(order) < workload.num_prompts:
        batch = items[:]
        rng.shuffle(batch)
        order += batch
    return [{"prompt": it["prompt"], "output_tokens": min(int(it["output_tokens"]), workload.max_output_tokens)}
            for it in order[: workload.num_prompts]]


def write_chat_dataset(workload: WorkloadSpec, path: Path) -> Path:
    """Write the chat requests as JSONL for vLLM's ``custom`` dataset (``vllm/benchmarks/datasets/datasets.py``
    ``CustomDataset``: ``prompt`` column, per-request ``output_tokens``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in chat_requests(workload)))
    return path
