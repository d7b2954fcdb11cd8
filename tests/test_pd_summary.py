"""A PD plan's end-of-run summary labels each prediction (issue 25 row 7): the co-located prediction of the decode
role's engine, each role's rate per instance, and the planned P:D."""

from __future__ import annotations

from tests.conftest import run_ascendflow


def test_a_pd_plan_s_summary_labels_the_co_located_and_the_per_role_predictions(tmp_path):
    # Before: one "perf model" row (1039 tok/s, TTFT 218 ms: the decode role's engine serving the whole workload
    # co-located) printed beside the P:D line planning 79.66 req/s, nothing saying which was which.
    proc = run_ascendflow(["+recipe=deepseek_r1_pd_2p1d", "run.mode=plan", "tracking=none"], cwd=tmp_path,
                          env={"COLUMNS": "400"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 2 and cells[0]:
            rows[cells[0]] = cells[1]
    assert [k for k in rows if k.startswith("perf model")] == [
        "perf model (co-located)", "perf model (prefill)", "perf model (decode)", "perf model (P:D)"]
    assert rows["perf model (co-located)"] == (
        "the decode role's engine alone serving prefill and decode (not this PD deployment): predicted 971 tok/s "
        "(236–2,281), TPOT median 30.8 ms (19.9–84.2), TTFT median 300 ms (127–783) (NPU step model "
        "(ascendflow/perfmodel/npu.py), calibration atlas_800i_a3.yaml; 80 % interval of class atlas_a2_a3)")
    assert rows["perf model (prefill)"] == ("41.97 req/s per prefill instance within p99 TTFT ≤ 2000 ms (median TTFT "
                                            "366 ms, p99 TTFT 856 ms)")
    assert rows["perf model (decode)"] == ("161.10 req/s per decode instance within p99 TPOT ≤ 150 ms (median TPOT "
                                           "51 ms, p99 TPOT 55 ms)")
    assert rows["perf model (P:D)"] == ("planned 2:1 (2 prefill, 1 decode instance(s)): 83.94 req/s, prefill-bound; "
                                        "recommended 4:1")
