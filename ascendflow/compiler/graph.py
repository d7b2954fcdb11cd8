"""Graph-capture pass: the ``cudagraph_mode`` and capture sizes the engine will use."""

from __future__ import annotations

from ascendflow.compiler.plan import GraphPlan
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.graph import GraphSpec
from ascendflow.schema.hardware import HardwareSpec


def default_capture_sizes(max_size: int) -> list[int]:
    """vLLM's default capture ladder up to ``max_size``: 1, 2, 4, multiples of 8 below 256, then multiples of 16.

    Source: ``shared/reference/vllm_ascend.md`` §4 (vLLM ``CompilationConfig`` defaults).
    """
    ladder = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, max_size + 1, 16))
    return [s for s in ladder if s <= max_size]


def graph_plan(graph: GraphSpec, hardware: HardwareSpec, *, enforce_eager: bool, max_num_seqs: int) -> GraphPlan:
    """Resolve graph capture for the target.

    On CPU vLLM captures no graphs (it compiles with ``torch.compile`` unless eager), so only ``NONE`` is valid.
    Elsewhere the default maximum capture size is ``min(max_num_seqs, 512)`` (Ascend rule, reference §4).

    Raises:
        ConfigError: a capture mode the hardware does not support.
    """
    eager = enforce_eager or graph.enforce_eager
    if eager:
        return GraphPlan(cudagraph_mode="NONE", capture_sizes=[], enforce_eager=True)
    if hardware.kind == "cpu":
        if graph.cudagraph_mode not in (None, "NONE"):
            raise ConfigError("graph.cudagraph_mode", graph.cudagraph_mode,
                              "the CPU engine captures no graphs; use graph=eager or graph=compiled")
        return GraphPlan(cudagraph_mode="NONE", capture_sizes=[], enforce_eager=False)
    mode = graph.cudagraph_mode or "PIECEWISE"
    if graph.cudagraph_capture_sizes is not None:
        sizes = sorted(set(graph.cudagraph_capture_sizes))
    else:
        sizes = default_capture_sizes(graph.max_cudagraph_capture_size or min(max_num_seqs, 512))
    return GraphPlan(cudagraph_mode=mode, capture_sizes=sizes if mode != "NONE" else [], enforce_eager=False)
