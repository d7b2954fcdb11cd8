"""Model architecture values read from a model's ``config.json`` (Hugging Face format)."""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ascendflow.schema.errors import ConfigError, format_validation_error
from ascendflow.schema.bounds import MAX_ENV_INT, MAX_EXPERTS, MAX_LAYERS, MAX_TOKENS, MAX_WIDTH

_DTYPE_NAMES = {"bfloat16": "bfloat16", "float16": "float16", "half": "float16", "float32": "float32",
                "float": "float32"}



#: MTP layers of a model type whose checkpoint gives no count: vLLM 0.32.0 ``model_executor/models/qwen3_next_mtp.py``
#: ``Qwen3NextMultiTokenPredictor``: ``num_mtp_layers = getattr(config, "num_nextn_predict_layers", 1)`` (the public
#: Qwen3-Next-80B-A3B config.json carries no such key; vllm-ascend's Qwen3-Next tutorial runs ``qwen3_next_mtp``).
DEFAULT_MTP_LAYERS: dict[str, int] = {"qwen3_next": 1}

#: Model types whose config names the routed experts ``num_local_experts`` and gives their width as
#: ``intermediate_size``, every decoder layer a MoE layer with no dense MLP: MiniMax-M2 / M2.5 / M2.7 (vLLM 0.32.0
#: ``model_executor/models/minimax_m2.py``: ``MiniMaxM2MoE`` builds ``FusedMoE(num_experts=num_local_experts,
#: intermediate_size=intermediate_size)`` in each ``MiniMaxM2DecoderLayer``; transformers ``MiniMaxM2Config``
#: ``attribute_map = {"num_experts": "num_local_experts"}``).
LOCAL_EXPERT_MOE_TYPES = ("minimax_m2",)

