"""The deployment search's figure for a PD candidate is its recipe's own plan figure (``performance.pd_ratio``).

Qwen3-235B-A22B W8A8 on 2 × A3, ISL 3500 / OSL 1500, TTFT p99 <= 2000 ms, TPOT p99 <= 50 ms (docs/search.md's
acceptance search): the top pick PD 1P(TP1×DP16 eager s16 t4096) 1D(TP1×DP16 eager s32 t256). The search priced
its roles at 64 requests per point and 6 halvings (4.03 req/s for the 1:1, decode-bound) while the plan's
``pd_ratio`` said 3.21; it now prices them with ``pd_ratio.role_capacity`` itself.
"""

from __future__ import annotations

from pathlib import Path

from ascendflow.models.resolve import resolve_model
from ascendflow.modes.search import interval_ratio, quantization_options
from ascendflow.perfmodel.attach import calibration_file, with_performance
from ascendflow.perfmodel.calibration import load_calibration
from ascendflow.runner.detect import host_facts
from ascendflow.schema import load_spec
from ascendflow.search.evaluate import Evaluator
from ascendflow.search.run import pd_row
from ascendflow.search.space import Knobs, Layout, RoleConfig
from tests.conftest import compose_config

OVERRIDES = ["run.mode=search", "hardware=atlas_800i_a3", "quantization=w8a8_ascend", "workload=random",
             "workload.random_input_len=3500", "workload.random_output_len=1500", "slo.p99_ttft_ms=2000",
             "slo.p99_tpot_ms=50", "engine.max_model_len=8192", "model=qwen3_235b_a22b", "search.nodes=2"]


def test_pd_candidate_figure_is_its_plans_pd_ratio(tmp_path: Path) -> None:
    raw = compose_config(OVERRIDES)
    raw.pop("hydra", None)
    spec = load_spec(raw)
    model = resolve_model(spec.model, need_weights=False)
    ev = Evaluator(spec, model.architecture, model_path=model.path or spec.model.path or spec.model.id,
                   host=host_facts(spec.hardware), checkpoint=model.checkpoint, draft=None,
                   quantizations=quantization_options(spec),
                   calibration=load_calibration(spec.hardware.name, calibration_file(spec)))
    quant = "w8a8_ascend"
    lay = Layout(nodes=1, tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=16,
                 enable_expert_parallel=False)
    prc, drc = RoleConfig("prefill", lay, Knobs("NONE", 16, 4096)), RoleConfig("decode", lay, Knobs("NONE", 32, 256))
    pp, dp = ev.role(quant, prc, spec.search.pd_connector), ev.role(quant, drc, spec.search.pd_connector)
    row = pd_row(quant, prc, pp, drc, dp, 1, 1, 2, 16, ev.osl, spec.slo.targets)
    cand = ev.pd_spec(quant, prc, drc, 1, 1, spec.search.pd_connector)
    ratio = with_performance(ev.compile(cand), cand, None, tmp_path).performance["pd_ratio"]
    assert (pp.rps, dp.rps) == (ratio["prefill"]["rps_per_instance"], ratio["decode"]["rps_per_instance"])
    assert (pp.rps, dp.rps) == (20.8141, 3.2111)
    assert row["capacity_rps"] == ratio["planned"]["throughput_rps"] == 3.2111
    assert row["devices"] == 32 and row["bottleneck"] == ratio["planned"]["bottleneck"] == "decode"
    # the interval the search applies to the PD group is the plan's (class moe has request-throughput residuals)
    planned = ratio["planned"]
    assert (planned["throughput_rps_low"], planned["throughput_rps_high"]) == (0.78, 7.539)
    assert interval_ratio({"pd_ratio": ratio}) == (0.78 / 3.2111, 7.539 / 3.2111)
