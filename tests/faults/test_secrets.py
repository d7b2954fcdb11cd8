"""Secrets are never written: plan.json and launch scripts reference ${NAME}, the Hydra copies, every other file of
the run directory, the sweep directory and every MLflow param, tag and artifact show a mask. Bad env names: one line."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import run_ascendflow
from tests.helpers import mlflow_runs, read_json, single_run_dir

TOKEN = "hf_S3cretTokenValue_0123456789"
MARKED = "plain-looking-but-marked-secret"
API_KEY = "sk-ascendflow-test-key-42"
NPU_PLAN = ["hardware=atlas_800i_a2", "model=qwen3_0_6b", "run.mode=plan", f"+ascend.env.HF_TOKEN={TOKEN}",
            f"+ascend.env.MY_SETTING={MARKED}", "ascend.secret_env=[MY_SETTING]", "+ascend.env.VISIBLE_FLAG=on",
            "run.api_key_env=AF_TEST_API_KEY"]


def _files_with(root: Path, values: list[str]) -> list[str]:
    """Files under ``root`` whose bytes contain any of ``values``."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and any(v.encode() in p.read_bytes() for v in values))


def _mlflow_leaks(uri: str, tmp: Path, values: list[str]) -> list[str]:
    """Params, tags and downloaded artifacts of every run of the store that contain a secret value."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    leaks = []
    for run in mlflow_runs(uri):
        for kind, items in (("param", run.data.params), ("tag", run.data.tags)):
            leaks += [f"{run.info.run_id} {kind} {k}" for k, v in items.items() if any(s in v or s in k for s in values)]
        local = Path(client.download_artifacts(run.info.run_id, "", str(tmp / run.info.run_id)))
        leaks += [f"{run.info.run_id} artifact {p}" for p in _files_with(local, values)]
    return leaks


def test_secret_env_values_are_referenced_and_masked_everywhere(tmp_path, mlflow_uri):
    work = tmp_path / "work"
    work.mkdir()
    proc = run_ascendflow(NPU_PLAN, cwd=work, env={"MLFLOW_TRACKING_URI": mlflow_uri, "AF_TEST_API_KEY": API_KEY})
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = single_run_dir(work)
    plan = read_json(run_dir / "plan.json")
    assert {k: plan["env"][k] for k in ("HF_TOKEN", "MY_SETTING", "VISIBLE_FLAG", "VLLM_API_KEY")} == {
        "HF_TOKEN": "${HF_TOKEN}", "MY_SETTING": "${MY_SETTING}", "VISIBLE_FLAG": "on",
        "VLLM_API_KEY": "${AF_TEST_API_KEY}"}
    script = (run_dir / "launch" / "node0.sh").read_text()
    assert ': "${HF_TOKEN:?set HF_TOKEN (a secret or API key: export it on the node; ascendflow never writes its ' \
           'value)}"' in script
    assert 'export VLLM_API_KEY="${AF_TEST_API_KEY}"' in script and "--api-key" not in script
    secrets = [TOKEN, MARKED, API_KEY]
    assert _files_with(run_dir, secrets) == []
    assert _files_with(work / "outputs", secrets) == []  # the store and artifact copies too
    assert "***" in (run_dir / ".hydra" / "overrides.yaml").read_text()
    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FINISHED"
    assert {k: run.data.params[k] for k in ("ascend.env.HF_TOKEN", "ascend.env.MY_SETTING",
                                            "ascend.env.VISIBLE_FLAG", "run.api_key_env")} == {
        "ascend.env.HF_TOKEN": "***", "ascend.env.MY_SETTING": "***", "ascend.env.VISIBLE_FLAG": "on",
        "run.api_key_env": "AF_TEST_API_KEY"}
    assert _mlflow_leaks(mlflow_uri, tmp_path / "dl", secrets) == []
    assert _files_with(tmp_path, secrets) == []  # everything: run dir, store database, artifact copies, downloads

    # The launch script refuses to start while a referenced secret is unset (before exec'ing any server).
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "MY_SETTING", "AF_TEST_API_KEY")}
    refused = subprocess.run(["bash", str(run_dir / "launch" / "node0.sh")], env=env, capture_output=True, text=True,
                             timeout=30)
    assert refused.returncode == 1
    assert "AF_TEST_API_KEY: set AF_TEST_API_KEY (a secret or API key" in refused.stderr


def test_a_sweep_masks_secrets_in_the_sweep_directory_parent_run_and_terminal(tmp_path, mlflow_uri):
    # Hydra's launcher logs each job's overrides (`#0 : ...`): the secret ones, swept too, show the mask there.
    work = tmp_path / "work"
    work.mkdir()
    swept = ["pw_Sweep0ne_value", "pw_SweepTw0_value"]
    proc = run_ascendflow(["-m", *NPU_PLAN, f"+ascend.env.DB_PASSWORD={','.join(swept)}"], cwd=work,
                          env={"MLFLOW_TRACKING_URI": mlflow_uri, "AF_TEST_API_KEY": API_KEY})
    assert proc.returncode == 0, proc.stderr[-3000:]
    secrets = [TOKEN, MARKED, API_KEY, *swept]
    echoed = [line for line in (proc.stdout + proc.stderr).splitlines() if " : " in line and "#" in line]
    assert len(echoed) == 2 and all(f"+ascend.env.HF_TOKEN=*** +ascend.env.MY_SETTING=***" in line
                                    and line.endswith("+ascend.env.DB_PASSWORD=***") for line in echoed), echoed
    assert not [s for s in secrets if s in proc.stdout + proc.stderr]
    assert len(list(work.glob("outputs/multirun/*/*/*/plan.json"))) == 2
    assert _files_with(work / "outputs", secrets) == []
    assert sorted(r.info.status for r in mlflow_runs(mlflow_uri)) == ["FINISHED"] * 3
    # two jobs that differ only by the secret keep distinct names (found by the new-user trial)
    assert sorted(r.info.run_name for r in mlflow_runs(mlflow_uri) if r.data.tags.get("mlflow.parentRunId")) == [
        "+ascend.env.DB_PASSWORD=*** (job 0)", "+ascend.env.DB_PASSWORD=*** (job 1)"]
    assert _mlflow_leaks(mlflow_uri, tmp_path / "dl", secrets) == []
    assert _files_with(tmp_path, secrets) == []


def test_env_names_bash_or_mlflow_reject_are_one_line_errors(tmp_path, mlflow_uri):
    bad = run_ascendflow(["run.mode=plan", "+ascend.env={a@b: 1}"], cwd=tmp_path,
                         env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == (
        "error: ascend.env='a@b': is not a valid environment variable name (letters, digits and _, not starting "
        "with a digit, at most 128 characters); rename it")
    long_name = "A" * 240
    untracked = run_ascendflow(["run.mode=plan", "tracking=none", f"+ascend.env.{long_name}=1"], cwd=tmp_path)
    assert untracked.returncode == 2
    assert f"error: ascend.env='{'A' * 60}…(240 characters)': is not a valid environment" in untracked.stderr
    assert list(tmp_path.glob("outputs/runs/*/*/launch")) == []


def test_list_or_dict_env_values_are_refused_and_a_secret_one_is_never_written(tmp_path, mlflow_uri):
    # Found by the new-user trial: a list-valued secret reached .hydra/ and the MLflow artifacts in clear.
    secret = "s3cr3tZQ6list"
    proc = run_ascendflow(["+recipe=qwen3_0_6b", f"+ascend.env.MY_PASSWORD=[{secret},x]",
                           f"tracking.tracking_uri={mlflow_uri}"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error")]  # (MLflow's store notices aside)
    assert lines == ["error: ascend.env.MY_PASSWORD='***': must be a single string or number (a launch "
                     "script exports one string per variable); quote it as one string"]
    assert secret not in proc.stdout + proc.stderr
    leaks = [p for p in tmp_path.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaks == []
    proc = run_ascendflow(["+recipe=qwen3_0_6b", "+ascend.env={A: {b: 1}}", "tracking=none"], cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 2 and "ascend.env.A={'b': 1}: must be a single string" in proc.stderr


def test_env_values_reach_the_engine_on_the_cpu_target_too(tmp_path):
    # Found by the new-user trial: on hardware=cpu, +ascend.env.* was dropped from the plan (the engine never saw it).
    proc = run_ascendflow(["run.mode=plan", "tracking=none", f"+ascend.env.HF_TOKEN={TOKEN}", "+ascend.env.AF_PROBE=on"],
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = single_run_dir(tmp_path)
    assert read_json(run_dir / "plan.json")["env"] == {"VLLM_LOGGING_LEVEL": "INFO", "HF_TOKEN": "${HF_TOKEN}",
                                                       "AF_PROBE": "on"}
    script = (run_dir / "launch" / "node0.sh").read_text()
    assert ': "${HF_TOKEN:?set HF_TOKEN (a secret or API key' in script and "export AF_PROBE=on" in script
    assert _files_with(tmp_path, [TOKEN]) == []
    # What a served run starts the engine with (runner/server.py engine_env, used by every local launch).
    from ascendflow.compiler import Plan
    from ascendflow.runner.server import engine_env

    plan = Plan.model_validate_json((run_dir / "plan.json").read_text())
    env = engine_env(plan, run_dir, {"HF_TOKEN": TOKEN})
    assert (env["HF_TOKEN"], env["AF_PROBE"], env["VLLM_LOGGING_LEVEL"]) == (TOKEN, "on", "INFO")
