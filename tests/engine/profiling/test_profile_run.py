"""``run.profile=true`` end to end: vLLM's torch profiler over the benchmark window of a real served run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_ascendflow


def _host_gemm_op(dtype: str) -> str:
    """The self-time GEMM operator vLLM's CPU linear layers run on this host for ``dtype`` (SmolLM2's 576x1536 MLP)."""
    import torch
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    layer = torch.nn.Linear(576, 1536, bias=False).to(getattr(torch, dtype))
    dispatch_cpu_unquantized_gemm(layer, remove_weight=False)
    with torch.profiler.profile() as prof:
        layer.cpu_linear(torch.ones(4, 576, dtype=layer.weight.dtype), layer.weight, None)
    gemms = {e.name for e in prof.events()} & {"_C::onednn_mm", "_C::weight_packed_linear", "aten::mm", "aten::addmm"}
    assert len(gemms) == 1, gemms
    return gemms.pop()


def test_profiled_run_writes_trace_and_operator_table(tmp_path: Path, mlflow_uri: str) -> None:
    proc = run_ascendflow(["run.profile=true", "workload.num_prompts=4", f"tracking.tracking_uri={mlflow_uri}"],
                          cwd=tmp_path, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (profile,) = tmp_path.glob("outputs/runs/*/*/profile")
    tables = json.loads((profile / "top_ops.json").read_text())
    (worker,) = [name for name in tables if name.startswith("rank0.")]
    assert (profile / worker).is_file() and len(tables[worker]) == 20
    names = [row["name"] for row in tables[worker]]
    # The GEMM kernel is the one vLLM dispatches on this host for the plan's dtype (oneDNN, AMX sgl-kernel or
    # torch's aten::mm: ``dispatch_cpu_unquantized_gemm``), asked of vLLM itself for a layer of the model's shape.
    plan = json.loads(next(tmp_path.glob("outputs/runs/*/*/plan.json")).read_text())
    assert _host_gemm_op(plan["engine_args"]["dtype"]) in names and "_C::cpu_attention_with_kv_cache" in names
    assert "top 20 operators by self time" in proc.stdout
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("ascendflow").experiment_id])
    assert {"profile/top_ops.json", "profile/top_ops.txt", f"profile/{worker}"} <= {
        a.path for a in client.list_artifacts(run.info.run_id, "profile")}
