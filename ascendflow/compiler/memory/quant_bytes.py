"""Resident bytes of one msModelSlim-quantized projection on vllm-ascend, as its quant method allocates them.

Read from vllm-ascend at v0.11.0, v0.13.0, v0.18.0, v0.23.0 and v0.25.1rc1 (the allocations are the same at every
tag; files ``vllm_ascend/quantization/w8a8.py`` / ``w8a8_dynamic.py`` up to v0.13.0, then
``vllm_ascend/quantization/methods/w8a8_static.py`` / ``w8a8_dynamic.py``). ``params_dtype`` is the model dtype
(``--dtype``); the checkpoint's float32 scales are cast into it by the weight loader.

``W8A8`` (static, ``AscendW8A8LinearMethod``):

* ``get_weight``: ``weight`` int8 ``[out, in]``.
* ``get_perchannel_param``: ``quant_bias`` int32 ``[out]``; ``deq_scale`` ``[out]`` float32 when ``params_dtype`` is
  bfloat16, int64 when it is float16 (no ``deq_scale`` at all for float32: the layer cannot run); ``weight_scale``
  and ``weight_offset`` ``[out, 1]`` in ``params_dtype``. Per output row: 4 + 4 + 2 + 2 = 12 B (bf16), 4 + 8 + 2 + 2
  = 16 B (fp16).
* ``get_pertensor_param``: ``input_scale`` ``[1]`` in ``params_dtype``, ``input_offset`` ``[1]`` int8.
* ``process_weights_after_loading``: ``aclnn_input_scale``, ``aclnn_input_scale_reciprocal`` and
  ``aclnn_input_offset`` are ``input_scale``/``input_offset`` repeated ``weight.shape[1]`` (= input size of the
  partition) times, all three in ``params_dtype``: 3 × in × dtype bytes per layer.

``W8A8_DYNAMIC`` (``AscendW8A8DynamicLinearMethod`` / ``AscendW8A8DynamicFusedMoEMethod``):

* linear: ``weight`` int8; ``weight_scale``, ``weight_offset`` ``[out, 1]`` in ``params_dtype``; after loading
  ``weight_scale_fp32`` (float32 copy of the scale): 2·dtype + 4 B per output row.
* MoE: ``w13_weight`` / ``w2_weight`` int8; ``w13_weight_scale``/``_offset`` and ``w2_weight_scale``/``_offset`` per
  output row in ``params_dtype``; after loading only ``w13_weight_scale_fp32`` is added (float32). w13: 2·dtype + 4 B
  per row, w2: 2·dtype B per row. (``enable_fused_mc2`` adds int64 copies of both scales and dynamic EPLB clones the
  weights: neither is modelled.)

``W4A16`` (``AscendW4A16FusedMoEMethod``, MoE only, vllm-ascend ``quantization/methods/w4a16.py`` at v0.20.2rc1 and
v0.25.1rc1; LLM-Compressor checkpoints such as ``moonshotai/Kimi-K2-Thinking``): ``get_weight`` packs eight 4-bit
weights per int32 (0.5 B per element); ``get_dynamic_quant_param`` adds ``weight_scale`` and an all-zero
``weight_offset``, each ``params_dtype`` per group of ``group_size`` (32) input elements: 2·dtype/32 B per element
(0.125 B in bf16), so 0.625 B per element and nothing per row (the int32 ``weight_shape`` pair per expert is
ignored). Activations stay in ``params_dtype`` (A16: the fp16/bf16 cube).

``W4A8_DYNAMIC`` MoE experts (``AscendW4A8DynamicFusedMoEMethod``, vllm-ascend ``quantization/methods/w4a8.py`` at
v0.23.0; msModelSlim checkpoints, per-channel: msModelSlim's W4A8 recipes quantize ``*mlp.experts*`` with
``scope: per_channel``, ``dtype: int4``, ``msmodelslim/lab_practice/qwen3_moe/qwen3-235B-w4a8-v1.yaml``, so
``group_size`` 0 and no ``*_second`` tensors): ``w13_weight`` / ``w2_weight`` int8 holding two int4 each (``version``
1.0.0: ``[E, I, H]`` and ``[E, H/2, I]``; older exports int8 per value, packed by ``npu_quantize`` to ``quint4x2``
after loading), 0.5 B per element once ``pack_to_int32`` has run; per output row ``w13/w2_weight_scale`` become int64
(``process_scale``: 8 B), ``w13/w2_weight_offset`` stay float32 (4 B) and ``w13/w2_scale_bias`` float32 (4 B, summed
to one per row by ``update_bias``): 16 B per row. (A per-group export would add 8 B per row per further group of
``group_size`` inputs; not planned.)

``W8A16`` and ``W4A8_DYNAMIC`` linear layers keep the earlier figures (scale + offset as 4 B each per row; int4
packed two per byte): *estimates*, not read from the quant methods.
"""

