"""``python -m ascendflow.precision``: compose ``conf/precision_report.yaml`` and run the report."""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

CONF_DIR = str(Path(__file__).resolve().parent.parent.parent / "conf")


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="precision_report")
def main(cfg: DictConfig) -> None:
    """Run the precision report; exits 1 when a threshold is breached, 2 on bad input."""
    from ascendflow.precision.app import run_report

    run_report(cfg)


if __name__ == "__main__":
    main()
