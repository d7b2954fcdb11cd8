"""Launchers as objects: the registry, what each class says, the one data-parallel flag builder, and no launcher-name
comparison outside ``ascendflow/compiler/launch/``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ascendflow.compiler.launch.common import data_parallel_flags
from ascendflow.compiler.launch.registry import LAUNCHERS, PDLauncher, launcher_for
from ascendflow.compiler.plan import MP_DP, MP_NNODES, PD_PREFIX, RAY, SINGLE
from ascendflow.rehearsal.scale import REHEARSABLE

PACKAGE = Path(__file__).resolve().parents[2] / "ascendflow"
#: Modules whose "launcher" is Hydra's (basic, joblib, Ray, submitit), not a plan's.
HYDRA_LAUNCHERS = {"tracking/cluster.py", "tracking/sweep.py", "job_inputs.py"}
NAMES = {SINGLE, MP_DP, MP_NNODES, RAY}


def _is_name(node: ast.AST) -> bool:
    """A launcher-name literal, or a tuple/list/set literal holding one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in NAMES or node.value.startswith(PD_PREFIX)
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(_is_name(e) for e in node.elts)


def name_comparisons(source: str) -> list[int]:
    """Lines of ``source`` comparing a launcher-name literal (``==``, ``!=``, ``in``, ``.startswith("pd-")``),
    except comparisons of an executor backend (``parallel.distributed_executor_backend`` is ``mp`` or ``ray``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_name(s) for s in sides) and "backend" not in ast.unparse(node):
                lines.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith"
              and any(_is_name(a) for a in node.args)):
            lines.append(node.lineno)
    return lines


def test_the_grep_finds_a_name_comparison():
    found = name_comparisons('if plan.launcher == "ray":\n    pass\nx = a in ("mp-dp", "x")\n'
                             'y = n.startswith("pd-")\nz = parallel.distributed_executor_backend == "ray"\n')
    assert found == [1, 3, 4]


def test_no_launcher_name_comparison_outside_launch():
    bad = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("compiler/launch/") or rel in HYDRA_LAUNCHERS:
            continue
        if lines := name_comparisons(path.read_text()):
            bad[rel] = lines
    assert bad == {}, f"launcher names compared outside compiler/launch/ (ask launcher_for(name)): {bad}"


def test_registry_holds_every_placement_name():
    assert list(LAUNCHERS) == [SINGLE, MP_DP, MP_NNODES, RAY]
    assert {name: launcher_for(name).name for name in NAMES} == {n: n for n in NAMES}
    assert isinstance(launcher_for("pd-MooncakeConnectorV1"), PDLauncher)
    assert PDLauncher.name_for("MooncakeConnectorV1") == "pd-MooncakeConnectorV1"
    with pytest.raises(KeyError, match="unknown launcher 'lws'"):
        launcher_for("lws")


def test_what_each_launcher_says():
    said = {n: (c.executor_backend, c.multinode, c.spans_nodes, c.rehearsable, c.needs_ray)
            for n, c in LAUNCHERS.items()}
    assert said == {SINGLE: (None, False, False, False, False), MP_DP: (None, True, False, True, False),
                    MP_NNODES: ("mp", True, True, True, False), RAY: ("ray", True, True, True, True)}
    assert REHEARSABLE == (MP_DP, MP_NNODES, RAY)
    assert launcher_for(RAY).env("npu") == {"RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1"}
    assert launcher_for(RAY).env("cpu") == {} and launcher_for(MP_NNODES).env("npu") == {}
    assert launcher_for(MP_NNODES).engine_args({"model": "/m", "seed": 0}) == {
        "model": "/m", "seed": 0, "distributed_executor_backend": "mp"}
    assert launcher_for(MP_DP).engine_args({"model": "/m"}) == {"model": "/m"}


def test_data_parallel_flags_in_both_documented_orders():
    common = dict(address="10.0.0.1", rpc_port=13389)
    assert data_parallel_flags(**common, rank=3) == [
        "--data-parallel-rank", "3", "--data-parallel-address", "10.0.0.1", "--data-parallel-rpc-port", "13389"]
    assert data_parallel_flags(**common, local=2, start=2, headless=True) == [
        "--data-parallel-size-local", "2", "--data-parallel-start-rank", "2", "--data-parallel-address", "10.0.0.1",
        "--data-parallel-rpc-port", "13389", "--headless"]
    assert data_parallel_flags(**common, local=2, start=2, headless=True, start_after_headless=True) == [
        "--data-parallel-size-local", "2", "--data-parallel-address", "10.0.0.1", "--data-parallel-rpc-port",
        "13389", "--headless", "--data-parallel-start-rank", "2"]
    assert data_parallel_flags(**common, local=1) == [
        "--data-parallel-size-local", "1", "--data-parallel-address", "10.0.0.1", "--data-parallel-rpc-port", "13389"]
