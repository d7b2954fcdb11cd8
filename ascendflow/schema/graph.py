"""Graph-capture option (``conf/graph/*.yaml``): vLLM's ``CompilationConfig`` capture settings."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from typing_extensions import Annotated

from ascendflow.schema.base import Spec
from ascendflow.schema.bounds import MAX_NUM_SEQS, MAX_TOKENS

CudagraphMode = Literal["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]


class GraphSpec(Spec):
    """Graph capture (ACL graph on Ascend, CUDA graph on GPU; none on CPU).

    Attributes:
        name: option name.
        enforce_eager: no compilation, no capture (vLLM ``--enforce-eager``).
        cudagraph_mode: vLLM ``compilation_config.cudagraph_mode``; ``None`` keeps the engine's default.
        cudagraph_capture_sizes: explicit batch sizes to capture; ``None`` derives them as the engine does.
        max_cudagraph_capture_size: largest capture size; ``None`` derives it.
    """

    name: str
    enforce_eager: bool = False
    cudagraph_mode: CudagraphMode | None = None
    cudagraph_capture_sizes: tuple[Annotated[int, Field(gt=0, le=MAX_TOKENS)], ...] | None = Field(
        default=None, min_length=1, max_length=MAX_NUM_SEQS)
    # A capture size is a batch of tokens (vLLM caps the largest at max_num_batched_tokens): the token bound.
    max_cudagraph_capture_size: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
