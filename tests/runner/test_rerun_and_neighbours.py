"""A run's ``bench_command.txt`` reruns beside the record and names what it needs (issue 20, row 12m); other
ascendflow engines live on the host are seen (row 12l). Real bash, real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ascendflow.runner.bench import RERUN_RESULT, bench_argv, bench_command_text
from ascendflow.runner.neighbours import concurrency_warning, other_engine_runs
from ascendflow.runner.server import RUN_DIR_ENV
from tests.conftest import plan_for


def test_bench_command_writes_beside_the_record_and_needs_the_key_by_name(tmp_path):
    spec, _ = plan_for(["run.mode=plan", "run.api_key_env=AF_RERUN_KEY"])
    args = bench_argv(spec.workload, base_url="http://127.0.0.1:41234", served_model_name="m", tokenizer="t",
                      run_dir=tmp_path)
    text = bench_command_text(args, sys.executable, "AF_RERUN_KEY")
    command = text.splitlines()[-1]
    assert f"--result-filename {RERUN_RESULT}" in command and "benchmark.json" not in command
    assert "serve_command.txt" in text and "http://127.0.0.1:41234" in text and "AF_RERUN_KEY" in text
    env = {k: v for k, v in os.environ.items() if k != "AF_RERUN_KEY"}
    # Without the variable, bash stops before the client starts and names it.
    done = subprocess.run(["bash", "-c", text], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "AF_RERUN_KEY: export AF_RERUN_KEY (the API key)" in done.stderr, done.stderr
    assert not (tmp_path / "benchmark.json").exists() and not (tmp_path / RERUN_RESULT).exists()
    no_key = bench_command_text(args, sys.executable, None)
    assert "OPENAI_API_KEY" not in no_key and "API key" not in no_key


def test_another_run_s_engine_process_is_seen_and_this_run_s_is_not(tmp_path):
    other, mine = tmp_path / "other_run", tmp_path / "my_run"
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              env={**os.environ, RUN_DIR_ENV: str(d)}) for d in (other, mine)]
    try:
        seen = other_engine_runs(mine)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert str(other) in seen and str(mine) not in seen
    assert str(other) not in other_engine_runs(mine)  # gone once the process is
    line = concurrency_warning({str(other)})
    assert "1 other ascendflow engine(s)" in line and "concurrent_engines=1" in line and "\n" not in line
