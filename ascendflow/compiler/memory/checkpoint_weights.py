"""Weights pass from a local checkpoint: per-rank bytes counted from the stored tensors instead of estimated.

Each stored tensor is sharded by the vLLM layer it loads into (same rules as :mod:`ascendflow.compiler.memory.weights`):
column-parallel projections (``q_proj``, ``k_proj``/``v_proj``, ``q_b_proj``, ``kv_b_proj``, ``gate_proj``,
``up_proj``) split their first dimension by TP, K/V keeping one head per rank when ``num_key_value_heads < TP``;
row-parallel ``o_proj``/``down_proj`` split the weight's second dimension, their per-output-channel quantization
parameters being replicated; embeddings, LM head and the MTP ``shared_head.head`` split padded vocabulary rows;
routed experts go whole to their expert-parallel rank, or are split like an MLP over TP × DP without EP
(``FusedMoEParallelConfig.make``); everything else (norms, router, ``q_a_proj``, ``kv_a_proj_with_mqa``,
``eh_proj``) is replicated.

Dtypes: floating-point tensors that are not quantization parameters (all of them in an unquantized checkpoint,
those marked ``FLOAT`` in ``quant_model_description.json``, or missing from it) are loaded in the model dtype (vLLM
casts to ``--dtype``); integer weights count as stored. Quantization parameters take the dtypes vllm-ascend's quant
methods allocate (:mod:`ascendflow.compiler.memory.quant_bytes`): ``weight_scale``/``weight_offset`` in the model dtype
(stored float32 by msModelSlim), ``deq_scale`` 4 B (bf16) or 8 B (fp16), ``quant_bias`` int32; W8A8_DYNAMIC adds a
float32 ``weight_scale_fp32`` per output row (MoE: ``w13`` only); W8A8 static allocates ``weight_scale`` and
``weight_offset`` even when the export has none (msModelSlim 26.1.0 stores only ``deq_scale``, ``quant_bias``,
``input_scale`` and ``input_offset``: measured here); each W8A8-static vLLM module (a merged
``qkv_proj``/``gate_up_proj``/``fused_qkv_a_proj`` counts once) holds one ``input_scale`` (model dtype), one int8
``input_offset`` and three model-dtype copies of them repeated over its input partition (``aclnn_input_*``).
A stored ``lm_head`` of a model with tied embeddings is not loaded (vLLM ties it to the embedding) unless the
pipeline puts the head on another stage. Post-load MLA copies and MLAPO come from
:func:`ascendflow.compiler.memory.weights.mla_post_load_bytes`.
"""

from __future__ import annotations

import re

from ascendflow.compiler.memory.dtypes import DTYPE_BYTES
from ascendflow.compiler.memory.quant_bytes import DEQ_SCALE_BYTES
from ascendflow.compiler.memory.weights import EngineWeightRules, Layout, mla_post_load_bytes, padded_vocab
from ascendflow.compiler.memory.weights_hybrid import mamba2_dims
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.checkpoint import SAFETENSORS_DTYPE_BYTES, CheckpointInventory, TensorInfo

_LAYER = re.compile(r"\.layers\.(\d+)\.")
_EXPERT = re.compile(r"\.experts\.(\d+)\.")
COLUMN = ("q_proj", "q_b_proj", "kv_b_proj", "gate_proj", "up_proj", "k_proj", "v_proj",
          # weights_hybrid.py families (vLLM 0.32.0): GDN in_proj_qkvz / in_proj_ba / conv1d, Granite shared_mlp
          # input_linear, Gemma-3n laurel.linear_left and per_layer_model_projection
          "in_proj_qkvz", "in_proj_ba", "conv1d", "input_linear", "linear_left", "per_layer_model_projection")
