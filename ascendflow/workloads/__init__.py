"""Workload data shipped with ascendflow (``chat_prompts.jsonl``: prompt + its output-token length)."""

from pathlib import Path

CHAT_PROMPTS = Path(__file__).with_name("chat_prompts.jsonl")
