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

ENGINE_TIER = REPO / "tests" / "engine"
#: Engine tests (every test under ``tests/engine/``, :data:`ENGINE_TIER`) run in two lanes under ``pytest -n 2
#: --dist loadgroup`` (``.ci/run``), each an xdist group, one engine test after another within a lane: lane ``engine``
#: (queued first, on one worker from the start) holds the files whose engines use fixed ports (rehearsal's
#: --master-port 29501 and --data-parallel-rpc-port 13389, PD's KV ports, Ray's GCS port 6379) and the heaviest single
#: files; lane ``engine_late`` (queued last) is taken by the other worker once it has run the unit and CLI tiers. The
#: lanes were balanced on the CI log of 2026-12-03 (per-test durations); serialising every engine test on one worker
#: left the other idle for most of the suite. Paths are relative to ``tests/engine/``
#: (``tests/test_engine_marker.py`` checks that each exists).
EARLY_LANE = frozenset({"test_rehearsal.py", "test_rehearsal_pd.py", "test_cluster_sweeps.py", "faults/test_orphans.py",
                        "precision/test_report.py", "profiling/test_profile_run.py",
                        "vllm_plugin/test_serve_checkpoint.py", "test_tiny_deepseek.py"})
# Two engines at once must not share one core: vLLM's CPU worker binds its OpenMP threads to the last core of the NUMA
# node under VLLM_CPU_OMP_THREADS_BIND=auto (vllm/utils/ompmultiprocessing.py, _get_autobind_cpu_ids), the same core
# for every engine. Under xdist the lanes' engines are left to the OS scheduler instead.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")

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


@pytest.fixture(autouse=True)
def _mlflow_tracking_uri_restored():
    """Restore MLflow's process-wide tracking URI after each test: ``mlflow.set_tracking_uri`` (called by in-process
    ``ascendflow.compare``, the job) also sets ``MLFLOW_TRACKING_URI`` in ``os.environ`` (mlflow/tracking/
    _tracking_service/utils.py), which later in-process runs and their subprocesses then inherit (a Ray sweep test
    was refused naming another test's store)."""
    before = os.environ.get("MLFLOW_TRACKING_URI")
    yield
    if "mlflow" in sys.modules:
        import mlflow

        if mlflow.get_tracking_uri() != before or os.environ.get("MLFLOW_TRACKING_URI") != before:
            mlflow.set_tracking_uri(before)
    if before is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = before


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


def pytest_configure(config):
    """Keep xdist's work queue in collection order (lane ``engine``, the unit and CLI tiers, lane ``engine_late``):
    by default ``--dist loadgroup`` reorders its units by size (``--no-loadscope-reorder``'s default,
    xdist/scheduler/loadscope.py ``schedule``), which starts both engine lanes at once and leaves the unit tiers
    for last."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def tier(path: Path, markers: set[str]) -> str:
    """The tier of a test in file ``path`` carrying ``markers``: ``engine`` under ``tests/engine/``, ``cli`` under
    ``tests/cli/``, else ``unit``.

    Raises:
        pytest.UsageError: a test marked ``engine`` or ``e2e`` outside ``tests/engine/`` (``-m "not engine"`` and
            ``--ignore=tests/engine`` must select the same tests).
    """
    if ENGINE_TIER in path.parents:
        return "engine"
    if markers & {"engine", "e2e"}:
        raise pytest.UsageError(f"{path.relative_to(REPO)}: marked engine outside tests/engine/: an engine test "
                                f"lives in tests/engine/ (the folder marks it); move the file there, or split off "
                                f"its engine tests")
    return "cli" if CLI_TIER in path.parents else "unit"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads xdist_group to suffix the node ids
def pytest_collection_modifyitems(config, items):
    """The folder is the tier (:func:`tier`): every test under ``tests/engine/`` gets the ``engine`` marker and its
    older alias ``e2e``, every test under ``tests/cli/`` the ``cli`` marker, the rest the ``unit`` marker; an
    engine-marked test elsewhere stops the run at collection. Engine tests go into one of two ``xdist_group`` lanes
    (:data:`EARLY_LANE`): under ``pytest -n 2 --dist loadgroup`` (``.ci/run``) each lane runs its engine tests one
    after another on one worker, so at most two engines run at once and never two with the same fixed ports; lane
    ``engine`` is queued first, the unit and CLI tiers next, lane ``engine_late`` last. Engine-tier tests marked
    ``no_vllm`` (tracking servers, the MLflow UI, plan-mode cluster sweeps: no vLLM engine, nothing timed) stay out
    of the lanes."""
    for item in items:
        path = Path(str(item.fspath))
        names = {m.name for m in item.iter_markers()}
        kind = tier(path, names)
        if kind == "engine":
            for name in {"engine", "e2e"} - names:
                item.add_marker(getattr(pytest.mark, name))
            if "no_vllm" not in names:
                lane = "engine" if path.relative_to(ENGINE_TIER).as_posix() in EARLY_LANE else "engine_late"
                item.add_marker(pytest.mark.xdist_group(lane))
        else:
            item.add_marker(getattr(pytest.mark, kind))
    if hasattr(config, "workerinput"):  # an xdist worker (its collection is the queue): ``engine`` first, ``engine_late`` last
        items[:] = sorted(items, key=_queue_position)


def _queue_position(item) -> int:
    """0 for lane ``engine``, 2 for lane ``engine_late``, 1 for the rest (xdist queues work in collection order)."""
    groups = {m.args[0] for m in item.iter_markers("xdist_group") if m.args}
    return 0 if "engine" in groups else 2 if "engine_late" in groups else 1


def pytest_collection_finish(session):
    """Under ``--dist loadgroup`` every engine test's node id must carry xdist's ``@engine`` suffix, or xdist
    schedules engine tests on both workers at once (two engines on 2 cores: timing asserts fail, as in the CI log of
    2026-12-03). pytest 9 broke the suffix (xdist 3.8 writes ``item._nodeid``; pytest 9 reads ``Node._id``):
    ``pyproject.toml`` pins pytest 8; this check stops the run at collection if the grouping is lost again.

    Raises:
        pytest.UsageError: an engine test without the suffix under ``--dist loadgroup``.
    """
    if not session.config.getoption("loadgroup", default=False):
        return
    lost = [item.nodeid for item in session.items if item.get_closest_marker("engine") is not None
            and item.get_closest_marker("no_vllm") is None and not item.nodeid.endswith(("@engine", "@engine_late"))]
    if lost:
        raise pytest.UsageError(f"--dist loadgroup: {len(lost)} engine tests lack xdist's '@engine' or '@engine_late' group suffix "
                                f"(e.g. {lost[0]}): pytest {pytest.__version__} and pytest-xdist disagree on node "
                                f"ids; install the test extra's pinned pytest (pip install -e '.[test]')")
