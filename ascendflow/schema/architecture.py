"""Model architecture values read from a model's ``config.json`` (Hugging Face format)."""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field

_DTYPE_NAMES = {"bfloat16": "bfloat16", "float16": "float16", "half": "float16", "float32": "float32",
                "float": "float32"}


class ModelArchitecture(BaseModel):
    """The architecture fields the compiler needs, with Hugging Face ``config.json`` names.

    MLA fields (``kv_lora_rank``...) are set for DeepSeek-V2/V3-style attention, MoE fields for mixture-of-experts
    models; both ``None`` otherwise. Unknown ``config.json`` keys are ignored.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    architectures: tuple[str, ...] = ()
    model_type: str = ""
    hidden_size: int = Field(ge=1)
    num_hidden_layers: int = Field(ge=1)
    num_attention_heads: int = Field(ge=1)
    num_key_value_heads: int | None = Field(default=None, ge=1)
    head_dim: int | None = Field(default=None, ge=1)
    intermediate_size: int | None = None
    vocab_size: int = Field(ge=1)
    max_position_embeddings: int = Field(ge=1)
    tie_word_embeddings: bool = False
    torch_dtype: str = "bfloat16"
    # MLA (DeepSeek-V2/V3)
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    # MoE
    n_routed_experts: int | None = None
    num_experts: int | None = None
    num_experts_per_tok: int | None = None
    moe_intermediate_size: int | None = None
    n_shared_experts: int | None = None
    first_k_dense_replace: int | None = None
    num_nextn_predict_layers: int | None = None
    topk_method: str | None = None
    attention_bias: bool = False

    @classmethod
    def from_hf_config(cls, config: Mapping[str, Any]) -> "ModelArchitecture":
        """Build from a ``config.json`` dict; ``dtype`` (transformers >= 4.56) is read as ``torch_dtype``."""
        data = dict(config)
        dtype = data.get("torch_dtype") or data.get("dtype") or "bfloat16"
        data["torch_dtype"] = _DTYPE_NAMES.get(str(dtype).replace("torch.", ""), str(dtype))
        return cls.model_validate(data)

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (KV cached as one latent of ``kv_lora_rank + qk_rope_head_dim``)."""
        return self.kv_lora_rank is not None

    @property
    def kv_heads(self) -> int:
        """KV heads of the whole model (``num_key_value_heads``, defaulting to ``num_attention_heads``)."""
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def attention_head_dim(self) -> int:
        """``head_dim``, defaulting to ``hidden_size / num_attention_heads`` as transformers does."""
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def has_qkv_bias(self) -> bool:
        """Q/K/V projections carry a bias (Qwen2/Qwen2.5: always; others: ``attention_bias``)."""
        return self.model_type == "qwen2" or self.attention_bias

    @property
    def has_qk_norm(self) -> bool:
        """Per-head RMSNorm on Q and K (Qwen3, Qwen3-MoE)."""
        return self.model_type in ("qwen3", "qwen3_moe")

    def is_moe_layer(self, layer: int) -> bool:
        """Layer ``layer`` (0-based) has routed experts: MoE models after ``first_k_dense_replace`` dense layers."""
        return self.routed_experts > 0 and layer >= (self.first_k_dense_replace or 0)

    @property
    def routed_experts(self) -> int:
        """Routed experts (``n_routed_experts`` on DeepSeek, ``num_experts`` on Qwen-MoE); 0 for dense models."""
        return self.n_routed_experts or self.num_experts or 0
