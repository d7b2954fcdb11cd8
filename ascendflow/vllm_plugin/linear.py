"""vLLM linear methods for msModelSlim W8A8_DYNAMIC and W8A8 (static) layers, computed by :mod:`ascendflow.kernels`.

Parameters are created with the names, shapes and dtypes of the checkpoint (msModelSlim 26.1.0
``core/quant_service/modelslim_v1/save/ascendv1.py``) so vLLM's default loader copies every tensor as it is:
int8 ``weight [N, K]``; W8A8_DYNAMIC float32 ``weight_scale``/``weight_offset [N, 1]``; W8A8 float32
``input_scale``/``input_offset [1]`` per packed member, int32 ``quant_bias [N]``, ``deq_scale [N]`` held as float32
(stored as float32, or as its bits in int64: :class:`DeqScaleParameter`). After loading, the weight is transposed
to ``[K, N]`` as vllm-ascend v0.23.0 does (``process_weights_after_loading`` in
``quantization/methods/w8a8_dynamic.py`` / ``w8a8_static.py``), and the op is taken from
:func:`ascendflow.kernels.get_op` for the weight's device.
"""

from __future__ import annotations

import torch
from vllm.model_executor.layers.linear import LinearMethodBase, register_weight_loader_v2_supported_method
from vllm.model_executor.parameter import (
    ChannelQuantScaleParameter,
    ModelWeightParameter,
    PerTensorScaleParameter,
)

from ascendflow.kernels import get_op
from ascendflow.kernels.ops.w8a8_static_linear import deq_scale_from_int64


class DeqScaleParameter(ChannelQuantScaleParameter):
    """Per-channel ``deq_scale`` held as float32 whatever the checkpoint stores.

    msModelSlim writes float32 for a model it sees as bf16 and the float32 bit pattern as int64 otherwise
    (``format/common/deqscale.py`` ``deqscale2int64_by_dtype``); a checkpoint quantized from a float32 copy (the CPU
    workaround in :mod:`ascendflow.models.msmodelslim_w8a8`) therefore carries int64 even when its config says bf16.
    A plain copy would convert the integers' values; the bits are reinterpreted instead.
    """

    def _as_float(self, loaded_weight: torch.Tensor) -> torch.Tensor:
        return deq_scale_from_int64(loaded_weight) if loaded_weight.dtype == torch.int64 else loaded_weight

    def load_column_parallel_weight(self, loaded_weight: torch.Tensor) -> None:
        super().load_column_parallel_weight(self._as_float(loaded_weight))

    def load_merged_column_weight(self, loaded_weight: torch.Tensor, **kwargs) -> None:
        super().load_merged_column_weight(self._as_float(loaded_weight), **kwargs)

    def load_qkv_weight(self, loaded_weight: torch.Tensor, **kwargs) -> None:
        super().load_qkv_weight(self._as_float(loaded_weight), **kwargs)

    def load_row_parallel_weight(self, loaded_weight: torch.Tensor) -> None:
        super().load_row_parallel_weight(self._as_float(loaded_weight))


def _int8_weight(layer: torch.nn.Module, k: int, sizes: list[int], loader) -> None:
    layer.logical_widths = sizes
    layer.register_parameter("weight", ModelWeightParameter(
        data=torch.empty(sum(sizes), k, dtype=torch.int8), input_dim=1, output_dim=0, weight_loader=loader))


def _channel(layer: torch.nn.Module, name: str, shape: tuple[int, ...], dtype: torch.dtype, loader) -> None:
    layer.register_parameter(name, ChannelQuantScaleParameter(
        data=torch.empty(shape, dtype=dtype), output_dim=0, weight_loader=loader))


# Registered for vLLM's weight_loader_v2 (vllm/model_executor/layers/linear.py WEIGHT_LOADER_V2_SUPPORTED): the
# parameter classes above load fused q/k/v and gate/up shards only through it.
@register_weight_loader_v2_supported_method
class W8A8DynamicLinearMethod(LinearMethodBase):
    """msModelSlim W8A8_DYNAMIC: per-channel int8 weight, per-token dynamic int8 activation."""

    def create_weights(self, layer, input_size_per_partition, output_partition_sizes, input_size, output_size,
                       params_dtype, **extra_weight_attrs):
        loader = extra_weight_attrs.get("weight_loader")
        n = sum(output_partition_sizes)
        _int8_weight(layer, input_size_per_partition, list(output_partition_sizes), loader)
        _channel(layer, "weight_scale", (n, 1), torch.float32, loader)
        _channel(layer, "weight_offset", (n, 1), torch.float32, loader)

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        layer.weight = torch.nn.Parameter(layer.weight.data.t().contiguous(), requires_grad=False)
        layer.weight_scale = torch.nn.Parameter(layer.weight_scale.data.flatten(), requires_grad=False)
        layer.weight_offset = torch.nn.Parameter(layer.weight_offset.data.flatten(), requires_grad=False)
        layer.ascend_op = get_op("w8a8_dynamic_linear", str(layer.weight.device))

    def apply(self, layer: torch.nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return layer.ascend_op(x, layer.weight, layer.weight_scale, bias)


@register_weight_loader_v2_supported_method
class W8A8StaticLinearMethod(LinearMethodBase):
    """msModelSlim W8A8 static: per-tensor calibrated activation scale/offset, int32 quant_bias, deq_scale."""

    def create_weights(self, layer, input_size_per_partition, output_partition_sizes, input_size, output_size,
                       params_dtype, **extra_weight_attrs):
        loader = extra_weight_attrs.get("weight_loader")
        n = sum(output_partition_sizes)
        _int8_weight(layer, input_size_per_partition, list(output_partition_sizes), loader)
        _channel(layer, "quant_bias", (n,), torch.int32, loader)
        layer.register_parameter("deq_scale", DeqScaleParameter(
            data=torch.empty(n, dtype=torch.float32), output_dim=0, weight_loader=loader))
        for name in ("input_scale", "input_offset"):
            layer.register_parameter(name, PerTensorScaleParameter(
                data=torch.empty(len(output_partition_sizes), dtype=torch.float32), weight_loader=loader))

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        # Fused q/k/v (gate/up) read one input: msModelSlim calibrates one scale/offset for it; apply uses the first.
        # The per-member copies stay loaded, so the bytes in memory equal the checkpoint's.
        scale, offset = layer.input_scale.data, layer.input_offset.data
        if not (torch.all(scale == scale[0]) and torch.all(offset == offset[0])):
            raise ValueError(f"fused members of a static W8A8 layer have different input scales {scale.tolist()} "
                             f"/ offsets {offset.tolist()}")
        layer.weight = torch.nn.Parameter(layer.weight.data.t().contiguous(), requires_grad=False)
        layer.ascend_op = get_op("w8a8_static_linear", str(layer.weight.device))

    def apply(self, layer: torch.nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return layer.ascend_op(x, layer.weight, layer.input_scale[:1], layer.input_offset[:1], layer.quant_bias,
                               layer.deq_scale, x.dtype)
