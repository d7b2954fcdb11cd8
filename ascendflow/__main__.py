"""``python -m ascendflow``: the Hydra task. Composes the config and hands it to :func:`ascendflow.app.run_job`."""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> float | None:
    """Run one job; returns the sweep objective (output tokens/s) or ``None`` for a plan-only run."""
    from ascendflow.app import run_job

    return run_job(cfg)


if __name__ == "__main__":
    main()
