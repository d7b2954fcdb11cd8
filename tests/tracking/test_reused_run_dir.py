"""A run started into a run directory that holds an earlier run's files records only what it wrote: the earlier files
are set aside into ``previous/<time>/`` and never uploaded (``ascendflow.tracking.run_dir``). Real processes, plan
mode (no engine); the passing run is the README's TP16-over-two-nodes command, named from its effective layout."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from ascendflow.job_inputs import job_inputs, layout_name
from ascendflow.schema.parallel import ParallelSpec
from ascendflow.tracking.run_dir import set_aside_earlier_outputs
from tests.conftest import CONF, run_ascendflow
from tests.helpers import artifact_paths, mlflow_runs

HYDRA = {".hydra/config.yaml", ".hydra/hydra.yaml", ".hydra/overrides.yaml", "__main__.log"}
BAD = ["run.mode=plan", "engine.max_num_seqs=0"]  # refused by the schema: exit 2, the run FAILED
README_TP16 = ["hardware=atlas_800i_a2", "model=qwen3_235b_a22b", "quantization=w8a8_ascend", "parallel.nodes=2",
               "parallel.tensor_parallel_size=16", "parallel.enable_expert_parallel=true"]


def test_failing_passing_failing_runs_in_one_run_dir_each_record_only_their_own_files(tmp_path, mlflow_uri):
    run_dir = tmp_path / "fixed"
    env = {"MLFLOW_TRACKING_URI": mlflow_uri}
    first = run_ascendflow([*BAD, f"hydra.run.dir={run_dir}"], cwd=tmp_path, env=env)
    assert first.returncode == 2, first.stderr[-2000:]
    second = run_ascendflow([*README_TP16, f"hydra.run.dir={run_dir}"], cwd=tmp_path, env=env)
    assert second.returncode == 0, second.stderr[-2000:]
    third = run_ascendflow([*BAD, f"hydra.run.dir={run_dir}"], cwd=tmp_path, env=env)
    assert third.returncode == 2, third.stderr[-2000:]

    runs = sorted(mlflow_runs(mlflow_uri), key=lambda r: r.info.start_time)
    assert [(r.info.run_name, r.info.status) for r in runs] == [
        ("smollm2_135m-cpu-single", "FAILED"),
        ("qwen3_235b_a22b-atlas_800i_a2-tp16-ep-2nodes", "FINISHED"),
        ("smollm2_135m-cpu-single", "FAILED")]
    plan_files = {"plan.json", "result.json", "launch/node0.sh", "launch/node1.sh", "launch/lws.yaml",
                  "launch/preflight.sh"}
    assert [artifact_paths(mlflow_uri, r.info.run_id) for r in runs] == [
        HYDRA | {"error.txt"}, HYDRA | plan_files, HYDRA | {"error.txt"}]

    # The directory holds the last run's files; the earlier two are set aside, oldest first, nothing lost.
    assert sorted(p.name for p in run_dir.iterdir()) == [".hydra", "__main__.log", "error.txt", "previous"]
    earlier = sorted((run_dir / "previous").iterdir())
    assert [sorted(p.name for p in d.iterdir()) for d in earlier] == [
        ["error.txt"], ["launch", "plan.json", "result.json"]]
    assert "engine.max_num_seqs=0" in (earlier[0] / "error.txt").read_text()
    # The passing run's summary points at its run directory and says where the earlier run's files went.
    assert f"run directory: {run_dir}" in second.stdout
    assert f"an earlier run's files there were moved to {earlier[0]} (not recorded with this run)" in " ".join(
        second.stdout.split())


@pytest.mark.parametrize(("overrides", "layout"), [
    (["+recipe=qwen3_235b_tp16_2nodes"], "tp16-ep-2nodes"),
    (README_TP16, "tp16-ep-2nodes"),
    (["+recipe=qwen3_235b_tp8pp2_2nodes"], "tp8-pp2-ep-2nodes"),
    (["+recipe=deepseek_r1"], "tp8-dp2-ep-2nodes"),
    ([], "single"),
])
def test_the_run_name_layout_comes_from_the_effective_parallel_values(overrides, layout):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    inputs = job_inputs(cfg)
    assert inputs.error is None, inputs.error
    assert inputs.layout == layout


def test_layout_names():
    assert layout_name(ParallelSpec(tensor_parallel_size=8, data_parallel_size=2, enable_expert_parallel=True,
                                    nodes=2)) == "tp8-dp2-ep-2nodes"
    assert layout_name(ParallelSpec(tensor_parallel_size=4)) == "tp4"
    assert layout_name(ParallelSpec(data_parallel_size=2)) == "tp1-dp2"
    assert layout_name(None) is None


def test_a_run_dir_holding_the_working_directory_is_left_as_it_is(tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text("the user's own file\n")
    monkeypatch.chdir(tmp_path)
    assert set_aside_earlier_outputs(tmp_path, keep=(".hydra",)) is None
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"]
