"""Token ids shared by both engines: the tokenizers must be the same, prompts get the chat template once."""

from __future__ import annotations

import json
from pathlib import Path

from ascendflow.schema import ConfigError


def load_tokenizer(model_dir: str):
    """The Hugging Face tokenizer of ``model_dir`` (transformers, fast tokenizer)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


def check_same_tokenizer(reference, candidate, reference_key: str, reference_value: str) -> None:
    """Refuse a reference whose vocabulary or chat template differs from the candidate's.

    Raises:
        ConfigError: one line naming the first difference.
    """
    ref_vocab, cand_vocab = reference.get_vocab(), candidate.get_vocab()
    if ref_vocab != cand_vocab:
        only = sorted(set(ref_vocab.items()) ^ set(cand_vocab.items()))[:1]
        raise ConfigError(reference_key, reference_value,
                          f"its tokenizer differs from the candidate's (vocabulary {len(ref_vocab)} vs "
                          f"{len(cand_vocab)} tokens, first difference {only}); the report compares token by token, "
                          f"use a reference with the candidate's tokenizer")
    if reference.chat_template != candidate.chat_template:
        raise ConfigError(reference_key, reference_value, "its chat template differs from the candidate's; use a "
                                                          "reference with the candidate's tokenizer")


def prompt_ids(tokenizer, prompts_file: Path, limit: int) -> list[list[int]]:
    """Token ids of the first ``limit`` prompts of ``prompts_file``, each as one user turn with the chat template.

    Raises:
        ConfigError: the file has fewer than ``limit`` prompts.
    """
    prompts = [json.loads(line)["prompt"] for line in prompts_file.read_text().splitlines() if line.strip()]
    if len(prompts) < limit:
        raise ConfigError("precision.num_prompts", str(limit), f"{prompts_file} has {len(prompts)} prompts; "
                                                               f"use precision.num_prompts<={len(prompts)}")
    return [list(tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                               tokenize=True, return_dict=False))
            for p in prompts[:limit]]


def text_ids(tokenizer, text_file: Path, max_tokens: int) -> list[list[int]]:
    """Token ids of the perplexity text, cut into pieces of at most ``max_tokens`` tokens (no special tokens)."""
    ids = tokenizer(text_file.read_text(), add_special_tokens=False)["input_ids"]
    return [ids[i:i + max_tokens] for i in range(0, len(ids), max_tokens)]
