"""For the precision tests: checkpoints derived from the real ones (corrupted scales, a different tokenizer) and
``python -m ascendflow.precision`` as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.helpers import plugin_path

#: The corruption: every down_proj's per-channel weight_scale multiplied by this (a broken export).
SCALE_FACTOR = 4.0


def corrupt_scales(source: Path, dest: Path) -> Path:
    """Copy the msModelSlim checkpoint ``source`` to ``dest`` with every ``down_proj.weight_scale`` × SCALE_FACTOR
    (other files symlinked); return ``dest``."""
    import torch
    from safetensors.torch import load_file, save_file

    dest.mkdir(parents=True)
    for path in source.iterdir():
        if path.suffix != ".safetensors":
            (dest / path.name).symlink_to(path)
            continue
        tensors = load_file(str(path))
        for name in tensors:
            if name.endswith("down_proj.weight_scale"):
                tensors[name] = (tensors[name].to(torch.float32) * SCALE_FACTOR).contiguous()
        save_file(tensors, str(dest / path.name), metadata={"format": "pt"})
    return dest


def other_tokenizer(source: Path, dest: Path) -> Path:
    """Copy the float checkpoint ``source`` to ``dest`` (weights symlinked) with one added special token (a vocabulary
    of 49153 entries instead of 49152)."""
    dest.mkdir(parents=True)
    for path in source.iterdir():
        if path.name != "tokenizer.json":
            (dest / path.name).symlink_to(path)
    tok = json.loads((source / "tokenizer.json").read_text())
    tok["added_tokens"].append({"id": len(tok["model"]["vocab"]), "content": "<|ascendflow_extra|>",
                                "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                                "special": True})
    (dest / "tokenizer.json").write_text(json.dumps(tok))
    return dest


def run_precision(args: list[str], cwd: Path, mlflow_uri: str | None = None,
                  cache: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m ascendflow.precision ARGS`` in ``cwd`` (MLflow at ``mlflow_uri``, else tracking off; the
    reference cache in ``cache``, else the default)."""
    tracking = [f"tracking.tracking_uri={mlflow_uri}"] if mlflow_uri else ["tracking=none"]
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    if cache is not None:
        env["ASCENDFLOW_PRECISION_CACHE"] = str(cache)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *plugin_path(cwd)])
    return subprocess.run([sys.executable, "-m", "ascendflow.precision", *args, *tracking], cwd=cwd, env=env,
                          text=True, capture_output=True, timeout=1500)
