"""The tensor and rank-layout records of the weights pass, shared by :mod:`ascendflow.compiler.memory.weights` (which
re-exports them) and the per-family tensor lists of :mod:`ascendflow.compiler.memory.weights_hybrid`."""

from __future__ import annotations

from dataclasses import dataclass

#: ``DEFAULT_VOCAB_PADDING_SIZE`` (``vllm/model_executor/layers/vocab_parallel_embedding.py``, vLLM 0.32.0).
VOCAB_PADDING = 64


@dataclass(frozen=True)
class Tensor:
    """One weight tensor on a rank: ``rows × cols`` elements; ``kind`` decides its dtype under quantization.

    ``kind``: ``float`` (embedding, LM head, norms, router, biases, ``kv_b_proj``: always the model dtype), ``fp32``
    (kept in float32 by vLLM, e.g. DeepSeek-V3's ``e_score_correction_bias``), ``linear`` (attention projections),
    ``mlp`` (dense MLP and shared-expert projections), ``expert`` (MoE ``w13``) or ``expert_w2`` (MoE ``w2``).
    """

    name: str
    rows: int
    cols: int
    kind: str


@dataclass(frozen=True)
class Layout:
    """Parallel layout of one rank: TP, EP and DP degrees, PP stage and its layer range.

    ``ep`` is the expert-parallel group size (TP × DP with ``enable_expert_parallel``, else 1); ``dp`` the
    data-parallel size, over which (× TP) MoE experts are split when ``ep`` is 1.
    """

    tp: int
    ep: int
    first_stage: bool
    last_stage: bool
    layers: range
    pp: int = 1
    dp: int = 1


def padded_vocab(vocab_size: int) -> int:
    """Vocabulary rounded up to a multiple of 64 (vLLM ``pad_vocab_size``)."""
    return -(-vocab_size // VOCAB_PADDING) * VOCAB_PADDING
