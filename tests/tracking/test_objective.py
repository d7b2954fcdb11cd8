"""What jobs return to sweepers: throughput, penalised for failures and SLO breaches."""

from __future__ import annotations

from ascendflow.schema.run import RunOptions
from ascendflow.tracking.objective import FAILED_TTFT_MS, objective
from ascendflow.tracking.run_names import job_run_name

METRICS = {"completed": 8, "output_throughput": 75.0, "p99_ttft_ms": 440.0}


def test_throughput_objective_with_and_without_slo():
    assert objective(RunOptions(), METRICS) == 75.0
    assert objective(RunOptions(slo_p99_ttft_ms=500), METRICS) == 75.0
    assert objective(RunOptions(slo_p99_ttft_ms=400), METRICS) == 0.0
    assert objective(RunOptions(), None) == 0.0
    assert objective(RunOptions(), {**METRICS, "completed": 0}) == 0.0


def test_two_objectives_penalise_failures():
    two = RunOptions(objective="throughput_and_p99_ttft")
    assert objective(two, METRICS) == (75.0, 440.0)
    assert objective(two, None) == (0.0, FAILED_TTFT_MS)


def test_child_run_names_keep_only_swept_values():
    overrides = ["engine.max_num_seqs=16", "workload.num_prompts=4", "+recipe=smollm2_cpu"]
    assert job_run_name(overrides, ["engine.max_num_seqs", "recipe"]) == "engine.max_num_seqs=16 +recipe=smollm2_cpu"
    assert job_run_name(overrides, []) == " ".join(overrides)
