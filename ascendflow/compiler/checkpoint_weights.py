"""Weights pass from a local checkpoint: per-rank bytes counted from the stored tensors instead of estimated.

Each stored tensor is sharded by the vLLM layer it loads into (same rules as :mod:`ascendflow.compiler.weights`):
column-parallel projections (``q_proj``, ``k_proj``/``v_proj``, ``q_b_proj``, ``kv_b_proj``, ``gate_proj``,
``up_proj``) split their first dimension by TP, K/V keeping one head per rank when ``num_key_value_heads < TP``;
row-parallel ``o_proj``/``down_proj`` split the weight's second dimension, their per-output-channel quantization
parameters being replicated; embeddings and LM head split padded vocabulary rows; routed experts go whole to their
expert-parallel rank, or are split like an MLP without EP; everything else (norms, router, ``q_a_proj``,
``kv_a_proj_with_mqa``, scalar ``input_scale``/``input_offset``) is replicated. msModelSlim's quantization
parameters (``weight_scale``, ``weight_offset``, ``quant_bias``, ``deq_scale``; ``shared/reference/vllm_ascend.md``
§5) follow their weight's output dimension.

Dtypes: floating-point tensors that are not quantization parameters (all of them in an unquantized checkpoint,
those marked ``FLOAT`` in ``quant_model_description.json``) are loaded in the model dtype (vLLM casts to
``--dtype``; reference §5: "Layers marked FLOAT stay in the model dtype"); integer weights and quantization
parameters count as stored. A stored ``lm_head`` of a model with tied embeddings is not loaded (vLLM ties it to the
embedding) unless the pipeline puts the head on another stage.
"""

from __future__ import annotations

import re

from ascendflow.compiler.dtypes import DTYPE_BYTES
from ascendflow.compiler.weights import Layout, padded_vocab
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.checkpoint import SAFETENSORS_DTYPE_BYTES, CheckpointInventory, TensorInfo

_LAYER = re.compile(r"\.layers\.(\d+)\.")
_EXPERT = re.compile(r"\.experts\.(\d+)\.")
COLUMN = ("q_proj", "q_b_proj", "kv_b_proj", "gate_proj", "up_proj", "k_proj", "v_proj")
ROW = ("o_proj", "down_proj")


def _module(name: str) -> tuple[str, str]:
    """(projection module, parameter) of ``...<module>.<param>``."""
    parts = name.split(".")
    return (parts[-2], parts[-1]) if len(parts) >= 2 else ("", parts[-1])


FLOAT_DTYPES = ("F32", "F16", "BF16", "F64")


def _element_bytes(name: str, t: TensorInfo, inventory: CheckpointInventory, dtype_bytes: int) -> int:
    if t.dtype not in FLOAT_DTYPES:
        return SAFETENSORS_DTYPE_BYTES[t.dtype]
    label = (inventory.quant_description or {}).get(name, "FLOAT")
    return dtype_bytes if label == "FLOAT" else SAFETENSORS_DTYPE_BYTES[t.dtype]


def _rank_bytes(name: str, t: TensorInfo, a: ModelArchitecture, layout: Layout, elem: int) -> int:
    shape = list(t.shape)
    numel = 1
    for d in shape:
        numel *= d
    module, param = _module(name)
    tp = layout.tp
    if module in ("embed_tokens", "lm_head") and param == "weight":
        return padded_vocab(shape[0]) // tp * shape[1] * elem
    expert = _EXPERT.search(name)
    if expert and layout.ep > 1:
        local = -(-a.routed_experts // layout.ep)
        return numel * elem if int(expert.group(1)) < local else 0
    if module in COLUMN and shape:
        rows = shape[0]
        if module in ("k_proj", "v_proj") and a.kv_heads < tp:
            rows = rows // a.kv_heads
        else:
            rows = rows // tp
        return rows * (numel // shape[0]) * elem
    if module in ROW and param == "weight" and len(shape) == 2:
        return shape[0] * (shape[1] // tp) * elem
    return numel * elem


def checkpoint_bytes(inventory: CheckpointInventory, a: ModelArchitecture, layout: Layout, dtype: str) -> int:
    """Weight bytes one rank loads from the checkpoint, ``dtype`` being the model dtype (``bfloat16``...).

    Tensors of layers outside the rank's PP stage are skipped; the embedding counts on the first stage, the LM head
    and final norm on the last; with tied embeddings and no stored ``lm_head`` the last stage of a multi-stage
    pipeline holds its own copy of the embedding. MTP layers (index >= ``num_hidden_layers``) are not loaded.
    """
    dtype_bytes = DTYPE_BYTES[dtype]
    total = 0
    has_lm_head = any(_module(n)[0] == "lm_head" for n in inventory.tensors)
    for name, t in inventory.tensors.items():
        size = _rank_bytes(name, t, a, layout, _element_bytes(name, t, inventory, dtype_bytes))
        layer = _LAYER.search(name)
        if layer:
            if int(layer.group(1)) not in layout.layers:
                continue
        elif "embed_tokens" in name:
            copies = int(layout.first_stage) + int(layout.last_stage and not layout.first_stage and not has_lm_head
                                                   and a.tie_word_embeddings)
            total += copies * size
            continue
        elif not layout.last_stage:
            continue  # lm_head, final norm
        elif _module(name)[0] == "lm_head" and a.tie_word_embeddings and layout.first_stage:
            continue  # tied: the head is the embedding
        total += size
    return total
