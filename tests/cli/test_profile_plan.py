"""``run.profile=true`` on plan runs: nothing is profiled, one warning line says so, and an Ascend plan's launch
scripts carry the release's profiler switch.

Moved from ``tests/profiling/test_profile_run.py`` (issue 24 item 4): a plan run starts no engine. The profiled
served run is ``tests/engine/profiling/test_profile_run.py``.
"""

from __future__ import annotations

from pathlib import Path

from tests.cli.inprocess import run_in_process


def test_plan_only_run_says_it_is_not_profiled(tmp_path: Path) -> None:
    proc = run_in_process(["run.profile=true", "run.mode=plan", "tracking=none"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "warning: run.profile=true: this plan run is not profiled here; only served runs are profiled" in proc.stdout
    # An Ascend plan: the launch scripts carry the release's profiler switch instead, and the line says so.
    proc = run_in_process(["+recipe=qwen3_32b_w8a8", "run.profile=true", "tracking=none"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert ("warning: run.profile=true: this plan run is not profiled here; the launch scripts carry vLLM's profiler "
            "switch (traces in ./vllm_profile on the node") in proc.stdout
    (script,) = sorted(tmp_path.glob("outputs/runs/*/*/launch/node0.sh"))[-1:]
    assert "--profiler-config '{\"profiler\":\"torch\",\"torch_profiler_dir\":\"./vllm_profile\"}'" in script.read_text()