from __future__ import annotations

from ascendflow.schema.errors import ConfigError

#: Float32 bytes per output row of a W8A8 static ``deq_scale`` by model dtype (int64 for float16).
DEQ_SCALE_BYTES = {"bfloat16": 4, "float16": 8}

#: Estimated (bytes per weight element, bytes per output row) of the schemes not read from source.
ESTIMATED_SCHEMES: dict[str, tuple[float, int]] = {
    "W8A16": (1.0, 4 + 4),
    "W4A8_DYNAMIC": (0.5, 4 + 4),
}
#: W4A16 (read from ``w4a16.py``, see the module docstring): int4 packed in int32, scale + offset per group.
W4A16_GROUP_SIZE = 32
#: W4A8_DYNAMIC MoE experts (read from ``w4a8.py``, see the module docstring): bytes per output row (int64 scale,
#: float32 offset, float32 scale_bias).
W4A8_MOE_ROW_BYTES = 8 + 4 + 4


def deq_scale_bytes(dtype: str) -> int:
    """Bytes per output row of a W8A8-static ``deq_scale`` for model dtype ``dtype`` (4 for bf16, 8 for fp16).

    Raises:
        ConfigError: any other model dtype (vllm-ascend allocates no ``deq_scale`` and the layer cannot run).
    """
    if dtype not in DEQ_SCALE_BYTES:
        raise ConfigError("engine.dtype", dtype, "W8A8 static layers allocate deq_scale only for bfloat16 or "
                          "float16 (vllm_ascend w8a8 get_perchannel_param); use dtype=bfloat16")
    return DEQ_SCALE_BYTES[dtype]


def quant_bytes(rows: int, cols: int, scheme: str, dtype: str, dtype_bytes: int, *, moe_w2: bool = False,
                moe: bool = False) -> int:
    """Resident bytes of one quantized projection of ``rows`` output × ``cols`` input elements on one rank.

    Args:
        rows: output rows on the rank (for MoE: local experts × rows per expert).
        cols: input columns on the rank (the input partition of a row-parallel layer).
        scheme: msModelSlim scheme (``W8A8``, ``W8A8_DYNAMIC``, ``W8A16``, ``W4A8_DYNAMIC``) or ``W4A16``
            (LLM-Compressor int4 experts).
        dtype: model dtype name (``bfloat16``...), the quant methods' ``params_dtype``.
        dtype_bytes: bytes per element of ``dtype``.
        moe_w2: the tensor is a MoE ``w2`` (down) projection: no float32 scale copy.
        moe: the tensor is a MoE expert projection (``w13`` or ``w2``): ``W4A8_DYNAMIC`` takes its MoE method's bytes.

    Returns:
        Bytes.

    Raises:
        ConfigError: W8A8 static with a model dtype that has no ``deq_scale`` (float32).
    """
    if scheme == "W8A8":
        per_row = 4 + deq_scale_bytes(dtype) + 2 * dtype_bytes
        per_layer = dtype_bytes + 1 + 3 * cols * dtype_bytes  # input_scale, input_offset, aclnn_input_* copies
        return rows * cols + rows * per_row + per_layer
    if scheme == "W8A8_DYNAMIC":
        per_row = 2 * dtype_bytes + (0 if moe_w2 else 4)
        return rows * cols + rows * per_row
    if scheme == "W4A16":
        return rows * cols // 2 + 2 * dtype_bytes * rows * (cols // W4A16_GROUP_SIZE)
    if scheme == "W4A8_DYNAMIC" and (moe or moe_w2):
        return rows * cols // 2 + rows * W4A8_MOE_ROW_BYTES
    per_elem, per_row = ESTIMATED_SCHEMES[scheme]
    return int(rows * cols * per_elem) + rows * per_row
