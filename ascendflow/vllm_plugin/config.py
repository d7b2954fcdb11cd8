"""``ascend`` quantization config for vLLM on CPU: reads ``quant_model_description.json`` and gives each linear
layer the method its tensors were exported with (W8A8_DYNAMIC, W8A8 static, or FLOAT = unquantized).

Follows vllm-ascend v0.23.0 ``vllm_ascend/quantization/modelslim_config.py`` ``AscendModelSlimConfig``: the same
config file name, the per-tensor ``"<prefix>.weight": "<TYPE>"`` lookup, and fused layers (``qkv_proj``,
``gate_up_proj``) quantized when their first packed member is (``is_layer_skipped_ascend`` requires all members to
agree; so does :meth:`MsModelSlimConfig.layer_type`).
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.model_executor.layers.linear import LinearBase, UnquantizedLinearMethod
from vllm.model_executor.layers.quantization import register_quantization_config
from vllm.model_executor.layers.quantization.base_config import QuantizationConfig

from .names import METHOD
from .linear import W8A8DynamicLinearMethod, W8A8StaticLinearMethod

#: File msModelSlim writes beside the weights (msModelSlim 26.1.0 ``ascendv1_saver``).
DESCRIPTION_FILE = "quant_model_description.json"

#: Tensor types of the description that this plugin serves; others are refused at load.
SUPPORTED = ("W8A8_DYNAMIC", "W8A8", "FLOAT")


class MsModelSlimConfig(QuantizationConfig):
    """Quantization config built from an msModelSlim ``quant_model_description.json``."""

    def __init__(self, description: dict[str, Any]) -> None:
        super().__init__()
        self.description = description
        self.quant_type = description.get("model_quant_type")

    def __repr__(self) -> str:
        return f"MsModelSlimConfig(model_quant_type={self.quant_type!r})"

    @classmethod
    def get_name(cls) -> str:
        return METHOD

    @classmethod
    def get_supported_act_dtypes(cls) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float16, torch.float32]

    @classmethod
    def get_min_capability(cls) -> int:
        return 0

    @staticmethod
    def get_config_filenames() -> list[str]:
        return [DESCRIPTION_FILE]

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> MsModelSlimConfig:
        return cls(config)

    def layer_type(self, prefix: str) -> str:
        """Return the description's type of the linear layer ``prefix`` (``FLOAT`` when it is not listed).

        Raises:
            ValueError: the members of a fused layer disagree, or the type is not in :data:`SUPPORTED`.
        """
        leaf = prefix.rsplit(".", 1)[-1]
        members = self.packed_modules_mapping.get(leaf, [leaf])
        base = prefix[: len(prefix) - len(leaf)]
        types = {self.description.get(f"{base}{m}.weight", "FLOAT") for m in members}
        if len(types) != 1:
            raise ValueError(f"{prefix}: fused members have different msModelSlim types {sorted(types)}")
        kind = types.pop()
        if kind not in SUPPORTED:
            raise ValueError(f"{prefix}: msModelSlim type {kind} is not served on CPU (supported: {SUPPORTED})")
        return kind

    def get_quant_method(self, layer: torch.nn.Module, prefix: str):
        if not isinstance(layer, LinearBase):
            return None
        kind = self.layer_type(prefix)
        if kind == "W8A8_DYNAMIC":
            return W8A8DynamicLinearMethod()
        if kind == "W8A8":
            return W8A8StaticLinearMethod()
        return UnquantizedLinearMethod()


def register_config() -> None:
    """Register :class:`MsModelSlimConfig` as vLLM quantization method ``ascend`` (also on the CPU platform's list)."""
    register_quantization_config(METHOD)(MsModelSlimConfig)
