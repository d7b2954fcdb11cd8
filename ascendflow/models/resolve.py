"""Model resolution (I/O before compiling): find or build the weights and read the architecture.

The compiler's input depends on the model's ``config.json`` and, for multimodal checkpoints, the largest image of its
``preprocessor_config.json``; weights are needed only to serve.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from pydantic import ValidationError

from ascendflow.models.checkpoint import read_inventory
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.engine import EngineSpec
from ascendflow.schema.speculative import DRAFT_MODEL_METHODS
from ascendflow.schema.checkpoint import CheckpointInventory
from ascendflow.schema.errors import ConfigError, format_validation_error
from ascendflow.schema.model import ModelSpec


@dataclass(frozen=True)
class ResolvedModel:
    """A model ready to compile: its directory (``None`` when planning from inline values), architecture, and the
    inventory of its stored tensors (``None`` without a local checkpoint)."""

    path: str | None
    architecture: ModelArchitecture
    checkpoint: CheckpointInventory | None = None


def hub_cache_dirs(model_id: str) -> list[Path]:
    """Where a hub id is looked for locally: the Hugging Face hub cache (``$HF_HUB_CACHE``, ``$HF_HOME/hub``,
    ``~/.cache/huggingface/hub``) as ``models--org--name/snapshots/<rev>``."""
    roots = [os.environ.get("HF_HUB_CACHE"),
             os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None,
             os.path.expanduser("~/.cache/huggingface/hub")]
    folder = "models--" + model_id.replace("/", "--")
    return [Path(r) / folder for r in roots if r]


def _find_in_hub_cache(model_id: str) -> Path | None:
    for repo in hub_cache_dirs(model_id):
        snapshots = sorted((repo / "snapshots").glob("*/config.json"), key=lambda p: p.stat().st_mtime)
        if snapshots:
            return snapshots[-1].parent
    return None


def _local(model_dir: Path, key: str) -> ResolvedModel:
    return ResolvedModel(str(model_dir), _read_architecture(model_dir, key), read_inventory(model_dir))


def _read_architecture(model_dir: Path, key: str) -> ModelArchitecture:
    config = model_dir / "config.json"
    if not config.is_file():
        raise ConfigError(key, str(model_dir), "is not a Hugging Face model directory (no config.json in it)")
    try:
        arch = ModelArchitecture.from_hf_config(json.loads(config.read_text()))
    except json.JSONDecodeError as exc:
        raise ConfigError(key, str(model_dir), f"config.json is not valid JSON ({exc})") from None
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise ConfigError(key, str(model_dir), f"config.json field {'.'.join(map(str, err['loc']))}: "
                                               f"{err['msg']}") from None
    if arch.vision_config and (pixels := processor_max_pixels(model_dir, key)) is not None:
        arch = arch.model_copy(update={"processor_max_pixels": pixels})
    return arch


def processor_max_pixels(model_dir: Path, key: str) -> int | None:
    """The largest image (pixels) of ``model_dir/preprocessor_config.json``: ``size["longest_edge"]`` (transformers
    ``Qwen2VLImageProcessorFast``, the Qwen3-VL checkpoints), else the older top-level ``max_pixels`` (Qwen2.5-VL);
    ``None`` without the file or either key (the planner then uses the family default,
    :mod:`ascendflow.compiler.memory.vision_profile`).

    Raises:
        ConfigError: the file is not valid JSON, or the value is not a positive integer.
    """
    path = model_dir / "preprocessor_config.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(key, str(model_dir), f"preprocessor_config.json is not valid JSON ({exc})") from None
    size = data.get("size") if isinstance(data, dict) else None
    field, value = ("size.longest_edge", size["longest_edge"]) if isinstance(size, dict) and "longest_edge" in size \
        else ("max_pixels", data.get("max_pixels") if isinstance(data, dict) else None)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(key, str(model_dir), f"preprocessor_config.json {field}={value!r} is not a positive pixel "
                                               f"count: fix the file (vLLM sizes its dummy images from it)")
    return value


#: Weight files vLLM's default loader reads from a directory (vllm/model_executor/model_loader/default_loader.py
#: ``_prepare_weights``: ``*.safetensors``, else ``*.bin``, else ``*.pt``).
WEIGHT_GLOBS = ("*.safetensors", "*.bin", "*.pt")
#: Tokenizer files ``AutoTokenizer.from_pretrained`` can build a tokenizer from (fast ``tokenizer.json``, or the slow
#: tokenizers' vocabularies: SentencePiece ``tokenizer.model``/``spiece.model``, BPE ``vocab.json``, WordPiece
#: ``vocab.txt``, tiktoken files).
TOKENIZER_GLOBS = ("tokenizer.json", "tokenizer.model", "spiece.model", "vocab.json", "vocab.txt", "*.tiktoken")


def check_loadable(model_dir: Path, key: str) -> None:
    """Refuse, before any process starts, a model directory the engine cannot load: no weight files or no tokenizer
    (a directory holding only ``config.json`` started vLLM, which failed 15 s later with a traceback).

    Raises:
        ConfigError: what is missing, naming the files looked for.
    """
    missing = [what for what, globs in (("no weights", WEIGHT_GLOBS), ("no tokenizer", TOKENIZER_GLOBS))
               if not any(next(model_dir.glob(g), None) for g in globs)]
    if missing:
        raise ConfigError(key, str(model_dir), f"{' and '.join(missing)} in the directory (weights: "
                                               f"{', '.join(WEIGHT_GLOBS)}; tokenizer: {', '.join(TOKENIZER_GLOBS)}); "
                                               "copy the whole model repository there, or use run.mode=plan, which "
                                               "reads config.json only")


def resolve_model(model: ModelSpec, *, need_weights: bool,
                  progress: Callable[[str], None] | None = None) -> ResolvedModel:
    """Locate (or build once, for the embedded models) the model and read its architecture, with
    ``model.hf_overrides`` laid over it as vLLM lays ``--hf-overrides`` over the config it loads
    (:meth:`~ascendflow.schema.architecture.ModelArchitecture.with_hf_overrides`).

    Args:
        model: the model option.
        need_weights: the run will load the weights (serve/offline); planning needs only the architecture.
        progress: callback for status lines during a one-time conversion.

    Returns:
        ResolvedModel with the model directory and its architecture.

    Raises:
        ConfigError: a local path or hub id whose files are not on this machine (nothing is downloaded); an override
            the architecture refuses.
    """
    resolved = _resolve(model, need_weights, progress)
    return replace(resolved, architecture=resolved.architecture.with_hf_overrides(model.hf_overrides))


def _resolve(model: ModelSpec, need_weights: bool, progress: Callable[[str], None] | None) -> ResolvedModel:
    """:func:`resolve_model` before the overrides."""
    if model.source == "smollm2_gguf":
        from ascendflow.models.smollm2 import ensure_smollm2

        return _local(ensure_smollm2(progress=progress), "model.path")
    if model.source == "gemma3_gguf":
        from ascendflow.models.gemma3_270m import ensure_gemma3_270m

        return _local(ensure_gemma3_270m(progress=progress), "model.path")
    if model.source == "tiny_deepseek":
        from ascendflow.models.tiny_deepseek import ensure_tiny_deepseek

        return _local(ensure_tiny_deepseek(progress=progress), "model.path")
    if model.source == "smollm2_w8a8":
        from ascendflow.models.msmodelslim_w8a8 import ensure_smollm2_w8a8

        return _local(ensure_smollm2_w8a8(progress=progress), "model.path")
    if model.source == "local":
        if not model.path:
            raise ConfigError("model.path", model.path, "source=local needs a model directory")
        path = Path(model.path).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError("model.path", model.path, f"directory not found ({path})")
        resolved = _local(path, "model.path")
        if need_weights:
            check_loadable(path, "model.path")
        return resolved
    # source == "hub": never downloaded; a local snapshot or an explicit path wins over inline values.
    local = Path(model.path).expanduser().resolve() if model.path else _find_in_hub_cache(model.id)
    if local is not None and (local / "config.json").is_file():
        resolved = _local(local, "model.path")
        if need_weights:
            check_loadable(local, "model.path" if model.path else "model.id")
        return resolved
    if not need_weights and model.architecture is not None:
        try:
            return ResolvedModel(None, ModelArchitecture.from_hf_config(model.architecture))
        except ValidationError as exc:  # an inline value out of range: the key, the value, the rule and the fix
            raise format_validation_error(exc, "model.architecture") from None
    looked = ", ".join(str(p) for p in ([Path(model.path)] if model.path else hub_cache_dirs(model.id)))
    raise ConfigError("model.id", model.id,
                      f"weights not available locally (looked in {looked}); there is no hub access here: copy the "
                      f"model directory to this machine and set model.path=<dir>, or use run.mode=plan")


def resolve_draft(engine: EngineSpec) -> ModelArchitecture | None:
    """The separate draft model's architecture (``engine.speculative_config.model`` of an ``eagle`` / ``eagle3``
    method): its ``config.json`` in that directory, or in the local hub cache for a hub id (nothing is downloaded);
    ``None`` without such a draft or when the file is not on this machine (the compiler then refuses in one line).

    Raises:
        ConfigError: a ``config.json`` that is not valid JSON or lacks a field the planner needs.
    """
    sc = engine.speculative_config
    if sc is None or sc.method not in DRAFT_MODEL_METHODS or sc.model is None:
        return None
    path = Path(sc.model).expanduser()
    folder = path if (path / "config.json").is_file() else _find_in_hub_cache(sc.model)
    if folder is None:
        return None
    return _read_architecture(folder, "engine.speculative_config.model")
