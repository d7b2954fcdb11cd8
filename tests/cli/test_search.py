"""``run.mode=search`` through the CLI (in process): the table, the refusals by reason, the Pareto PNG, the top-k
recipes that plan again to the same plan hash, the MLflow parent with one child per candidate that
``ascendflow.compare`` reads, and each bad input as one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.inprocess import run_in_process
from tests.conftest import plan_for

#: A small space (2 TPs, one knob each, 2 graph modes) on 2 Atlas 800I A2 nodes: 16 candidates, under a second.
SMALL = ["run.mode=search", "hardware=atlas_800i_a2", "model=qwen3_8b", "search.nodes=2", "workload=random",
         "workload.random_input_len=1024", "workload.random_output_len=256", "slo.p99_ttft_ms=2000",
         "slo.p99_tpot_ms=50", "search.tensor_parallel_sizes=[2,8]", "search.pipeline_parallel_sizes=[1]",
         "search.max_num_seqs=[16]", "search.max_num_batched_tokens=[4096]",
         "search.graph_modes=[NONE,FULL_DECODE_ONLY]", "search.top_k=3"]


#: comparison.csv's columns for a search parent: the swept params, every predicted figure a child holds, then its
#: verdict and why (docs/search.md).
SEARCH_COLUMNS = [
    "run", "status", "kind", "layout", "cudagraph_mode", "max_num_seqs", "max_num_batched_tokens",
    "prefill_instances", "decode_instances", "predicted_capacity_rps", "predicted_rps_per_device",
    "predicted_tps_per_device", "predicted_tps_per_user", "predicted_p99_ttft_ms", "predicted_p99_tpot_ms",
    "predicted_margin_percent", "predicted_tps_low", "predicted_tps_high", "predicted_rank", "search.status",
    "search.reason"]


def _search_parent(mlflow_uri: str):
    """The search's MLflow parent run in the store (the one run tagged ``ascendflow.sweep = parent``)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_uri)
    return client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string="tags.`ascendflow.sweep` = 'parent'")[0]


