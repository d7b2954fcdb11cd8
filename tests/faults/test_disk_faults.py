"""Full and read-only disks (issue 20 rows 4, 5), a misspelt group option in a sweep (row 6), and read-only commands
that create nothing (row 12g). Real file systems: a small ``tmpfs`` and a read-only bind mount (root only: skipped
with the reason otherwise), real ``python -m ascendflow`` processes."""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ascendflow.tracking.outputs import MIN_FREE_BYTES, OutputsError, check_writable, output_dirs
from tests.conftest import run_ascendflow


@contextlib.contextmanager
def mounted(target: Path, *how: list[str]):
    """Run the ``mount`` commands ``how`` on ``target`` (created), unmount it afterwards; skip when not allowed."""
    target.mkdir(parents=True, exist_ok=True)
    for argv in how:
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", str(target)], capture_output=True)
            pytest.skip(f"cannot mount here ({' '.join(argv)}: {done.stderr.strip()}); needs root")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def tmpfs(target: Path, size: str):
    return mounted(target, ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)])


def read_only(target: Path):
    return mounted(target, ["mount", "--bind", str(target), str(target)],
                   ["mount", "-o", "remount,bind,ro", str(target)])


def test_read_only_and_full_outputs_are_one_line_before_hydra_writes(tmp_path):
    # Row 5: a three-exception Hydra traceback; row 4 (at start): ~550 lines of SQLAlchemy tracebacks.
    ro = tmp_path / "ro"
    with read_only(ro / "outputs"):
        proc = run_ascendflow(["run.mode=plan"], cwd=ro, timeout=300)
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines() == [
            f"error: outputs/ is not writable (read-only file system at {ro / 'outputs'}); remount it read-write or "
            "run from a writable directory (or set hydra.run.dir=<writable directory>)"]
        # A sweep is guarded the same way (its sweep directory under outputs/).
        proc = run_ascendflow(["-m", "run.mode=plan", "engine.seed=0,1"], cwd=ro, timeout=300)
        assert proc.returncode == 2 and proc.stderr.startswith("error: outputs/ is not writable (read-only")
        # Elsewhere with hydra.run.dir and a server store: outputs/ is not used, so the run goes on (rc 2 only for
        # the unreachable store, after Hydra wrote its copies into the writable directory).
        proc = run_ascendflow(["run.mode=plan", f"hydra.run.dir={tmp_path / 'elsewhere'}", "tracking.enabled=false"],
                              cwd=ro, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert (tmp_path / "elsewhere" / "plan.json").is_file()
    full = tmp_path / "full"
    with tmpfs(full / "outputs", "2m"):
        proc = run_ascendflow(["run.mode=plan"], cwd=full, timeout=300)
        assert proc.returncode == 2
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(f"error: outputs/ is on a full disk: disk full (2.0 MiB free at {full / 'outputs'}; "
                               f"a run needs {MIN_FREE_BYTES >> 20} MiB)"), line
        assert list((full / "outputs").iterdir()) == []  # nothing written


def test_a_store_that_fills_during_the_run_ends_it_failed_with_one_line(tmp_path):
    # Row 4 (mid-run): the run was left RUNNING, the useful line buried under SQLAlchemy tracebacks. The disk is
    # filled by a real second writer while the runner is held (SIGSTOP) right after it wrote plan.json.
    work = tmp_path / "work"
    with tmpfs(work / "outputs", "12m"):
        env = {k: v for k, v in os.environ.items() if k not in ("HYDRA_FULL_ERROR", "MLFLOW_TRACKING_URI")}
        proc = subprocess.Popen([sys.executable, "-m", "ascendflow", "run.mode=plan"], cwd=work, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 300
        while not glob.glob(str(work / "outputs/runs/*/*/plan.json")) and proc.poll() is None:
            assert time.monotonic() < deadline, "no plan.json"
            time.sleep(0.01)
        if proc.poll() is not None:
            pytest.fail(f"the run ended (rc {proc.returncode}) before the disk could be filled under it")
        os.kill(proc.pid, signal.SIGSTOP)
        subprocess.run(["dd", "if=/dev/zero", f"of={work / 'outputs' / 'filler'}", "bs=1M", "count=64"],
                       capture_output=True)
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=300)
        db = work / "outputs" / "mlflow" / "mlflow.db"
        assert proc.returncode == 1, err[-3000:]
        (line,) = [x for x in err.splitlines() if x.strip()]
        assert line.startswith(f"error: the MLflow store {db} cannot be written: disk full ("), line
        assert "Traceback" not in out + err and "SQLAlchemy" not in out + err
        statuses = sqlite3.connect(db).execute("select status from runs").fetchall()
        assert statuses == [("FAILED",)]
        (run_dir,) = [Path(p) for p in glob.glob(str(work / "outputs/runs/*/*"))]
        assert (run_dir / "error.txt").read_text().startswith(f"the MLflow store {db} cannot be written: disk full")
        assert not list(db.parent.glob("mlflow.db.reserve-*"))  # the reserve was given back


def test_a_misspelt_group_option_in_a_sweep_is_one_line_before_anything_is_recorded(tmp_path):
    # Row 6: Hydra's 25-line block, a FAILED parent with no children, the valid job never ran.
    proc = run_ascendflow(["-m", "run.mode=plan", "model=smolm2,smollm2_135m"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: model='smolm2': is not an option of the 'model' group, so no job could use it; "
                           "pick from: "), line
    assert "smollm2_135m" in line
    assert not (tmp_path / "outputs").exists()  # no sweep directory, no MLflow store, no parent run


def test_compare_without_a_store_creates_nothing(tmp_path):
    # Row 12g: compare created outputs/mlflow/mlflow.db before saying there was nothing to compare.
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    proc = subprocess.run([sys.executable, "-m", "ascendflow.compare"], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: no MLflow store at {tmp_path.resolve() / 'outputs/mlflow/mlflow.db'} (nothing was recorded here yet): "
        "run `python -m ascendflow` first, or pass --tracking-uri / set MLFLOW_TRACKING_URI to the store"]
    assert list(tmp_path.iterdir()) == []


def test_output_dirs_follow_hydra_overrides_and_the_store(tmp_path):
    env: dict[str, str] = {}
    assert output_dirs(["run.mode=plan"], tmp_path, env) == {"outputs/": tmp_path / "outputs"}
    assert output_dirs(["hydra.run.dir=/x/${now:%H}", "tracking.enabled=false"], tmp_path, env) == {"/x/": Path("/x/")}
    assert output_dirs(["-m", "hydra.sweep.dir=sw"], tmp_path, env) == {"sw/": tmp_path / "sw",
                                                                         "outputs/": tmp_path / "outputs"}
    assert output_dirs(["hydra.run.dir=r"], tmp_path, {"MLFLOW_TRACKING_URI": "http://h:1"}) == {"r/": tmp_path / "r"}
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputsError, match="is a file, not a directory"):
        check_writable(tmp_path / "afile" / "runs", "afile/")
    with pytest.raises(OutputsError, match=r"disk full \(.* MiB free at "):
        check_writable(tmp_path, "outputs/", need_bytes=1 << 62)
    check_writable(tmp_path / "not" / "yet", "outputs/")  # a directory Hydra will create: its parent is checked
