"""``run.mode=attach``'s check of the deployment's KV cache knobs against the plan (issue 25: a server started with
``kv_cache_memory_bytes`` 1 GiB was recorded FINISHED under a plan of 4e9 bytes, 173,568 predicted KV tokens beside
a 46,592-token server)."""

from __future__ import annotations

import pytest

from ascendflow.runner.attach_config import cache_config_labels, check_cache_config, mismatches
from ascendflow.schema.errors import ConfigError

#: ``vllm:cache_config_info`` as vLLM 0.32.0 writes it: a ``CacheConfig(block_size=128, gpu_memory_utilization=0.9,
#: kv_cache_memory_bytes=1073741824)`` with 364 blocks, its ``metrics_info()`` (``vllm/config/cache.py``) set on the
#: gauge of ``vllm/v1/metrics/loggers.py`` ``PrometheusStatLogger.log_metrics_info`` and written by
#: ``prometheus_client.generate_latest``.
TEXT = """# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{_block_size_resolved="True",block_size="128",cache_dtype="auto",\
cache_hit_alignment_tokens="None",effective_attention_block_size="None",enable_mamba_shared_prefix_checkpoint="False",\
enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",hash_block_size="None",is_attention_free="False",\
kv_cache_dtype_skip_layers="[]",kv_cache_layout="None",kv_cache_max_concurrency="None",\
kv_cache_memory_bytes="1073741824",kv_cache_size_tokens="None",kv_offloading_backend="native",\
kv_offloading_size="None",kv_sharing_fast_prefill="False",mamba_block_size="None",mamba_cache_dtype="auto",\
mamba_cache_mode="none",mamba_page_size_padded="None",mamba_ssm_cache_dtype="auto",num_cpu_blocks="None",\
num_gpu_blocks="364",num_gpu_blocks_override="None",prefix_cache_retention_interval="0",\
prefix_caching_hash_algo="sha256",prefix_match_unit="None",replayssm_buffer_len="16",skip_page_size_padded="None",\
sliding_window="None",swa_bounded_replay="True",use_kda_recoverssm="False",use_replayssm="False",\
user_specified_block_size="True"} 1.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="HuggingFaceTB/SmolLM2-135M-Instruct"} 0.0
"""
URL = "http://127.0.0.1:8000"
#: The default CPU plan's engine arguments (tests/golden/plans/smollm2_cpu.json).
PLAN = {"max_model_len": 2048, "max_num_seqs": 16, "gpu_memory_utilization": 0.9,
        "kv_cache_memory_bytes": 1073741824, "block_size": 128}


def test_labels_are_read_from_real_metrics_text():
    labels = cache_config_labels(TEXT)
    assert (labels["block_size"], labels["kv_cache_memory_bytes"], labels["num_gpu_blocks"],
            labels["enable_prefix_caching"], labels["cache_dtype"]) == ("128", "1073741824", "364", "True", "auto")
    assert cache_config_labels("# TYPE x gauge\nx 1.0\n") is None


def test_the_plan_s_own_server_matches():
    assert mismatches(PLAN, cache_config_labels(TEXT)) == []
    assert check_cache_config(URL, PLAN, cache_config_labels(TEXT), allow=False) == []
    assert check_cache_config(URL, PLAN, None, allow=False) == []  # no /metrics: nothing to compare


def test_another_kv_budget_is_one_config_error_naming_the_fix():
    plan = {**PLAN, "max_num_seqs": 128, "kv_cache_memory_bytes": 4000000000}
    with pytest.raises(ConfigError) as caught:
        check_cache_config(URL, plan, cache_config_labels(TEXT), allow=False)
    assert str(caught.value) == (
        "engine.kv_cache_memory_bytes=4000000000: the server at http://127.0.0.1:8000 runs kv_cache_memory_bytes "
        "1073741824 (its /metrics vllm:cache_config_info); attach to the deployment this plan describes, or set "
        "engine.kv_cache_memory_bytes=1073741824 (or run.attach_allow_mismatch=true to record it tagged)")
    assert check_cache_config(URL, plan, cache_config_labels(TEXT), allow=True) == [
        "engine.kv_cache_memory_bytes=4000000000"]


def test_every_knob_is_compared_and_utilization_only_without_a_byte_budget():
    plan = {"block_size": 16, "gpu_memory_utilization": 0.5, "enable_prefix_caching": False,
            "kv_cache_dtype": "fp8"}
    assert mismatches(plan, cache_config_labels(TEXT)) == [
        ("engine.block_size", 16, "128"), ("engine.enable_prefix_caching", False, "True"),
        ("quantization.kv_cache_dtype", "fp8", "auto"), ("engine.gpu_memory_utilization", 0.5, "0.9")]
    assert mismatches({**PLAN, "gpu_memory_utilization": 0.5}, cache_config_labels(TEXT)) == []
