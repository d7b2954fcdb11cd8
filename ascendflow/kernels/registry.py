"""Pick an op's backend by device, with an override (Liger-Kernel's shape, STYLE.md).

Backends: ``reference`` (the PyTorch modules in :mod:`ascendflow.kernels.ops`, any device) and ``npu``
(:mod:`ascendflow.kernels.backends.npu`, torch_npu, imported only when ``torch_npu`` is installed). An NPU tensor
device selects ``npu``; every other device selects ``reference``. The override is the ``backend`` argument, else
``$ASCENDFLOW_KERNEL_BACKEND``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable

from .ops.dynamic_quant import dynamic_quant
from .ops.quant_matmul import quant_matmul
from .ops.static_quant import static_quant
from .ops.w8a8_dynamic_linear import w8a8_dynamic_linear
from .ops.w8a8_static_linear import w8a8_static_linear

#: Environment variable that overrides the backend choice for every op (``reference`` or ``npu``).
BACKEND_ENV = "ASCENDFLOW_KERNEL_BACKEND"

#: The reference implementation of each op, by op name.
OPS: dict[str, Callable] = {
    "dynamic_quant": dynamic_quant,
    "static_quant": static_quant,
    "quant_matmul": quant_matmul,
    "w8a8_dynamic_linear": w8a8_dynamic_linear,
    "w8a8_static_linear": w8a8_static_linear,
}

_BACKENDS = ("reference", "npu")


def available_backends() -> list[str]:
    """Backends importable in this process: always ``reference``; ``npu`` where ``torch_npu`` is installed."""
    return ["reference"] + (["npu"] if importlib.util.find_spec("torch_npu") is not None else [])


def backend_for(device: str | None = None, backend: str | None = None, installed: list[str] | None = None) -> str:
    """Return the backend name an op on ``device`` uses.

    Args:
        device: A torch device string or type (``"cpu"``, ``"npu:0"``, ``"cuda"``); None means ``cpu``.
        backend: Explicit override; else ``$ASCENDFLOW_KERNEL_BACKEND``; else chosen by device.
        installed: Backends importable here; default :func:`available_backends`.

    Raises:
        ValueError: the override names an unknown backend, or one that cannot be imported here.
    """
    installed = available_backends() if installed is None else installed
    choice = backend or os.environ.get(BACKEND_ENV) or None
    if choice is None:
        device_type = (device or "cpu").split(":")[0]  # a torch device type, not a hardware kind
        choice = "npu" if device_type == "npu" and "npu" in installed else "reference"
    if choice not in _BACKENDS:
        raise ValueError(f"kernel backend={choice}: not one of {list(_BACKENDS)}; use reference or npu")
    if choice not in installed:
        raise ValueError(f"kernel backend={choice}: torch_npu is not installed here; use backend=reference")
    return choice


def get_op(name: str, device: str | None = None, backend: str | None = None) -> Callable:
    """Return the implementation of op ``name`` for ``device`` (see :func:`backend_for`).

    Raises:
        KeyError: ``name`` is not an op in :data:`OPS`.
        ValueError: as :func:`backend_for`.
    """
    if name not in OPS:
        raise KeyError(f"kernel op={name}: unknown; ops are {sorted(OPS)}")
    if backend_for(device, backend) == "reference":
        return OPS[name]
    return getattr(importlib.import_module("ascendflow.kernels.backends.npu"), name)
