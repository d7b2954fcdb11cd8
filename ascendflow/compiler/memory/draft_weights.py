"""Weights of a separate EAGLE / EAGLE-3 draft model on one rank of the last PP stage, as vLLM 0.32.0 builds it.

* EAGLE-3 (``vllm/model_executor/models/llama_eagle3.py`` ``Eagle3LlamaForCausalLM``): ``num_hidden_layers``
  Llama decoder layers (usually 1) whose first ``qkv_proj`` reads ``2 × hidden`` (embeddings and hidden states
  concatenated) and which add a ``hidden_norm``; ``fc`` (``ReplicatedLinear``, ``num_aux_hidden_states`` (3) ×
  ``target_hidden_size`` → ``hidden``), the final ``norm``, its own ``lm_head`` over ``draft_vocab_size`` rows
  (``ParallelLMHead``, split by the draft's TP) and ``draft_id_to_target_id`` (int64, ``draft_vocab_size``) when the
  draft vocabulary differs from the target's (``t2d`` is not loaded).
* EAGLE (``llama_eagle.py`` ``EagleLlamaForCausalLM``): Llama layers (the first without ``input_layernorm``) and
  ``fc`` (``2 × hidden`` → ``hidden``, replicated); no LM head and no final norm of its own.
* Embeddings: the draft's ``embed_tokens`` is replaced by the target's at PP = 1 (``llm_base_proposer.py``
  ``_maybe_share_embeddings``; EAGLE drafts ship none or an identical copy), so it counts only at PP > 1.
* Draft layers use the draft's own quantization (none for these checkpoints): every tensor is in the model dtype.

A draft whose ``config.json`` is not on this machine (``eagle3`` only) is planned from the target's shape by
:func:`estimated_eagle3_draft`: an ESTIMATE whose assumptions the plan names (``plan.draft``, ``plan.estimates``).
"""

from __future__ import annotations

from typing import Iterator

from ascendflow.compiler.memory.weight_tensors import Tensor, padded_vocab
from ascendflow.schema.architecture import ModelArchitecture

#: ``num_aux_hidden_states`` default: three target layers feed EAGLE-3's ``fc`` (``llama_eagle3.py``).
EAGLE3_AUX_HIDDEN_STATES = 3


def estimated_eagle3_draft(target: ModelArchitecture) -> ModelArchitecture:
    """ESTIMATE of an EAGLE-3 draft from the target's shape, for a draft whose ``config.json`` is not here.

    Assumed (none confirmed for a given checkpoint; the draft's own ``config.json`` replaces all of it): one decoder
    layer (``num_hidden_layers`` 1, as vLLM's ``llama_eagle3.py`` drafts and the EAGLE-3 paper, arXiv 2503.01840
    §3, train them); the target's hidden size, attention heads, KV heads and head dim (``target_hidden_size`` =
    ``hidden_size``: ``llama_eagle3.py``'s default); the MLP width the target's ``intermediate_size`` field (as the
    vendored ``tests/data/configs/qwen3_32b_eagle3`` draft of Qwen3-32B keeps its target's 25600); the draft
    vocabulary the target's (``draft_vocab_size`` unset: no ``d2t`` map; a reduced vocabulary, e.g. 32000 in that
    draft, would make the LM head smaller).
    """
    return ModelArchitecture(
        architectures=("LlamaForCausalLMEagle3",), model_type="llama", hidden_size=target.hidden_size,
        intermediate_size=target.dense_intermediate_size or 4 * target.hidden_size, num_hidden_layers=1,
        num_attention_heads=target.num_attention_heads, num_key_value_heads=target.kv_heads,
        head_dim=target.attention_head_dim, vocab_size=target.vocab_size,
        max_position_embeddings=target.max_position_embeddings, tie_word_embeddings=False,
        torch_dtype=target.torch_dtype)


def estimate_label(d: ModelArchitecture) -> str:
    """What :func:`estimated_eagle3_draft` assumed, as the plan's warning and estimate label state it."""
    return (f"ESTIMATE: EAGLE-3 draft planned from the target's shape (its config.json is not on this machine): "
            f"1 decoder layer, hidden {d.hidden_size}, {d.num_attention_heads} heads / {d.kv_heads} KV heads x "
            f"{d.attention_head_dim}, MLP {d.dense_intermediate_size}, draft vocab = target vocab {d.vocab_size}; "
            f"unmeasured")


def _draft_layer(d: ModelArchitecture, tp: int, qkv_in: int, norms: int) -> Iterator[Tensor]:
    """One Llama decoder layer of the draft at TP ``tp`` (``QKVParallelLinear`` reading ``qkv_in`` features)."""
    h, hd = d.hidden_size, d.attention_head_dim
    kv = max(1, d.kv_heads // tp)
    yield Tensor("draft.norms", norms, h, "float")
    yield Tensor("draft.qkv_proj", (d.num_attention_heads // tp + 2 * kv) * hd, qkv_in, "float")
    yield Tensor("draft.o_proj", h, d.num_attention_heads // tp * hd, "float")
    inter = (d.dense_intermediate_size or 0) // tp
    yield Tensor("draft.gate_up_proj", 2 * inter, h, "float")
    yield Tensor("draft.down_proj", h, inter, "float")


def eagle_draft_tensors(method: str, target: ModelArchitecture, d: ModelArchitecture, *, tp: int,
                        pp: int) -> Iterator[Tensor]:
    """Every tensor of the ``eagle`` / ``eagle3`` draft ``d`` on one rank (draft TP ``tp``) of the last stage."""
    h = d.hidden_size
    if pp > 1:  # no sharing across stages (_maybe_share_embeddings: PP world size 1 only)
        yield Tensor("draft.embed_tokens", padded_vocab(d.vocab_size) // tp, h, "float")
    eagle3 = method == "eagle3"
    for i in range(d.num_hidden_layers):
        norms = 3 if eagle3 else (1 if i == 0 else 2)  # eagle3: + hidden_norm; eagle: layer 0 drops input_layernorm
        yield from _draft_layer(d, tp, 2 * h if eagle3 and i == 0 else h, norms)
    if not eagle3:
        yield Tensor("draft.fc", h, 2 * h, "float")
        return
    yield Tensor("draft.fc", h, EAGLE3_AUX_HIDDEN_STATES * (d.target_hidden_size or h), "float")
    yield Tensor("draft.norm", 1, h, "float")
    draft_vocab = d.draft_vocab_size or d.vocab_size
    yield Tensor("draft.lm_head", padded_vocab(draft_vocab) // tp, h, "float")
    if draft_vocab != target.vocab_size:
        yield Tensor("draft.draft_id_to_target_id (int64)", 2, draft_vocab, "fp32")  # 8 bytes per entry


def eagle_draft_bytes(method: str, target: ModelArchitecture, d: ModelArchitecture, *, tp: int, pp: int,
                      dtype_bytes: int) -> int:
    """Bytes of :func:`eagle_draft_tensors` (``float`` tensors at ``dtype_bytes``, ``fp32`` at 4)."""
    return sum(t.rows * t.cols * (4 if t.kind == "fp32" else dtype_bytes)
               for t in eagle_draft_tensors(method, target, d, tp=tp, pp=pp))