def test_search_writes_table_recipes_and_children(tmp_path: Path, mlflow_uri: str) -> None:
    proc = run_in_process([*SMALL, f"tracking.tracking_uri={mlflow_uri}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "16 candidates enumerated (14 compiles, 14 capacity searches" in proc.stdout
    assert "; 0 infeasible\n" in proc.stdout
    assert "2 pruned: PD role config dominated (not in the top 3 by rate per instance on its nodes)" in proc.stdout
    out = next(tmp_path.glob("outputs/runs/*/*/search"))
    assert (out / "pareto.png").stat().st_size > 10_000
    rows = json.loads((out / "candidates.json").read_text())["candidates"]
    # the ranked order: the two co-located TP2 layouts (one instance of DP8, or two of DP4: the same per device), FDO
    # and eager alike (their steps beyond the capture sizes and prefill steps price at the same eager rate), and
    # the PD candidates tie with the best: the 80 % interval of tokens/s per device (class atlas_a2_a3 of
    # calibration/intervals.yaml, at split-conformal levels that reach the extreme family residuals) is wide enough
    # that 12 of the 14 overlap the best's
    assert [(r["label"], r["rank"], r["tie"]) for r in rows if r.get("rank")][:5] == [
        ("TP2xDP4 FDO s16 t4096 ×2 [none]", 1, False), ("TP2xDP4 eager s16 t4096 ×2 [none]", 1, True),
        ("TP2xDP8 FDO s16 t4096 ×1 [none]", 1, True), ("TP2xDP8 eager s16 t4096 ×1 [none]", 1, True),
        ("PD 1P(TP2xDP4 eager s16 t4096) 1D(TP2xDP4 FDO s16 t256) [none]", 1, True)]
    assert sorted({r["kind"] for r in rows}) == ["colocated", "pd"]
    recipes = sorted((out / "recipes" / "recipe").glob("*.yaml"))
    assert [p.stem for p in recipes] == ["search_1_colocated_tp2xdp4", "search_2_colocated_tp2xdp4",
                                         "search_3_colocated_tp2xdp8"]
    for path in recipes:  # each recipe plans again, on its own, to the plan the search wrote beside it
        _, plan = plan_for([f"+recipe={path.stem}", f"hydra.searchpath=[file://{out / 'recipes'}]"])
        assert plan.plan_hash == json.loads((out / "recipes" / path.stem / "plan.json").read_text())["plan_hash"]
        assert (out / "recipes" / path.stem / "launch" / "node0.sh").exists()
    assert "# rank 1 of 14 ranked by predicted goodput per device at TTFT p99 <= 2000 ms and TPOT p99 <= 50 ms" \
        in recipes[0].read_text()

    from ascendflow.compare import compare
    parent = _search_parent(mlflow_uri)
    table, csv, png = compare(parent.info.run_id, mlflow_uri, tmp_path / "compare")
    assert len(table) == 14 and csv.exists()
    assert list(table.columns) == SEARCH_COLUMNS
    assert sorted(table["run"])[:1] == ["PD 1P(TP2xDP4 eager s16 t4096) 1D(TP2xDP4 FDO s16 t256) [none]"]
    assert table["predicted_capacity_rps"].round(2).tolist()[:4] == [19.24, 19.24, 19.24, 19.24]


def test_compare_on_a_search_shows_predictions_and_reasons(tmp_path: Path, mlflow_uri: str) -> None:
    """``python -m ascendflow.compare`` on a search's parent (a real SQLite store): every predicted figure the children
    hold and their ``search.status`` / ``search.reason``, in the CSV and the terminal (docs/search.md). PP2 layouts
    are children too (``search.children=all``), not predicted, with their reason."""
    space = [a for a in SMALL if not a.startswith(("search.pipeline_parallel_sizes", "search.top_k"))]
    proc = run_in_process([*space, "search.pipeline_parallel_sizes=[1,2]", "search.top_k=1", "search.children=all",
                           f"tracking.tracking_uri={mlflow_uri}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    from ascendflow.compare import main, terminal_view
    parent = _search_parent(mlflow_uri)
    assert main([parent.info.run_id, "--tracking-uri", mlflow_uri, "--out", str(tmp_path / "compare")]) == 0
    import pandas as pd
    table = pd.read_csv(tmp_path / "compare" / "comparison.csv", dtype=str, keep_default_na=False)
    assert len(table) == 20
    assert list(table.columns) == SEARCH_COLUMNS
    rows = {r["run"]: r for r in table.to_dict("records")}
    assert rows["TP2xDP4 FDO s16 t4096 ×2 [none]"] == {
        "run": "TP2xDP4 FDO s16 t4096 ×2 [none]", "status": "FINISHED", "kind": "colocated", "layout": "TP2xDP4",
        "cudagraph_mode": "FULL_DECODE_ONLY", "max_num_seqs": "16", "max_num_batched_tokens": "4096",
        "prefill_instances": "", "decode_instances": "", "predicted_capacity_rps": "19.24391655390314",
        "predicted_rps_per_device": "1.2027447846189463", "predicted_tps_per_device": "307.90266486245025",
        "predicted_tps_per_user": "40.08016032064128", "predicted_p99_ttft_ms": "823.926",
        "predicted_p99_tpot_ms": "25.491", "predicted_margin_percent": "49.018",
        "predicted_tps_low": "74.83892602549285", "predicted_tps_high": "722.9295723083001",
        "predicted_rank": "1.0", "search.status": "ranked", "search.reason": ""}
    # PD: the plan's role_capacity and its interval (srchfix), after the re-scored corpus
    assert rows["PD 1P(TP8xDP1 eager s16 t4096) 1D(TP8xDP1 FDO s16 t256) [none]"] == {
        "run": "PD 1P(TP8xDP1 eager s16 t4096) 1D(TP8xDP1 FDO s16 t256) [none]", "status": "FINISHED", "kind": "pd",
        "layout": "1P:1D", "cudagraph_mode": "", "max_num_seqs": "", "max_num_batched_tokens": "",
        "prefill_instances": "1", "decode_instances": "1", "predicted_capacity_rps": "3.4682",
        "predicted_rps_per_device": "0.2167625", "predicted_tps_per_device": "55.4912",
        "predicted_tps_per_user": "61.87353050365054", "predicted_p99_ttft_ms": "356.661",
        "predicted_p99_tpot_ms": "16.219", "predicted_margin_percent": "67.562",
        "predicted_tps_low": "13.486675790959586", "predicted_tps_high": "130.28605615736336",
        "predicted_rank": "1.0", "search.status": "ranked", "search.reason": ""}
    assert {r["run"]: (r["search.status"], r["search.reason"], r["predicted_rank"]) for r in rows.values()
            if r["search.status"] != "ranked"} == {
        f"TP{tp}xPP2xDP{dp} {g} s16 t4096 ×{n} [none]": ("not predicted", "PP not modelled (pipeline_parallel_size=2)",
                                                        "")
        for tp, dp, n in ((2, 2, 2), (2, 4, 1), (8, 1, 1)) for g in ("eager", "FDO")}
    # the terminal keeps the swept params, the ranking figures and the verdict with its reason
    assert list(terminal_view(pd.read_csv(tmp_path / "compare" / "comparison.csv")).columns) == [
        "run", "status", "kind", "layout", "cudagraph_mode", "max_num_seqs", "max_num_batched_tokens",
        "prefill_instances", "decode_instances", "predicted_capacity_rps", "predicted_tps_per_device",
        "predicted_tps_per_user", "predicted_p99_ttft_ms", "predicted_p99_tpot_ms", "predicted_rank", "search.status",
        "search.reason"]


@pytest.mark.parametrize("extra, line", [
    (["slo.p99_tpot_ms=1"], "error: slo={'p99_ttft_ms': 2000.0, 'p99_tpot_ms': 1.0}: no candidate meets TTFT p99 <= "
                            "2000 ms and TPOT p99 <= 1 ms at any load (8 feasible); the nearest SLO a candidate "
                            "meets: slo.p99_ttft_ms=36 slo.p99_tpot_ms=16"),
    (["model=deepseek_r1", "quantization=none", "search.nodes=1", "engine.max_model_len=4096"],
     "error: search.nodes=1: no feasible candidate for deepseek_r1 on 1 × atlas_800i_a2: 8 infeasible: 8 weights do "
     "not fit; give more nodes (search.nodes) or a smaller quantization (search.quantizations)"),
    (["search.measure_top=2"], "error: search.measure_top=2: serves each pick on this machine, and "
                               "hardware=atlas_800i_a2 (npu) is not here; drop search.measure_top to plan only (the "
                               "recipes are written), then start a recipe on your nodes and measure it with "
                               "run.mode=attach run.attach_capacity=true run.server_url=http://<node0>:<port>"),
    (["workload=chat"], "error: workload='chat': a deployment search needs fixed request lengths: use "
                        "workload=random with workload.random_input_len / random_output_len"),
    (["engine.max_model_len=1024"], "error: engine.max_model_len=1024: below the workload's 1024 + 256 tokens per "
                                    "request: every candidate would refuse it; set engine.max_model_len=2048"),
])
def test_bad_search_inputs_are_one_line(tmp_path: Path, extra: list[str], line: str) -> None:
    proc = run_in_process([*SMALL, "tracking=none", *extra], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == line


#: The same search on this machine's CPU: 1 layout (TP1×DP1) × 4 graph modes × 2 ``max_num_seqs``; the release
#: refuses CUDA-graph modes on CPU, so 2 candidates are feasible and ranked.
CPU = ["run.mode=search", "workload=random", "workload.random_input_len=64", "workload.random_output_len=32",
       "search.max_num_seqs=[2,16]", "search.max_num_batched_tokens=[2048]", "tracking=none"]


@pytest.mark.parametrize("extra, line", [
    (["search.measure_top=3"], "error: search.measure_top=3: exceeds the 2 ranked co-located candidates that can be "
                               "served here (2 feasible); set search.measure_top=2 or less"),
    (["search.measure_top=1", "search.measure_random=2"],
     "error: search.measure_random=2: only 1 ranked co-located candidates are left below the top 1; set "
     "search.measure_random=1 or less"),
    (["search.measure_top=1", "run.api_key_env=ASCENDFLOW_TEST_UNSET_KEY"],
     "error: run.api_key_env='ASCENDFLOW_TEST_UNSET_KEY': the variable is not set; export "
     "ASCENDFLOW_TEST_UNSET_KEY=<key> before the run (its value is never written)"),
])
def test_measure_top_refused_before_any_engine_starts(tmp_path: Path, extra: list[str], line: str) -> None:
    proc = run_in_process([*CPU, *extra], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == line
    # the picks are refused once the search ranked (a missing key before it), never after an engine started
    assert ("deployment search: smollm2_135m on 1 × cpu" in proc.stdout) == ("api_key_env" not in line)
    assert not list(tmp_path.glob("outputs/runs/*/*/search/measured"))  # nothing was served