ROW = ("o_proj", "down_proj", "out_proj", "output_linear", "linear_right")
VOCAB = ("embed_tokens", "lm_head", "head", "embed_tokens_per_layer")
#: Column-parallel module lists named ``<list>.<i>.weight`` (Gemma-3n ``ColumnParallelLinear`` AltUp projections).
COLUMN_LISTS = ("altup_projections", "altup_unembed_projections")
#: Per-head parameters split by TP along their only dimension (GDN / Mamba2 ``A_log``, ``dt_bias``, ``D``; gpt-oss
#: ``sinks``).
HEAD_PARAMS = ("A_log", "dt_bias", "D", "sinks")
#: Parameters vLLM 0.32.0 allocates in float32 whatever the checkpoint dtype: GDN ``A_log``
#: (``qwen_gdn_linear_attn.py``), Mamba2 ``A`` (stored ``A_log``, ``mamba_mixer2.py``), Gemma-3n
#: ``altup.correct_output_scale`` (``gemma3n.py``).
FP32_PARAMS = ("linear_attn.A_log", "mamba.A_log", "altup.correct_output_scale")
#: HF fused-expert tensors ``experts.<param>`` (gpt-oss, Llama-4: ``[experts, ...]``): split over TP × DP like
#: ``w13``/``w2``, except ``down_proj_bias`` (vLLM ``w2_bias`` is ``[experts, hidden]`` on every rank).
FUSED_EXPERTS = ("gate_up_proj", "gate_up_proj_bias", "down_proj")
#: vLLM packed modules: checkpoint projection -> the module it loads into (one input_scale per module).
MERGED = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj", "gate_proj": "gate_up_proj",
          "up_proj": "gate_up_proj", "q_a_proj": "fused_qkv_a_proj", "kv_a_proj_with_mqa": "fused_qkv_a_proj"}
FLOAT_DTYPES = ("F32", "F16", "BF16", "F64")


def _module(name: str) -> tuple[str, str]:
    """(projection module, parameter) of ``...<module>.<param>``."""
    parts = name.split(".")
    return (parts[-2], parts[-1]) if len(parts) >= 2 else ("", parts[-1])


def _label(name: str, inventory: CheckpointInventory) -> str:
    """The description label of ``name``'s module weight (``FLOAT`` when undescribed)."""
    description = inventory.quant_description or {}
    return description.get(name.rsplit(".", 1)[0] + ".weight", description.get(name, "FLOAT"))


