"""Calibrated constants of the NPU step model, one YAML file per hardware option (``<hardware>.yaml`` here).

Each file holds ``constants`` (the fields of :class:`~ascendflow.perfmodel.npu.NpuConstants`, each with its meaning
and source in a comment), ``fit`` (how and on which rows the fitted ones were fitted) and ``measured_error`` (the
exact leave-one-out error per model class that labels every prediction). Written by ``benchmarks/fit_npu_perf.py``.
Loading is I/O: the app calls :func:`load_calibration`; the pure predictor takes its result as data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CALIBRATION_DIR = Path(__file__).parent
#: 80 % intervals per class from the corpus' grouped out-of-sample residuals (``benchmarks/perf_corpus_eval.py``).
INTERVALS = CALIBRATION_DIR / "intervals.yaml"


def calibration_path(hardware: str, directory: Path = CALIBRATION_DIR) -> Path:
    """``<directory>/<hardware>.yaml``."""
    return directory / f"{hardware}.yaml"


def load_calibration(hardware: str, path: Path | None = None) -> dict[str, Any] | None:
    """The calibration of ``hardware`` (``path`` overrides the packaged file), with ``file`` set to where it was
    read; ``None`` when no file exists. A packaged calibration also carries ``intervals`` (:data:`INTERVALS`, the
    residual quantiles of its constants); a user's file (``path``) does not: its constants were never scored there.

    Raises:
        ValueError: the file exists but is not a mapping with ``constants``.
    """
    path = path or calibration_path(hardware)
    if not path.exists():
        return None
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("constants"), dict):
        raise ValueError(f"{path}: a calibration file is a mapping with a 'constants' mapping")
    packaged = path.parent == CALIBRATION_DIR
    out = {**data, "file": path.name if packaged else str(path)}
    if packaged and INTERVALS.exists():
        out["intervals"] = {**(yaml.safe_load(INTERVALS.read_text()) or {}), "file": INTERVALS.name}
    return out
