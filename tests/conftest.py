"""Shared fixtures: real Hydra composition of ascendflow's config, real subprocess runs, a fresh MLflow store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parent.parent
CONF = REPO / "conf"
RECIPES = REPO / "recipes" / "recipe"
CLI_TIER = REPO / "tests" / "cli"
# The msModelSlim interpreter that scripts/setup.sh installs (ascendflow.models.msmodelslim_w8a8 looks here).
if (REPO / ".venv-msmodelslim" / "bin" / "python").exists():
    os.environ.setdefault("ASCENDFLOW_MSMODELSLIM_PYTHON", str(REPO / ".venv-msmodelslim" / "bin" / "python"))

GROUPS = ("hardware", "model", "parallel", "quantization", "engine", "graph", "ascend", "workload", "tracking", "run",
          "pd", "search")


def compose_config(overrides: list[str] | None = None) -> dict[str, Any]:
    """Compose ascendflow's config as ``python -m ascendflow`` does (same search path) and resolve it."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides or [])
    return OmegaConf.to_container(cfg, resolve=True)


def group_options(group: str) -> list[str]:
    """Every option of a config group (file stems under ``conf/<group>/``)."""
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def recipe_names() -> list[str]:
    """Every shipped recipe."""
    return sorted(p.stem for p in RECIPES.glob("*.yaml"))


def run_ascendflow(args: list[str], cwd: Path, env: dict[str, str] | None = None,
                   timeout: float = 1500) -> subprocess.CompletedProcess:
    """Run ``python -m ascendflow ARGS`` in ``cwd`` and capture its output."""
    full_env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "ascendflow", *args], cwd=cwd, env=full_env, text=True,
                          capture_output=True, timeout=timeout)


@pytest.fixture
def mlflow_uri(tmp_path: Path) -> str:
    """A fresh SQLite MLflow store in a temporary directory."""
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def plan_for(overrides: list[str], host_memory_bytes: int = 16 * 2**30):
    """Compose, validate and compile in process (no engine, no MLflow): ``(spec, plan)``.

    Raises:
        ConfigError: as ``python -m ascendflow`` would report it.
    """
    from ascendflow.compiler import compile_plan
    from ascendflow.models.resolve import resolve_model
    from ascendflow.platforms import HostFacts
    from ascendflow.schema import load_spec

    raw = compose_config(overrides)
    raw.pop("hydra", None)
    spec = load_spec(raw)
    model = resolve_model(spec.model, need_weights=False)
    return spec, compile_plan(spec, model.architecture, model_path=model.path or spec.model.path or spec.model.id,
                              host=HostFacts(cpu_memory_bytes=host_memory_bytes), checkpoint=model.checkpoint)


def pytest_collection_modifyitems(config, items):
    """``engine`` and its older alias ``e2e`` mark the same tests: each is added wherever the other is. Engine tests
    also go into one ``xdist_group`` (``engine``): under ``pytest -n 2 --dist loadgroup`` (``.ci/run``) they run one
    after another on one worker (one engine at a time, as timed on 2 cores; fixed ports, vLLM's compile cache and the
    model cache are never contended between two engines) while the other worker runs the unit and CLI tiers; the
    group is queued first, as it is the longest. Tests under ``tests/cli/`` get the ``cli`` marker, the rest that is
    not ``engine`` the ``unit`` marker."""
    for item in items:
        names = {m.name for m in item.iter_markers()}
        if "engine" in names and "e2e" not in names:
            item.add_marker(pytest.mark.e2e)
        elif "e2e" in names and "engine" not in names:
            item.add_marker(pytest.mark.engine)
        if names & {"engine", "e2e"}:
            item.add_marker(pytest.mark.xdist_group("engine"))
        elif CLI_TIER in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cli)
        else:
            item.add_marker(pytest.mark.unit)
    if getattr(config.option, "numprocesses", None):  # under xdist the engine group, the longest unit, goes first
        items[:] = sorted(items, key=lambda item: item.get_closest_marker("engine") is None)
