"""``python -m ascendflow.compare``: group-option and dict-valued sweeps get their columns; an unknown run id is one
line and exit 2. Real plan-only sweeps recorded in a real SQLite store."""

from __future__ import annotations

import csv
import subprocess
import sys

from tests.conftest import run_ascendflow
from tests.helpers import mlflow_runs

NPU = ["run.mode=plan", "hardware=atlas_800i_a2", "model=qwen3_0_6b"]


def _compare(args: list[str], cwd, uri: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ascendflow.compare", *args, "--tracking-uri", uri], cwd=cwd,
                          text=True, capture_output=True, timeout=300)


def test_group_option_and_dict_sweeps_show_their_columns_and_unknown_ids_are_one_line(tmp_path, mlflow_uri):
    env = {"MLFLOW_TRACKING_URI": mlflow_uri}
    groups = run_ascendflow(["-m", *NPU, "graph=eager,compiled"], cwd=tmp_path, env=env)
    assert groups.returncode == 0, groups.stderr[-2000:]
    out = _compare(["--out", str(tmp_path / "g")], tmp_path, mlflow_uri)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = list(csv.DictReader(open(tmp_path / "g" / "comparison.csv")))
    assert [(r["run"], r["graph"]) for r in rows] == [("graph=eager", "eager"), ("graph=compiled", "compiled")]

    dicts = run_ascendflow(["-m", *NPU, "+ascend.env={FLAG_A: 1},{FLAG_A: 2, FLAG_B: x}"], cwd=tmp_path, env=env)
    assert dicts.returncode == 0, dicts.stderr[-2000:]
    out = _compare(["--out", str(tmp_path / "d")], tmp_path, mlflow_uri)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = list(csv.DictReader(open(tmp_path / "d" / "comparison.csv")))
    assert [(r["ascend.env.FLAG_A"], r["ascend.env.FLAG_B"]) for r in rows] == [("1", ""), ("2", "x")]

    unknown = _compare(["0123456789abcdef0123456789abcdef"], tmp_path, mlflow_uri)
    assert (unknown.returncode, unknown.stderr.strip()) == (
        2, "error: no run 0123456789abcdef0123456789abcdef in this store (pass a sweep's parent run id or an "
           "experiment name)")
    child = next(r for r in mlflow_runs(mlflow_uri) if "mlflow.parentRunId" in r.data.tags)
    not_parent = _compare([child.info.run_id], tmp_path, mlflow_uri)
    assert not_parent.returncode == 2 and "is not a sweep's parent run" in not_parent.stderr
