"""Golden launch scripts for every recipe (reviewed like code when they change).

Regenerate after an intended change with ``UPDATE_GOLDEN=1 python -m pytest tests/compiler/test_golden_launch.py``
and review the diff of ``tests/golden/``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ascendflow.compiler import compile_plan, launch_scripts
from ascendflow.models.resolve import resolve_model
from ascendflow.platforms import HostFacts
from ascendflow.schema import load_spec
from tests.conftest import compose_config, recipe_names

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "launch"
#: Machine-independent inputs: CPU "device" memory and the model location are fixed for golden files.
HOST_MEMORY = 16 * 2**30


def _plan(recipe: str):
    raw = compose_config([f"+recipe={recipe}"])
    raw.pop("hydra", None)
    spec = load_spec(raw)
    model = resolve_model(spec.model, need_weights=False)
    return compile_plan(spec, model.architecture, model_path=f"/models/{spec.model.id}",
                        host=HostFacts(cpu_memory_bytes=HOST_MEMORY, amx=True))


def _scripts(recipe: str) -> dict[str, str]:
    return launch_scripts(_plan(recipe))


def _golden_files(folder: Path) -> list[Path]:
    """Launch scripts and the Kubernetes manifest (``lws.yaml``) of one recipe."""
    return [*folder.glob("*.sh"), *folder.glob("*.yaml")]


@pytest.mark.parametrize("recipe", recipe_names())
def test_plan_matches_golden(recipe):
    """The whole plan (memory waterfall, KV, graph, engine args, rules, estimates) per recipe, as reviewed JSON."""
    text = _plan(recipe).to_json() + "\n"
    path = GOLDEN.parent / "plans" / f"{recipe}.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden plan for {recipe}: run with UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text()


@pytest.mark.parametrize("recipe", recipe_names())
def test_launch_scripts_match_golden(recipe):
    scripts = _scripts(recipe)
    folder = GOLDEN / recipe
    if os.environ.get("UPDATE_GOLDEN") == "1":
        folder.mkdir(parents=True, exist_ok=True)
        for stale in _golden_files(folder):
            stale.unlink()
        for name, text in scripts.items():
            (folder / name).write_text(text)
    expected = {p.name: p.read_text() for p in sorted(_golden_files(folder))}
    assert expected, f"no golden files for {recipe}: run with UPDATE_GOLDEN=1 and review them"
    assert scripts == expected


@pytest.mark.parametrize("recipe", recipe_names())
def test_launch_scripts_are_valid_bash(recipe, tmp_path):
    for name, text in _scripts(recipe).items():
        if not name.endswith(".sh"):
            continue
        path = tmp_path / name
        path.write_text(text)
        proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, (name, proc.stderr)


def test_multi_node_script_refuses_to_start_without_addresses(tmp_path):
    script = tmp_path / "node1.sh"
    script.write_text(_scripts("deepseek_r1")["node1.sh"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCENDFLOW_")}
    env["ASCENDFLOW_MODEL_PATH"] = "/models/DeepSeek-R1-W8A8"  # the W8A8 checkpoint is given; the NIC is not
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env)
    assert proc.returncode != 0
    assert "ASCENDFLOW_NIC" in proc.stderr and "parallel.nic_name" in proc.stderr
    assert "vllm" not in proc.stderr  # stopped before exec


def test_addresses_from_the_config_leave_no_placeholder():
    raw = compose_config(["+recipe=deepseek_r1", "parallel.node_addresses=[10.0.0.1,10.0.0.2]",
                          "parallel.nic_name=enp189s0f0", "model.path=/models/DeepSeek-R1-W8A8"])
    raw.pop("hydra", None)
    spec = load_spec(raw)
    plan = compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture,
                        model_path=spec.model.path)
    scripts = launch_scripts(plan)
    assert "ASCENDFLOW_" not in scripts["node0.sh"] + scripts["node1.sh"]
    assert "export HCCL_IF_IP=10.0.0.2" in scripts["node1.sh"]
    assert "--data-parallel-address 10.0.0.1" in scripts["node1.sh"]
    assert "exec vllm serve /models/DeepSeek-R1-W8A8 " in scripts["node1.sh"]