class ModelArchitecture(BaseModel):
    """The architecture fields the compiler needs, with Hugging Face ``config.json`` names.

    MLA fields (``kv_lora_rank``...) are set for DeepSeek-V2/V3-style attention, MoE fields for mixture-of-experts
    models; both ``None`` otherwise. Unknown ``config.json`` keys are ignored.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    architectures: tuple[str, ...] = ()
    model_type: str = ""
    hidden_size: int = Field(ge=1, le=MAX_WIDTH)
    num_hidden_layers: int = Field(ge=1, le=MAX_LAYERS)
    num_attention_heads: int = Field(ge=1, le=MAX_WIDTH)
    num_key_value_heads: int | None = Field(default=None, ge=1)
    head_dim: int | None = Field(default=None, ge=1)
    #: Gemma-3n gives one width per layer (a list); the weights pass reads :attr:`dense_intermediate_size`.
    intermediate_size: int | tuple[int, ...] | None = None
    vocab_size: int = Field(ge=1, le=MAX_TOKENS)
    max_position_embeddings: int = Field(ge=1, le=MAX_ENV_INT)
    tie_word_embeddings: bool = False
    torch_dtype: str = "bfloat16"
    # MLA (DeepSeek-V2/V3)
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    # MoE
    n_routed_experts: int | None = Field(default=None, le=MAX_EXPERTS)
    num_experts: int | None = Field(default=None, le=MAX_EXPERTS)
    num_experts_per_tok: int | None = None
    moe_intermediate_size: int | None = None
    n_shared_experts: int | None = None
    first_k_dense_replace: int | None = None
    num_nextn_predict_layers: int | None = None
    #: MTP layers under the other names vLLM reads (``SpeculativeConfig.hf_config_override``, vLLM 0.32.0): Qwen3.5 /
    #: Qwen4-exp ``mtp_num_hidden_layers``, MiniMax-M3 ``num_mtp_modules``; :attr:`mtp_layer_count` takes the first set.
    mtp_num_hidden_layers: int | None = Field(default=None, ge=0, le=MAX_LAYERS)
    num_mtp_modules: int | None = Field(default=None, ge=0, le=MAX_LAYERS)
    #: EAGLE-3 drafts: the draft's own LM-head vocabulary and the target width its ``fc`` reads
    #: (vLLM ``llama_eagle3.py``: ``draft_vocab_size`` defaults to ``vocab_size``, ``target_hidden_size`` to
    #: ``hidden_size``).
    draft_vocab_size: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    target_hidden_size: int | None = Field(default=None, ge=1, le=MAX_WIDTH)
    topk_method: str | None = None
    #: MiniMax-M2: the router's float32 ``e_score_correction_bias`` (vLLM ``minimax_m2.py`` ``MiniMaxM2MoE``).
    use_routing_bias: bool | None = None
    attention_bias: bool = False
    # Per-layer KV layout (ascendflow/compiler/memory/kv_specs.py reads these; names as in the HF configs)
    sliding_window: int | None = None
    #: Qwen2/Qwen3: ``false`` switches ``sliding_window`` off (transformers ``Qwen2Config``).
    use_sliding_window: bool | None = None
    layer_types: tuple[str, ...] | None = None
    sliding_window_pattern: int | None = None
    full_attention_interval: int | None = None
    attention_chunk_size: int | None = None
    no_rope_layers: tuple[int, ...] | None = None
    num_kv_shared_layers: int = 0
    #: Gemma-4: full-attention layers use their own head size / KV heads (transformers ``Gemma4TextConfig``:
    #: ``global_head_dim`` defaults to 512; ``num_global_key_value_heads`` applies only with ``attention_k_eq_v``),
    #: saved by transformers >= 5 as ``per_layer_config`` (``{"5": {"head_dim": 512}}``, HeterogeneousConfigMixin).
    global_head_dim: int | None = None
    num_global_key_value_heads: int | None = None
    attention_k_eq_v: bool | None = None
    per_layer_config: dict[str, dict[str, Any]] | None = None
    #: MiMo-V2 (``MiMoV2FlashForCausalLM``): ``hybrid_layer_pattern[i] == 1`` marks a sliding layer with its own
    #: ``swa_*`` heads and head sizes and window ``sliding_window_size``; global layers use ``head_dim`` (K) and
    #: ``v_head_dim`` (V) (vLLM ``mimo_v2.py`` ``MiMoV2FlashDecoderLayer``).
    hybrid_layer_pattern: tuple[int, ...] | None = None
    sliding_window_size: int | None = None
    swa_num_attention_heads: int | None = None
    swa_num_key_value_heads: int | None = None
    swa_head_dim: int | None = None
    swa_v_head_dim: int | None = None
    # Gated-DeltaNet linear attention (Qwen3-Next, Qwen3.5)
    linear_num_key_heads: int | None = None
    linear_num_value_heads: int | None = None
    linear_key_head_dim: int | None = None
    linear_value_head_dim: int | None = None
    linear_conv_kernel_dim: int | None = None
    # Mamba2 mixers (Granite-4.0-H, Bamba, NemotronH): ``layers_block_type`` marks ``mamba`` / ``attention``
    layers_block_type: tuple[str, ...] | None = None
    mamba_n_heads: int | None = None
    mamba_d_head: int | None = None
    mamba_d_state: int | None = None
    mamba_n_groups: int | None = None
    mamba_d_conv: int | None = None
    mamba_expand: int | None = None
    mamba_conv_bias: bool | None = None  # None: True (transformers GraniteMoeHybridConfig default)
    mamba_proj_bias: bool | None = None
    # MoE and per-layer variants read only by the weights pass (:mod:`ascendflow.compiler.memory.weights_hybrid`):
    # Qwen3-Next (``shared_expert_intermediate_size``, ``decoder_sparse_step``, ``mlp_only_layers``,
    # ``attn_output_gate``), gpt-oss / Llama-4 / Granite (``num_local_experts``), Llama-4 (``intermediate_size_mlp``,
    # ``interleave_moe_layer_step``), Granite (``shared_intermediate_size``), Gemma-3n/4 per-layer inputs, AltUp,
    # Laurel and ``use_double_wide_mlp``. Unset (None) fields stay out of the plan's architecture dump and hash.
    num_local_experts: int | None = Field(default=None, le=MAX_EXPERTS)
    shared_expert_intermediate_size: int | None = None
    shared_intermediate_size: int | None = None
    decoder_sparse_step: int | None = None
    mlp_only_layers: tuple[int, ...] | None = None
    attn_output_gate: bool | None = None  # None: True (vLLM qwen3_next.py getattr default)
    intermediate_size_mlp: int | None = None
    interleave_moe_layer_step: int | None = None
    hidden_size_per_layer_input: int | None = None
    vocab_size_per_layer_input: int | None = None
    laurel_rank: int | None = None
    altup_num_inputs: int | None = None
    use_double_wide_mlp: bool | None = None
    #: RoPE scaling as the checkpoint (or ``model.hf_overrides``) gives it: ``rope_parameters`` (transformers >= 5)
    #: or ``rope_scaling`` (earlier name); read by :mod:`ascendflow.compiler.checks.model_len` for the maximum length.
    rope_parameters: dict[str, Any] | None = None
    rope_scaling: dict[str, Any] | None = None
    #: Raw ``vision_config`` of multimodal checkpoints (Qwen3-VL, Qwen2.5-VL, Gemma-3), kept for weight counting.
    vision_config: dict[str, Any] | None = None
    #: The checkpoint's top-level ``model_type`` when the language model was nested (``qwen3_vl``...), else "".
    outer_model_type: str = ""
    #: The image processor's largest image in pixels: ``size["longest_edge"]`` (else ``max_pixels``) of the checkpoint's
    #: ``preprocessor_config.json``, read by the model-resolution layer (:mod:`ascendflow.models.resolve`), not a
    #: ``config.json`` field; ``None``: not given (the planner uses the family default).
    processor_max_pixels: int | None = Field(default=None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _local_expert_moe(cls, data: Any) -> Any:
        """MiniMax-M2 (:data:`LOCAL_EXPERT_MOE_TYPES`): ``num_experts`` := ``num_local_experts``,
        ``moe_intermediate_size`` := ``intermediate_size``, ``first_k_dense_replace`` := 0, as vLLM builds the model,
        so the MoE paths that read the generic names (weights, activation and dispatch memory, EP checks, the NPU step
        model) see its 256 routed experts. Overwritten each time (also under ``model.hf_overrides``): the config's own
        fields decide."""
        if isinstance(data, Mapping) and data.get("model_type") in LOCAL_EXPERT_MOE_TYPES \
                and data.get("num_local_experts"):
            data = {**data, "num_experts": data["num_local_experts"],
                    "moe_intermediate_size": data.get("intermediate_size"), "first_k_dense_replace": 0}
        return data

    @classmethod
    def from_hf_config(cls, config: Mapping[str, Any]) -> "ModelArchitecture":
        """Build from a ``config.json`` dict; ``dtype`` (transformers >= 4.56) is read as ``torch_dtype``.

        Multimodal configs that nest the language model under ``text_config`` (Qwen3-VL, Qwen2.5-VL, Gemma-3) are
        flattened: the text model's fields win, ``architectures`` stays the outer one (what vLLM loads) and
        ``vision_config`` is kept as a raw dict. This is what vLLM's ``ModelConfig.hf_text_config`` reads
        (``vllm/transformers_utils/config.py`` ``get_hf_text_config``, vLLM 0.32.0). A flat multimodal config (the
        text fields at the top, e.g. Qwen2.5-VL's published ``config.json``) keeps its ``vision_config`` and its
        ``model_type`` as ``outer_model_type``: the checkpoint is the same model in either layout.
        """
        data = dict(config)
        if not isinstance(data.get("text_config"), Mapping) and isinstance(data.get("vision_config"), Mapping):
            data.setdefault("outer_model_type", data.get("model_type", ""))
        text = data.get("text_config")
        if isinstance(text, Mapping):
            outer = {k: v for k, v in data.items() if k not in ("text_config",)}
            data = {**outer, **dict(text)}
            data["architectures"] = outer.get("architectures", data.get("architectures", ()))
            data["outer_model_type"] = outer.get("model_type", "")
            if "tie_word_embeddings" in outer:
                data["tie_word_embeddings"] = outer["tie_word_embeddings"]
            data.setdefault("torch_dtype", outer.get("torch_dtype") or outer.get("dtype"))
        dtype = data.get("torch_dtype") or data.get("dtype") or "bfloat16"
        data["torch_dtype"] = _DTYPE_NAMES.get(str(dtype).replace("torch.", ""), str(dtype))
        return cls.model_validate(data)

    def with_hf_overrides(self, overrides: Mapping[str, Any] | None) -> "ModelArchitecture":
        """The architecture with ``model.hf_overrides`` laid over it as vLLM lays ``--hf-overrides`` over the
        checkpoint's config (vLLM 0.32.0 ``vllm/config/model.py`` ``ModelConfig.__post_init__``: non-dict values
        go to ``get_config(hf_overrides_kw=...)``, i.e. ``config.update``; dict values through
        ``_apply_dict_overrides``: merged into a nested sub-config (``text_config``, ``vision_config``), set as the
        attribute otherwise, so ``rope_parameters`` / ``rope_scaling`` replace the checkpoint's whole dict).

        A model whose language model is nested (``outer_model_type`` set from a ``text_config``) takes its text
        values under ``text_config``: a top-level key there lands on the outer config, which the language model
        does not read (``get_hf_text_config``).

        Raises:
            ConfigError: a top-level text key on a nested multimodal config, or an override the architecture
                refuses (``model.hf_overrides.<key>``: the value and the rule).
        """
        if not overrides:
            return self
        data = self.model_dump()
        nested = bool(self.outer_model_type) and self.outer_model_type != self.model_type
        for key, value in overrides.items():
            if key == "text_config" and isinstance(value, Mapping):
                data.update(value)
            elif key == "vision_config" and isinstance(value, Mapping):
                data["vision_config"] = {**(self.vision_config or {}), **value}
            elif nested and key in type(self).model_fields:
                raise ConfigError(f"model.hf_overrides.{key}", value,
                                  f"lands on the outer {self.outer_model_type} config, which the language model does "
                                  f"not read (vLLM get_hf_text_config); write it as model.hf_overrides.text_config."
                                  f"{key}")
            else:
                data[key] = value
        try:
            return type(self).model_validate(data)
        except ValidationError as exc:
            raise format_validation_error(exc, "model.hf_overrides") from None

    @property
    def mtp_layer_count(self) -> int:
        """The checkpoint's MTP draft layers: ``num_nextn_predict_layers`` (DeepSeek, GLM-4-MoE, Qwen3-Next...), else
        ``mtp_num_hidden_layers`` (Qwen3.5), else ``num_mtp_modules`` (MiniMax-M3), else 0 — the keys vLLM 0.32.0
        ``SpeculativeConfig.hf_config_override`` reads as ``n_predict``; else the draft model's own default where vLLM
        has one (:data:`DEFAULT_MTP_LAYERS`: the public Qwen3-Next config.json has none of the keys)."""
        for n in (self.num_nextn_predict_layers, self.mtp_num_hidden_layers, self.num_mtp_modules):
            if n:
                return n
        return DEFAULT_MTP_LAYERS.get(self.model_type, 0)

    @property
    def dense_intermediate_size(self) -> int | None:
        """Widest dense MLP (Gemma-3n lists one width per layer; the others give one int)."""
        if isinstance(self.intermediate_size, tuple):
            return max(self.intermediate_size) if self.intermediate_size else None
        return self.intermediate_size

    def layer_intermediate_size(self, layer: int) -> int:
        """MLP width of layer ``layer`` (0-based); 0 when the config gives none."""
        if isinstance(self.intermediate_size, tuple):
            return self.intermediate_size[layer]
        return self.intermediate_size or 0

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
        """Q/K/V projections carry a bias (Qwen2/Qwen2.5 and the Qwen2-VL / Qwen2.5-VL language models, which vLLM
        builds as ``Qwen2Model``: always; others: ``attention_bias``)."""
        return self.model_type in ("qwen2", "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text") \
            or self.attention_bias

    @property
    def has_qk_norm(self) -> bool:
        """Per-head RMSNorm on Q and K (Qwen3, Qwen3-MoE, Gemma-3); MiniMax-M2's full-width Q/K norm is counted by
        its own layer (:mod:`ascendflow.compiler.memory.weights_hybrid`)."""
        return self.model_type in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text", "qwen3_vl_text",
                                   "qwen3_vl_moe_text")

    def is_moe_layer(self, layer: int) -> bool:
        """Layer ``layer`` (0-based) has routed experts: MoE models after ``first_k_dense_replace`` dense layers."""
        return self.routed_experts > 0 and layer >= (self.first_k_dense_replace or 0)

    @property
    def routed_experts(self) -> int:
        """Routed experts (``n_routed_experts`` on DeepSeek, ``num_experts`` on Qwen-MoE); 0 for dense models."""
        return self.n_routed_experts or self.num_experts or 0