def _element_bytes(name: str, t: TensorInfo, inventory: CheckpointInventory, dtype: str) -> int:
    dtype_bytes = DTYPE_BYTES[dtype]
    param = _module(name)[1]
    if param in ("weight_scale", "weight_offset"):  # get_perchannel_param: params_dtype
        return dtype_bytes
    if param == "deq_scale":  # get_perchannel_param: float32 (bf16 model) or int64 (fp16 model)
        return DEQ_SCALE_BYTES.get(dtype, SAFETENSORS_DTYPE_BYTES[t.dtype])
    if param == "quant_bias":
        return 4
    if param in ("input_scale", "input_offset"):  # one per vLLM module: counted by _post_load_param_bytes
        return 0
    if name.endswith(FP32_PARAMS):
        return 4
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
    if module in VOCAB and param == "weight":
        return padded_vocab(shape[0]) // tp * shape[1] * elem
    hybrid = _hybrid_rank_numel(name, shape, numel, a, layout)
    if hybrid is not None:
        return hybrid * elem
    expert = _EXPERT.search(name)
    if expert and layout.ep > 1:
        local = -(-a.routed_experts // layout.ep)
        return numel * elem if int(expert.group(1)) < local else 0
    if expert:  # FusedMoEParallelConfig.make: TP flattened across DP
        tp *= layout.dp
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


def _hybrid_rank_numel(name: str, shape: list[int], numel: int, a: ModelArchitecture, layout: Layout) -> int | None:
    """Elements on one rank of the tensors whose sharding is not given by the module name alone
    (:mod:`ascendflow.compiler.memory.weights_hybrid`), else ``None``."""
    parts = name.split(".")
    module, param = _module(name)
    tp = layout.tp
    if module == "experts" and param in FUSED_EXPERTS:
        if layout.ep > 1:
            return numel // shape[0] * -(-shape[0] // layout.ep)
        return numel // (tp * layout.dp)
    if len(parts) >= 3 and parts[-3] in COLUMN_LISTS:
        return numel // tp
    if param in HEAD_PARAMS and len(shape) == 1:
        return numel // tp
    if "mamba" in parts:  # MambaMixer2: groups padded to TP (weights_hybrid.mamba2_dims); its norm split by TP
        inter, conv_dim = mamba2_dims(a, tp)
        if module == "in_proj":
            return (inter + conv_dim + (a.mamba_n_heads or 0)) // tp * (numel // shape[0])
        if module == "conv1d":
            return conv_dim // tp * (numel // shape[0])
        if module == "norm":
            return numel // tp
    return None


def _post_load_param_bytes(name: str, t: TensorInfo, inventory: CheckpointInventory, a: ModelArchitecture,
                           layout: Layout, dtype: str, static_modules: set[str]) -> int:
    """Bytes the quant methods add after loading for ``name``: ``weight_scale_fp32`` (W8A8_DYNAMIC, not MoE w2) and,
    once per W8A8-static vLLM module, ``input_scale``/``input_offset`` and the ``aclnn_input_*`` copies."""
    module, param = _module(name)
    label = _label(name, inventory)
    if param == "weight_scale" and label == "W8A8_DYNAMIC" and not (_EXPERT.search(name) and module == "down_proj"):
        return _rank_bytes(name, t, a, layout, 4)
    if param == "weight" and label == "W8A8" and len(t.shape) == 2:
        dtype_bytes = DTYPE_BYTES[dtype]
        extra = 0
        scale = name[: -len("weight")] + "weight_scale"
        if scale not in inventory.tensors:
            # msModelSlim's static export stores no weight_scale/weight_offset (measured here, 26.1.0), but
            # get_perchannel_param allocates both ([out, 1], params_dtype) anyway.
            extra = _rank_bytes(scale, TensorInfo(dtype=t.dtype, shape=(t.shape[0], 1)), a, layout, 2 * dtype_bytes)
        key = name.rsplit(".", 2)[0] + "." + MERGED.get(module, module)
        if key in static_modules:
            return extra
        static_modules.add(key)
        cols = t.shape[1] // (layout.tp if module in ROW else 1)
        return extra + dtype_bytes + 1 + 3 * cols * dtype_bytes
    return 0


def _is_mtp_shared(name: str, layout: Layout, rules: EngineWeightRules) -> bool:
    """The MTP drafter drops this tensor for the target's (embedding at PP = 1, ``shared_head.head``)."""
    if not rules.mtp_shares_vocab:
        return False
    module = _module(name)[0]
    return module == "head" or (module == "embed_tokens" and layout.pp == 1)


def checkpoint_bytes(inventory: CheckpointInventory, a: ModelArchitecture, layout: Layout, dtype: str,
                     rules: EngineWeightRules = EngineWeightRules()) -> int:
    """Weight bytes one rank holds after loading the checkpoint, ``dtype`` being the model dtype (``bfloat16``...).

    Tensors of layers outside the rank's PP stage are skipped; the embedding counts on the first stage, the LM head
    and final norm on the last; with tied embeddings and no stored ``lm_head`` the last stage of a multi-stage
    pipeline holds its own copy of the embedding. MTP layers (index >= ``num_hidden_layers``) are loaded on the last
    stage only when ``rules.mtp_layers`` says so.

    Raises:
        ConfigError: W8A8 static layers with a float32 model dtype (from the MLAPO count).
    """
    total = 0
    has_lm_head = any(_module(n)[0] == "lm_head" for n in inventory.tensors)
    static_modules: set[str] = set()
    mtp = range(a.num_hidden_layers, a.num_hidden_layers + (rules.mtp_layers if layout.last_stage else 0))
    for name, t in inventory.tensors.items():
        size = _rank_bytes(name, t, a, layout, _element_bytes(name, t, inventory, dtype))
        size += _post_load_param_bytes(name, t, inventory, a, layout, dtype, static_modules)
        layer = _LAYER.search(name)
        if layer:
            index = int(layer.group(1))
            if index in mtp:
                if _is_mtp_shared(name, layout, rules):
                    continue
            elif index not in layout.layers:
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
    mla_scheme = _label(f"model.layers.{layout.layers.start}.self_attn.q_a_proj.weight", inventory)
    return total + mla_post_load_bytes(a, layout, dtype, None if mla_scheme == "FLOAT" else mla_scheme, rules)
