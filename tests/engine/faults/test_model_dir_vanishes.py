"""A model directory removed while its engine starts (issue 25 row 12): a real engine started on a copy of the
SmolLM2 weights, the copy removed as soon as the engine's log appears."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ascendflow.models.smollm2 import ensure_smollm2
from ascendflow.runner.engine_log import failure_cause
from tests.helpers import leftover_engine_processes, wait_for


def test_a_model_directory_removed_while_the_engine_starts_says_the_path_is_gone(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(ensure_smollm2(), model)
    proc = subprocess.Popen([sys.executable, "-m", "ascendflow", "model=local", f"model.path={model}",
                             "run.mode=serve", "tracking=none", "workload.num_prompts=4"], cwd=tmp_path,
                            env=dict(os.environ), stdout=open(tmp_path / "stdout.txt", "w"),
                            stderr=open(tmp_path / "stderr.txt", "w"))
    try:
        log = wait_for(lambda: next(iter(tmp_path.glob("outputs/runs/*/*/engine.log")), None), 300, "engine.log")
        shutil.rmtree(model)  # the engine has just been started: vLLM has not read config.json yet
        started = time.monotonic()
        assert proc.wait(timeout=400) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"engine failed {time.monotonic() - started:.0f} s after the removal")
    cause = failure_cause(log.read_text(errors="replace"))
    assert cause is not None  # vLLM's own message (its wording depends on when it looked for the directory)
    assert (tmp_path / "stderr.txt").read_text().strip().splitlines() == [
        f"error: engine exited with code 1 before it was healthy: the model directory {model} is gone: it was "
        "removed, moved or unmounted after the run checked it; put it back (or point model.path at a copy) and run "
        f"again (vLLM: {cause}) (log: {log})"]
    assert leftover_engine_processes(log.parent) == []
