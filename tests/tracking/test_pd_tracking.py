"""One MLflow run per PD deployment: per-role params and predictions from a plan-mode run into a file store (no
engine; the store a sqlite file), and `python -m ascendflow.compare` showing the roles side by side."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ascendflow.compare import main as compare_main
from tests.conftest import run_ascendflow


@pytest.fixture(scope="module")
def pd_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pd_tracking")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"  # a store in a file (MLflow >= 3.13 refuses plain file stores)
    proc = run_ascendflow(["+recipe=deepseek_r1_pd_2p1d", "run.mode=plan", f"tracking.tracking_uri={uri}",
                           f"hydra.run.dir={tmp / 'run'}"], cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    client = MlflowClient(tracking_uri=uri)
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert len(runs) == 1  # one run per PD deployment
    return proc, runs[0], uri, tmp


def test_plan_prints_the_ratio(pd_run):
    out = " ".join(pd_run[0].stdout.split())
    assert ("P:D = 4:1 (basis: NPU step model (ascendflow/perfmodel/npu.py), calibration atlas_800i_a3.yaml; ISL 256 "
            "/ OSL 128") in out
    assert "planned 2:1: 83.94 req/s, prefill-bound" in out


def test_role_params_and_predictions(pd_run):
    run = pd_run[1]
    params = {k: v for k, v in run.data.params.items() if k.startswith(("prefill.", "decode.", "pd.recommended",
                                                                        "pd.ratio"))}
    assert params == {
        "prefill.kv_role": "kv_producer", "prefill.instances": "2", "prefill.nodes": "2",
        "prefill.tensor_parallel_size": "8", "prefill.data_parallel_size": "2", "prefill.enable_expert_parallel": "True",
        "prefill.dp_launch": "external", "prefill.max_num_seqs": "8", "prefill.max_num_batched_tokens": "16384",
        "prefill.gpu_memory_utilization": "0.9", "prefill.max_model_len": "40000",
        "prefill.num_speculative_tokens": "1", "prefill.cudagraph_mode": "NONE", "prefill.enforce_eager": "True",
        "prefill.cudagraph_capture_sizes": "none", "prefill.kv_cache_tokens": "135463",
        "prefill.kv_cache_blocks": "1060",
        "decode.kv_role": "kv_consumer", "decode.instances": "1", "decode.nodes": "2",
        "decode.tensor_parallel_size": "1", "decode.data_parallel_size": "32", "decode.enable_expert_parallel": "True",
        "decode.dp_launch": "external", "decode.max_num_seqs": "40", "decode.max_num_batched_tokens": "256",
        "decode.gpu_memory_utilization": "0.94", "decode.max_model_len": "40000",
        "decode.num_speculative_tokens": "1", "decode.cudagraph_mode": "FULL_DECODE_ONLY",
        "decode.enforce_eager": "False", "decode.cudagraph_capture_sizes": "2,4,8,16,24,32,40,48,56,64,72,80",
        "decode.kv_cache_tokens": "231948", "decode.kv_cache_blocks": "1815",
        "pd.recommended_ratio": "4:1",
        "pd.ratio_basis": "NPU step model (ascendflow/perfmodel/npu.py), calibration atlas_800i_a3.yaml"}
    metrics = {k: v for k, v in run.data.metrics.items() if k.startswith("predicted.")}
    assert metrics == {
        "predicted.prefill.capacity_rps": 41.971, "predicted.prefill.median_ttft_ms": 366.184,
        "predicted.prefill.p99_ttft_ms": 855.912, "predicted.decode.capacity_rps": 161.0989,
        "predicted.decode.median_tpot_ms": 50.742, "predicted.decode.p99_tpot_ms": 55.335,
        "predicted.decode.output_throughput": 18568.416, "predicted.pd.prefill_instances": 4.0,
        "predicted.pd.decode_instances": 1.0, "predicted.pd.planned_throughput_rps": 83.942}


def test_compare_shows_roles_side_by_side(pd_run, capsys):
    _, run, uri, tmp = pd_run
    assert compare_main([run.info.run_id, "--tracking-uri", uri, "--out", str(tmp / "cmp")]) == 0
    lines = [" ".join(line.replace("│", " ").split()) for line in capsys.readouterr().out.splitlines()]
    assert "prefill decode" in [" ".join(line.replace("┃", " ").split()) for line in lines]
    for row in ("instances 2 1", "TP 8 1", "DP 2 32", "max_num_seqs 8 40", "max_batched_tokens 16384 256",
                "graph NONE FULL_DECODE_ONLY", "capture sizes none 12 (2…80)", "KV tokens/rank 135463 231948",
                "pred req/s/inst 41.97 161.10", "pred p99 TTFT ms 855.91 —", "pred p99 TPOT ms — 55.34",
                "P:D rec 4:1 4:1"):
        assert row in lines
    assert (Path(tmp / "cmp" / "roles.csv").read_text().splitlines()[0] ==
            "run,role,instances,TP,DP,EP,max_num_seqs,max_batched_tokens,graph,capture sizes,KV tokens/rank,"
            "pred req/s/inst,pred p99 TTFT ms,pred p99 TPOT ms,P:D rec")
