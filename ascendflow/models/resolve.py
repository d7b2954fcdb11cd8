"""Model resolution (I/O before compiling): find or build the weights and read the architecture.

The only file the compiler's input depends on is the model's ``config.json``; weights are needed only to serve.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pydantic import ValidationError

from ascendflow.models.checkpoint import read_inventory
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.checkpoint import CheckpointInventory
from ascendflow.schema.errors import ConfigError
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
        return ModelArchitecture.from_hf_config(json.loads(config.read_text()))
    except json.JSONDecodeError as exc:
        raise ConfigError(key, str(model_dir), f"config.json is not valid JSON ({exc})") from None
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise ConfigError(key, str(model_dir), f"config.json field {'.'.join(map(str, err['loc']))}: "
                                               f"{err['msg']}") from None


def resolve_model(model: ModelSpec, *, need_weights: bool,
                  progress: Callable[[str], None] | None = None) -> ResolvedModel:
    """Locate (or build once, for the embedded models) the model and read its architecture.

    Args:
        model: the model option.
        need_weights: the run will load the weights (serve/offline); planning needs only the architecture.
        progress: callback for status lines during a one-time conversion.

    Returns:
        ResolvedModel with the model directory and its architecture.

    Raises:
        ConfigError: a local path or hub id whose files are not on this machine (nothing is downloaded).
    """
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
        return _local(path, "model.path")
    # source == "hub": never downloaded; a local snapshot or an explicit path wins over inline values.
    local = Path(model.path).expanduser().resolve() if model.path else _find_in_hub_cache(model.id)
    if local is not None and (local / "config.json").is_file():
        return _local(local, "model.path")
    if not need_weights and model.architecture is not None:
        return ResolvedModel(None, ModelArchitecture.from_hf_config(model.architecture))
    looked = ", ".join(str(p) for p in ([Path(model.path)] if model.path else hub_cache_dirs(model.id)))
    raise ConfigError("model.id", model.id,
                      f"weights not available locally (looked in {looked}); there is no hub access here: copy the "
                      f"model directory to this machine and set model.path=<dir>, or use run.mode=plan")
