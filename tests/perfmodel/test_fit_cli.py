"""``python -m ascendflow.perfmodel.fit`` round trip: runs logged with MLflow's own API into a SQLite store (params
as the pipeline logs them, ``plan.json``, measured figures made by the NPU step model at known constants), fitted
from the packaged calibration, written as a calibration file that a plan then uses and records."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from ascendflow.perfmodel.calibration import load_calibration
from ascendflow.perfmodel.calibration.fitting import Row, error_table, predicted
from ascendflow.perfmodel.npu import NpuConstants
from ascendflow.tracking.flatten import flatten_params
from tests.conftest import plan_for, run_ascendflow

BASE = ["hardware=atlas_800i_a2", "model=qwen3_0_6b", "workload=random", "workload.random_output_len=64"]
#: Loads that tell step overhead from bandwidth apart: batch 1 to 16, short and long prompts.
CASES = [["workload.num_prompts=8", "workload.max_concurrency=1", "workload.random_input_len=128"],
         ["workload.num_prompts=8", "workload.max_concurrency=8", "workload.random_input_len=128"],
         ["workload.num_prompts=8", "workload.max_concurrency=8", "workload.random_input_len=1024"],
         ["workload.num_prompts=8", "workload.max_concurrency=4", "workload.random_input_len=512",
          "graph=full_decode_only"]]


def packaged() -> NpuConstants:
    return NpuConstants(**load_calibration("atlas_800i_a2")["constants"])


def rows_and_params() -> list[tuple[Row, dict[str, str]]]:
    out = []
    for i, case in enumerate(CASES):
        spec, plan = plan_for(BASE + case)
        data = json.loads(plan.to_json())
        out.append((Row(str(i), data, spec.hardware.model_dump(), spec.workload, spec.quantization.model_dump(), {}),
                    flatten_params(spec.model_dump(mode="json"))))
    return out


def test_fit_recovers_measured_runs_and_plans_record_the_calibration(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    truth = replace(packaged(), memory_efficiency=0.45, step_overhead_s=0.02)
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("npu-cluster", artifact_location=(tmp_path / "artifacts").as_uri())
    rows = []
    for row, params in rows_and_params():
        pred = predicted(row, truth)
        measured = {m: pred[m] for m in ("output_throughput", "median_tpot_ms", "median_ttft_ms")}
        run = client.create_run(exp)
        for k, v in params.items():
            client.log_param(run.info.run_id, k, v)
        for k, v in measured.items():
            client.log_metric(run.info.run_id, k, v)
        (tmp_path / "plan.json").write_text(json.dumps(row.plan))
        client.log_artifact(run.info.run_id, str(tmp_path / "plan.json"))
        client.set_terminated(run.info.run_id, "FINISHED")
        rows.append(replace(row, id=run.info.run_id, measured=measured))
    unplanned = client.create_run(exp)  # no plan.json: left out, named
    client.log_metric(unplanned.info.run_id, "output_throughput", 10.0)
    client.set_terminated(unplanned.info.run_id, "FINISHED")
    # Attached to a server with other KV knobs (run.attach_allow_mismatch=true): its figures would poison the fit.
    row, params = rows_and_params()[0]
    mismatched = client.create_run(exp, tags={"ascendflow.attach_mismatch": "engine.kv_cache_memory_bytes=4000000000"})
    for k, v in params.items():
        client.log_param(mismatched.info.run_id, k, v)
    for k, v in {"output_throughput": 1.0, "median_tpot_ms": 900.0, "median_ttft_ms": 9000.0}.items():
        client.log_metric(mismatched.info.run_id, k, v)
    (tmp_path / "plan.json").write_text(json.dumps(row.plan))
    client.log_artifact(mismatched.info.run_id, str(tmp_path / "plan.json"))
    client.set_terminated(mismatched.info.run_id, "FINISHED")

    out = tmp_path / "calib.yaml"
    # 20 evaluations: an eager step is max(device, host launches) since issue 28, a kink the finite-difference
    # trust region needs a few more steps to cross (12 left 1.1 % of error)
    proc = subprocess.run([sys.executable, "-m", "ascendflow.perfmodel.fit", "--experiment", "npu-cluster",
                           "--tracking-uri", uri, "--out", str(out), "--max-nfev", "20",
                           "--prior-strength", "0"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    left_out = [line for line in proc.stderr.splitlines() if "left out" in line]
    assert sorted(left_out) == sorted([
        f"left out {unplanned.info.run_id}: no plan.json",
        f"left out {mismatched.info.run_id}: attached to a server that does not run the plan's "
        "engine.kv_cache_memory_bytes=4000000000 (ascendflow.attach_mismatch; run.attach_allow_mismatch=true)"])
    before = error_table(rows, packaged())
    calib = load_calibration("atlas_800i_a2", out)
    assert calib["fit"]["error_before"] == before
    assert sorted(calib["fit"]["runs"]) == sorted(r.id for r in rows)
    assert calib["fit"]["prior_strength"] == 0.0  # --prior-strength 0: the plain fit, which recovers the truth
    after = calib["measured_error"]["all"]
    assert before["output_throughput"]["mape_percent"] > 20  # the packaged constants are off for this cluster
    for m in ("output_throughput", "median_tpot_ms", "median_ttft_ms"):
        assert after[m]["rows"] == 4 and after[m]["mape_percent"] <= 1.0, after
    # The errors written are the fitted constants' own (a 0.6B model does not tell GEMM from memory efficiency apart,
    # so the constants themselves are not unique: their errors are what is checked).
    assert error_table(rows, NpuConstants(**calib["constants"])) == after
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"before (atlas_800i_a2.yaml): output_throughput MAPE "
                               f"{before['output_throughput']['mape_percent']} %")
    assert lines[1].startswith(f"after (fitted): output_throughput MAPE {after['output_throughput']['mape_percent']} %")

    # A plan priced with it records which calibration it used: plan.json and the MLflow param.
    plan_run = run_ascendflow([*BASE, "run.mode=plan", f"hardware.calibration={out}"], cwd=tmp_path,
                              env={"MLFLOW_TRACKING_URI": uri}, timeout=300)
    assert plan_run.returncode == 0, plan_run.stderr[-3000:]
    perf = json.loads(next(tmp_path.glob("outputs/runs/*/*/plan.json")).read_text())["performance"]
    assert perf["calibration"] == str(out)
    assert perf["measured_error"]["file"] == (f"{out} (python -m ascendflow.perfmodel.fit, in-sample on 4 run(s) of "
                                              "npu-cluster)")
    (run,) = [r for r in client.search_runs([client.get_experiment_by_name("ascendflow").experiment_id])]
    assert run.data.params["perf.calibration"] == str(out)


def test_fit_refuses_an_unknown_experiment_in_one_line(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = subprocess.run([sys.executable, "-m", "ascendflow.perfmodel.fit", "--experiment", "nope",
                           "--tracking-uri", uri, "--out", str(tmp_path / "c.yaml")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"error: --experiment='nope': no such experiment in {uri}; experiments "
                                        "there: ['Default']"]
    assert not (tmp_path / "c.yaml").exists()


def test_fit_refuses_a_negative_prior_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "ascendflow.perfmodel.fit", "--experiment", "any",
                           "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--out", str(tmp_path / "c.yaml"),
                           "--prior-strength", "-1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["error: --prior-strength=-1.0: must be >= 0 (0: no prior, inf: keep the start "
                                        "constants)"]
    assert not (tmp_path / "c.yaml").exists() and not (tmp_path / "mlflow.db").exists()
