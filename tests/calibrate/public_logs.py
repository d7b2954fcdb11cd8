"""Public vllm-ascend start-up logs used as memory tests: the log lines as printed, the deployment, the issue URL.

Each entry keeps only the lines the tests read (sizes, counts, the deployment as the issue states it); pids, dates and
source line numbers are decoration. ``pinned`` lists what the issue states of the inputs; an input the issue does not
state is not guessed, and the test then checks only what the log pins without it (``docs/calibrate.md``, "Public
start-up logs as tests").
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.calibrate.excerpts import lines


@dataclass(frozen=True)
class PublicLog:
    """One public start-up log.

    Attributes:
        url: the issue or pull request that printed it.
        release: the vllm-ascend release the issue names.
        hardware: device, as the log's total memory or the issue names it.
        kind: dense, MoE, hybrid or MLA.
        overrides: ascendflow config overrides for the deployment, as far as the issue pins it.
        pinned: which inputs the issue states (the rest are not pinned).
        log: the log lines, as printed.
    """

    url: str
    release: str
    hardware: str
    kind: str
    overrides: tuple[str, ...]
    pinned: str
    log: str


_ISSUES = "https://github.com/vllm-project/vllm-ascend/issues/"

#: vllm-ascend #14274: v0.22.1rc1 on a 310P3 (44,278 MB by npu-smi, 20,687 MB held by another service before start),
#: ``LLM(model="Qwen/Qwen3-0.6B", dtype="float16", tensor_parallel_size=1, max_num_seqs=1, max_model_len=4096,
#: gpu_memory_utilization=0.5)``. The profile line is DEBUG (``MemoryProfilingResult``); the issue quotes its "Total
#: non KV cache memory" part. The engine then stops: 0.09 GiB holds fewer tokens than one 4,096-token request.
V0221RC1_310P_QWEN3_0_6B = PublicLog(
    url=_ISSUES + "14274", release="vllm-ascend-0.22.1rc1", hardware="atlas_300i_duo", kind="dense",
    overrides=("hardware=atlas_300i_duo", "hardware.software=vllm-ascend-0.22.1rc1", "model=qwen3_0_6b",
               "engine.dtype=float16", "engine.max_num_seqs=1", "engine.max_model_len=4096",
               "engine.gpu_memory_utilization=0.5", f"hardware.occupied_bytes={20_687 * 2**20}", "graph=eager"),
    pinned="model, dtype, TP, max_num_seqs, max_model_len, utilisation, memory held by another process",
    log=lines(("(EngineCore pid=2) INFO 08-14 03:10:11",
               "[worker_310p.py:133] Available KV cache memory: 0.09 GiB (halved for workspace)")))
#: Its "Total non KV cache memory" (weights + peak activation + non-torch of the profile run), GiB, as quoted.
V0221RC1_310P_NON_KV_GIB = 1.65

#: vllm-ascend #4807 (v0.11.0 release checklist): Qwen3-8B TP1 on an A2, the offline ``LLM(model="Qwen/Qwen3-8B",
#: max_model_len=26240)`` of the issue's script, vLLM's offline defaults otherwise, made explicit: utilisation 0.9,
#: max_num_seqs 256 and max_num_batched_tokens 8192 (vLLM 0.11 ``EngineArgs.get_batch_defaults``:
#: ``UsageContext.LLM_CLASS`` 8192 below 70 GiB; the server's 2048 was planned before); PIECEWISE graphs (the 48-size
#: line: ``excerpts.V0110_QWEN3_8B``). Device total 65,452,113,920 B, what every 2025 A2 log here prints (#3800,
#: #4594, #6250, #5876; shared/reference/vllm_ascend.md §2: "on 2025 stacks"); the log (12-10-2025) prints none.
V0110_A2_QWEN3_8B = PublicLog(
    url=_ISSUES + "4807", release="vllm-ascend-0.11.0", hardware="atlas_800i_a2", kind="dense",
    overrides=("run.mode=plan", "hardware=atlas_800i_a2", "hardware.device_memory_bytes=65452113920",
               "hardware.software=vllm-ascend-0.11.0", "model=qwen3_8b", "engine.max_model_len=26240",
               "engine.max_num_seqs=256", "engine.max_num_batched_tokens=8192", "graph=piecewise",
               "ascend.hccl_op_expansion_mode_aiv=false"),
    pinned="model, TP, max_model_len (utilisation, max_num_seqs and max_num_batched_tokens: vLLM's offline defaults, "
           "the script sets none; device total of the 2025 stacks)",
    log=lines(("(EngineCore_DP0 pid=107915) INFO 12-10 02:58:21",
               "[kv_cache_utils.py:1091] Maximum concurrency for 26,240 tokens per request: 10.56x")))

#: vllm-ascend #3479 (v0.11.0rc0, Atlas 300I Duo, Qwen3-4B fp16, TP1, utilisation 0.8, max_model_len 4096, eager):
#: ``vllm serve /home/models/Qwen3/Qwen3-4B --tensor-parallel-size 1 --max-model-len 4096 --gpu-memory-utilization 0.8
#: --enforce-eager`` (image ``v0.11.0rc0-310p-openeuler``). The server's 2,048 batched tokens become 4,096: v0.11.0rc0
#: ``platform.py`` ``NPUPlatform.check_and_update_config`` ("Non-MLA LLMs forcibly disable the chunked prefill
#: feature") turns the ascend scheduler on and raises ``max_num_batched_tokens`` to ``max_model_len``; v0.11.0 final
#: no longer does, and the rules table has no rc0 row, so the entry states it.
V0110RC0_300I_DUO_QWEN3_4B = PublicLog(
    url=_ISSUES + "3479", release="vllm-ascend-0.11.0", hardware="atlas_300i_duo", kind="dense",
    overrides=("hardware=atlas_300i_duo", "hardware.software=vllm-ascend-0.11.0", "model=qwen3_4b",
               "engine.max_model_len=4096", "engine.gpu_memory_utilization=0.8", "engine.dtype=float16",
               "engine.max_num_batched_tokens=4096", "graph=eager"),
    pinned="model, dtype, TP, max_model_len, utilisation, eager (the command); max_num_batched_tokens as rc0 sets it",
    log=lines(("(EngineCore_DP0 pid=3412) INFO 10-14 09:12:40",
               "[worker_v1.py:234] Available memory: 26954181529, total memory: 46431260672"),
              ("(EngineCore_DP0 pid=3412) INFO 10-14 09:12:40", "[kv_cache_utils.py:1087] GPU KV cache size: 182,784 tokens"),
              ("(EngineCore_DP0 pid=3412) INFO 10-14 09:12:40",
               "[kv_cache_utils.py:1091] Maximum concurrency for 4,096 tokens per request: 44.62x")))

#: vllm-ascend #3843 (v0.11.0rc0, Qwen3-Next-80B-A3B-Instruct, 8 workers TP0…TP7 on 64 GB dies): weights per rank.
#: The KV budget was 0 ("Available memory: 0"); utilisation and the rest of the command are not in the issue.
V0110RC0_QWEN3_NEXT_TP8 = PublicLog(
    url=_ISSUES + "3843", release="vllm-ascend-0.11.0", hardware="atlas_800i_a2", kind="hybrid",
    overrides=("hardware=atlas_800i_a2", "hardware.software=vllm-ascend-0.11.0", "model=local",
               "model.path=tests/data/configs/qwen3_next_80b", "engine.max_model_len=4096",
               "parallel.tensor_parallel_size=8", "graph=eager", "engine.gpu_memory_utilization=0.5"),
    # utilisation not in the issue: 0.5 keeps v0.11.0's KV allocation (4 × the budget on this model, one tensor per
    # linear-attention layer: checks/memory.py kv_tensor_copies) within the die; the weights do not depend on it.
    pinned="model, TP (weights only)",
    log=lines(("(Worker_TP5 pid=557) INFO 10-28 21:14:01",
               "[model_runner_v1.py:2941] Loading model weights took 18.7767 GB")))

#: vllm-ascend #2976 (v0.10.2rc1, Qwen3-Next-80B-A3B-Instruct, TP4 as in the Qwen3-Next FAQ #3854): weights per rank.
V0102RC1_QWEN3_NEXT_TP4 = PublicLog(
    url=_ISSUES + "2976", release="vllm-ascend-0.10.2rc1", hardware="atlas_800i_a2", kind="hybrid",
    overrides=("hardware=atlas_800i_a2", "hardware.software=vllm-ascend-0.11.0", "model=local",
               "model.path=tests/data/configs/qwen3_next_80b", "engine.max_model_len=4096",
               "parallel.tensor_parallel_size=4", "engine.gpu_memory_utilization=0.7", "graph=eager"),
    pinned="model, TP (weights only)",
    log=lines(("(Worker_TP0 pid=1454) INFO 09-17 05:33:48",
               "[model_runner_v1.py:2373] Loading model weights took 37.2362 GB")))

#: vllm-ascend #3800 (v0.11.0rc0, Qwen3-VL-235B-A22B, TP8 + EP on 64 GB dies): the per-rank KV bytes and the tokens
#: vLLM logged from them (``excerpts.V0110RC0_DP_TP_EP``); utilisation and max_num_batched_tokens are not in the issue.
V0110RC0_QWEN3_VL_235B_URL = _ISSUES + "3800"

#: Public logs found at v0.13 and later whose inputs the issue does not pin (URL: what is missing).
UNPINNED = {
    _ISSUES + "11990": "v0.22.1rc1, Qwen3-Coder-30B-A3B TP4 + EP, 474,880 tokens at max_model_len 262,144, "
                       "utilisation 0.92: max_num_batched_tokens, max_num_seqs and chunked prefill not given (the "
                       "plan at vLLM defaults holds 1,779,200 tokens: the profile run must have been far larger)",
    _ISSUES + "14678": "v0.23, DeepSeek-V4-Pro W4A8 + MTP on A2, 11.35 GiB -> 1,098,000 tokens: DeepSeek-V4 "
                       "(compressed sparse MLA groups) has no layout here",
    _ISSUES + "6611": "v0.13.0, Qwen3-Next-80B on 64 GB dies: OOM at KV allocation, no KV line, no command",
    _ISSUES + "9372": "Qwen3-14B on a 32 GB vNPU: weights 27.5376 GB, KV -0.87 GiB; release not named",
    _ISSUES + "16983": "v0.26.0rc1/rc2, DeepSeek-V4-Pro w4a8 on A3: weights 35.9085 GB only; V4 not modelled",
    _ISSUES + "12839": "v0.23, GLM-5.1 w8a8 CP + PD: weights 49/59 GB only, GLM-5 DSA not modelled",
    "https://github.com/vllm-project/vllm-ascend/pull/8289": "v0.19.1rc1 breakdown line (weights 1.14 GiB, "
                       "activation 0.22, non-torch 0.13): the model is not named",
    # Found by a second search (docs/calibrate.md, "Public start-up logs as tests"); "not in the thread" means not in
    # the text the issue search returned.
    _ISSUES + "10122": "310P (June 2026), Qwen3.6-35B-A3B-w8a8 TP2 + EP, utilisation 0.8: breakdown line (weights "
                       "18.8 GiB, activation 1.71, non-torch 1.05, KV 5.77 GiB); Qwen3.6 (Gated DeltaNet MoE) has no "
                       "config here, the release is not named and the command in the thread is the 27B run's",
    _ISSUES + "5689": "v0.13.0rc1, A2, Qwen3-Coder-480B w8a8 DP2 x TP8 + EP, max_num_seqs 16, max_model_len 262,144, "
                      "max_num_batched_tokens 4,096, utilisation 0.9: the command is pinned but no KV line is in "
                      "the thread, and Qwen3-Coder-480B has no config here",
    _ISSUES + "5414": "Qwen3-Omni on 910B4 32 GB dies (Dec 2025): only the running 'GPU KV cache usage' metric, "
                      "no start-up KV line; Omni not modelled; release not named",
    _ISSUES + "8284": "v0.18.0rc1-310p, 300I Duo, Qwen3-30B-A3B-Instruct-2507: the start-up log is an attached "
                      "file, not in the thread; the command asked for an fp8 KV cache the 300I Duo lacks",
    _ISSUES + "10401": "v0.20.2rc1, 2 x 910B3, Qwen3.6-27B: a speed report, no KV line; Qwen3.6 not modelled",
    # Found by the fourth search (issue 27, session 5; docs/calibrate.md).
    "https://github.com/vllm-project/vllm-ascend/pull/12609": "v0.18.0 (vLLM 0.18.0), Qwen2.5-Omni-7B (the thinker: "
        "LM + vision + audio towers) TP1, vllm serve defaults (gmu 0.9, mml 32,768, mnbt 2,048), FULL_DECODE_ONLY, no "
        "prefix caching: 16.6776 GB weights, 37.74 GiB, 706,560 tokens (docs/0722-test1.txt on the PR branch); the "
        "device is not named and no Omni model is here. The log leaves 0.45 / 0.73 GiB (60.96 / 61.28 GiB dies) for "
        "activation and non-torch memory although the profile run encodes '1 video items of the maximum feature "
        "size' at a 32,768-token budget, where the Qwen2.5-VL encoder estimate (vision_weights.encoder_profile, "
        "131,072 patches) puts 6.1 GiB: testing it would need that term fitted on this one log",
}


# ---------------------------------------------------------------------------------------------------------------------
# The public start-up logs of ../shared/reference/startup_logs/README.md (W3-01 … W3-13, graded A/B/C there), with the
# deployment each ran as ascendflow overrides (the README's starting commands, checked against the logs) and the lines
# the tests read, as printed. Model configs: tests/data/configs (copies of ../shared/reference/configs).
_CFG = "tests/data/configs/"
_A2_64G = ("hardware=atlas_800i_a2", "hardware.device_memory_bytes=65452113920")

#: W3-01 (grade A): vllm-ascend #9606 (log in docs/source/quick_start.md), ~v0.20.2rc1, one 64 GB die, offline
#: ``LLM(model="Qwen/Qwen3-0.6B")`` defaults made explicit (gmu 0.92, mnbt 8192, 35 PIECEWISE sizes).
W3_01 = PublicLog(
    url="https://github.com/vllm-project/vllm-ascend/pull/9606", release="vllm-ascend-0.20.2rc1",
    hardware="atlas_800i_a3", kind="dense",
    overrides=("hardware=atlas_800i_a3", "hardware.software=vllm-ascend-0.20.2rc1", "model=local",
               f"model.path={_CFG}qwen3_0_6b", "parallel=single", "engine.max_model_len=40960",
               "engine.max_num_seqs=256", "engine.max_num_batched_tokens=8192", "engine.gpu_memory_utilization=0.92",
               "engine.enable_prefix_caching=true", "engine.enable_chunked_prefill=true", "graph=piecewise"),
    pinned="model, TP, every limit (offline defaults), utilisation (printed), graph mode (printed)",
    log=lines(("(EngineCore pid=1) INFO 05-27 10:00:00", "[worker.py:394] Available KV cache memory: 54.98 GiB"),
              ("(EngineCore pid=1) INFO 05-27 10:00:00", "[kv_cache_utils.py:1316] GPU KV cache size: 514,688 tokens"),
              ("(EngineCore pid=1) INFO 05-27 10:00:00",
               "[kv_cache_utils.py:1321] Maximum concurrency for 40,960 tokens per request: 12.57x")))
#: W3-01's printed capture sizes (``cudagraph_capture_sizes``).
W3_01_CAPTURE = [1, 2, 4, *range(8, 257, 8)]

#: W3-02 (grade B: the doc relabelled the model; 36 layers and 15.29 GB of weights are Qwen3-8B): vllm-ascend #9091,
#: v0.18.0, offline ``LLM()`` defaults (gmu 0.9), FFTS+ (no AIV).
W3_02 = PublicLog(
    url="https://github.com/vllm-project/vllm-ascend/pull/9091", release="vllm-ascend-0.18.0",
    hardware="atlas_800i_a3", kind="dense",
    overrides=("hardware=atlas_800i_a3", "hardware.software=vllm-ascend-0.18.0", "model=local",
               f"model.path={_CFG}qwen3_8b", "parallel=single", "engine.max_model_len=40960",
               "engine.max_num_seqs=256", "engine.max_num_batched_tokens=8192", "engine.gpu_memory_utilization=0.9",
               "engine.enable_prefix_caching=true", "engine.enable_chunked_prefill=true", "graph=piecewise",
               "ascend.hccl_op_expansion_mode_aiv=false"),
    pinned="TP, limits and graph mode (offline defaults, printed); model inferred from its layers and weights",
    log=lines(("(EngineCore pid=1) INFO 05-12 10:00:00", "[worker.py:357] Available KV cache memory: 39.06 GiB"),
              ("(EngineCore pid=1) INFO 05-12 10:00:00", "[kv_cache_utils.py:1316] GPU KV cache size: 284,416 tokens"),
              ("(EngineCore pid=1) INFO 05-12 10:00:00",
               "[kv_cache_utils.py:1321] Maximum concurrency for 40,960 tokens per request: 6.94x")))

#: W3-03 (grade A): vllm-ascend #4594, vLLM 0.11.2 + vllm-ascend main of 2025-11-29 (row 0.13.0 by its capture ladder),
#: Qwen3-32B TP8, FULL_DECODE_ONLY, FLASHCOMM (sequence parallelism: sizes 1, 2, 4 removed).
W3_03 = PublicLog(
    url=_ISSUES + "4594", release="vllm-ascend-0.13.0", hardware="atlas_800i_a2", kind="dense",
    overrides=(*_A2_64G, "hardware.software=vllm-ascend-0.13.0", "model=local", f"model.path={_CFG}qwen3_32b",
               "parallel.tensor_parallel_size=8", "engine.max_model_len=6656", "engine.max_num_seqs=200",
               "engine.block_size=128", "engine.gpu_memory_utilization=0.9", "engine.enable_prefix_caching=false",
               "graph=full_decode_only", "ascend.enable_sequence_parallelism=true"),
    pinned="the whole command and env (verbatim in the issue)",
    log=lines(("(Worker_TP0 pid=1) INFO 12-01 10:00:00",
               "[worker_v1.py:241] Available memory: 49075702272, total memory: 65452113920"),
              ("(EngineCore_DP0 pid=1) INFO 12-01 10:00:00", "[kv_cache_utils.py:1087] GPU KV cache size: 1,497,600 tokens"),
              ("(EngineCore_DP0 pid=1) INFO 12-01 10:00:00",
               "[kv_cache_utils.py:1091] Maximum concurrency for 6,656 tokens per request: 225.00x")))
#: W3-03's captured sizes (``Starting to capture ACL graphs for cases: [...]``, FULL, uniform decode).
W3_03_CAPTURE = list(range(8, 201, 8))

#: W3-04 (grade A for the KV lines): vllm-ascend #6250, v0.13.0rc2, Qwen3-Next-80B-A3B TP4 on an 800I A2; the platform
#: sets FULL_DECODE_ONLY and vLLM prints ``enable_prefix_caching=False`` for this hybrid model.
W3_04 = PublicLog(
    url=_ISSUES + "6250", release="vllm-ascend-0.13.0", hardware="atlas_800i_a2", kind="hybrid",
    overrides=(*_A2_64G, "hardware.software=vllm-ascend-0.13.0", "model=local", f"model.path={_CFG}qwen3_next_80b",
               "parallel.tensor_parallel_size=4", "engine.max_model_len=32768", "engine.max_num_seqs=256",
               "engine.max_num_batched_tokens=4096", "engine.gpu_memory_utilization=0.8",
               "engine.enable_prefix_caching=false", "graph=full_decode_only"),
    pinned="the whole command (verbatim); graph mode and prefix caching as printed",
    log=lines(("(Worker_TP0 pid=1) INFO 01-26 10:00:00",
               "[worker.py:302] Available memory: 9786143744, total memory: 65452113920"),
              ("(EngineCore_DP0 pid=1) INFO 01-26 10:00:00", "[kv_cache_utils.py:1291] GPU KV cache size: 198,912 tokens"),
              ("(EngineCore_DP0 pid=1) INFO 01-26 10:00:00",
               "[kv_cache_utils.py:1296] Maximum concurrency for 32,768 tokens per request: 23.29x")))

#: W3-05 (grade B: gmu not in the issue, vLLM's 0.9 assumed): vllm-ascend #5876, v0.13.0 (rc2.dev15), Qwen3-235B-A22B
#: bf16 TP16 + EP over two 800I A2 nodes, PIECEWISE (``0/6`` capture sizes), mnbt 4096 (compile range).
W3_05 = PublicLog(
    url=_ISSUES + "5876", release="vllm-ascend-0.13.0", hardware="atlas_800i_a2", kind="moe",
    overrides=(*_A2_64G, "hardware.software=vllm-ascend-0.13.0", "model=local", f"model.path={_CFG}qwen3_235b_a22b",
               "parallel.nodes=2", "parallel.tensor_parallel_size=16", "parallel.enable_expert_parallel=true",
               "engine.max_model_len=32768", "engine.max_num_batched_tokens=4096",
               "engine.gpu_memory_utilization=0.9", "graph=piecewise"),
    pinned="model, TP16 + EP on 2 nodes, mml, mnbt, graph mode; gmu assumed 0.9 (vLLM default)",
    log=lines(("(Worker_TP6 pid=1) INFO 01-14 10:00:00",
               "[worker.py:302] Available memory: 25083870720, total memory: 65452113920"),
              ("(EngineCore_DP0 pid=1) INFO 01-14 10:00:00", "[kv_cache_utils.py:1291] GPU KV cache size: 521,088 tokens"),
              ("(EngineCore_DP0 pid=1) INFO 01-14 10:00:00",
               "[kv_cache_utils.py:1296] Maximum concurrency for 32,768 tokens per request: 15.90x")))
#: W3-05's capture sizes: only their number is printed (``Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 0/6``).
W3_05_CAPTURE_COUNT = 6

#: W3-06 (grade B: occupied memory derived from the logged free memory): vllm-ascend #8621, v0.18.0rc1, a 4th Qwen3-0.6B
#: server on one 910B at gmu 0.9: refused, free 27.18 of 60.96 GiB.
W3_06 = PublicLog(
    url=_ISSUES + "8621", release="vllm-ascend-0.18.0", hardware="atlas_800i_a2", kind="dense",
    overrides=(*_A2_64G, "hardware.software=vllm-ascend-0.18.0", "hardware.occupied_bytes=35791241032", "model=local",
               f"model.path={_CFG}qwen3_0_6b", "parallel=single", "engine.max_model_len=40960",
               "engine.gpu_memory_utilization=0.9", "graph=compiled"),
    pinned="model, utilisation, the free memory at start (other flags do not enter the check)",
    log=lines(("(EngineCore pid=1) ERROR 04-08 10:00:00",
               "ValueError: Free memory on device (27.18/60.96 GiB) on startup is less than desired GPU memory "
               "utilization (0.9, 54.86 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
               "processes.")))

#: W3-07 (grade B: the numeric lines are cut; the PR says the KV cache is too small for max_model_len): verl #5015,
#: vllm-ascend 0.11.0, Qwen2.5-32B TP2, mml 131,072, gmu 0.8 on a 64 GB 910B: refused at start.
W3_07 = PublicLog(
    url="https://github.com/verl-project/verl/pull/5015", release="vllm-ascend-0.11.0", hardware="atlas_800i_a2",
    kind="dense",
    overrides=(*_A2_64G, "hardware.software=vllm-ascend-0.11.0", "model=local", f"model.path={_CFG}qwen2_5_32b",
               "parallel.tensor_parallel_size=2", "engine.dtype=bfloat16", "engine.max_model_len=131072",
               "engine.max_num_seqs=1024", "engine.max_num_batched_tokens=2048", "engine.gpu_memory_utilization=0.8",
               "graph=piecewise"),
    pinned="the serve arguments (verbatim list); device total assumed 60.96 GiB (\"NPU with 65G\")",
    log=lines(("(EngineCore_DP0 pid=363461) ERROR 01-22 09:42:00", "[patch_core.py:58]     raise ValueErro")))

#: W3-10 (grade B: device total assumed 60.96 GiB; prefix caching off as vLLM 0.12/0.13 print for this model, W3-04,
#: and as the logged 210.07x requires): vllm-ascend #5020, v0.12.0rc1 (row 0.13.0), Qwen3-Next-80B TP4, mml 4096, gmu
#: 0.85 on an A3: the KV line is printed, then the worker runs out of memory in initialize_from_config; 0.75 starts.
W3_10 = PublicLog(
    url=_ISSUES + "5020", release="vllm-ascend-0.13.0", hardware="atlas_800i_a3", kind="hybrid",
    overrides=("hardware=atlas_800i_a3", "hardware.software=vllm-ascend-0.13.0",
               "hardware.device_memory_bytes=65452113920", "model=local", f"model.path={_CFG}qwen3_next_80b",
               "parallel.tensor_parallel_size=4", "engine.max_model_len=4096", "engine.gpu_memory_utilization=0.85",
               "engine.enable_prefix_caching=false", "graph=full_decode_only"),
    pinned="the tutorial command (verbatim); device total and prefix caching as said above",
    log=lines(("(EngineCore_DP0 pid=1) INFO 12-16 10:00:00", "[kv_cache_utils.py:1286] GPU KV cache size: 282,240 tokens"),
              ("(EngineCore_DP0 pid=1) INFO 12-16 10:00:00",
               "[kv_cache_utils.py:1291] Maximum concurrency for 4,096 tokens per request: 210.07x")))

#: W3-08 (grade C, a probe): vllm-ascend #5993, v0.13.0rc1, DeepSeek-V3.1 W8A8 + MTP 3, DP4 × TP4 + EP on 2 A2 nodes:
#: ``Available memory: 0`` on node 1, then MC2 dispatch fails for HCCL resources; the engine did not start.
W3_08 = PublicLog(
    url=_ISSUES + "5993", release="vllm-ascend-0.13.0", hardware="atlas_800i_a2", kind="mla",
    overrides=("hardware=atlas_800i_a2", "hardware.device_memory_bytes=65464696832",
               "hardware.software=vllm-ascend-0.13.0", "model=local", f"model.path={_CFG}deepseek_v3_1",
               "quantization=w8a8_ascend", "parallel.nodes=2", "parallel.data_parallel_size=4",
               "parallel.tensor_parallel_size=4", "parallel.enable_expert_parallel=true", "engine.max_model_len=16384",
               "engine.max_num_seqs=16", "engine.max_num_batched_tokens=4096", "engine.gpu_memory_utilization=0.92",
               "engine.enable_prefix_caching=false", "engine.num_speculative_tokens=3", "engine.speculative_method=mtp",
               "graph=full_decode_only", "graph.cudagraph_capture_sizes=[4,16,32,48,64]", "ascend.hccl_buffsize_mb=200",
               "+ascend.env.VLLM_ASCEND_ENABLE_MLAPO=1", "+ascend.env.VLLM_ASCEND_BALANCE_SCHEDULING=1"),
    pinned="the command (verbatim); quantization schemes of the checkpoint assumed",
    log=lines(("(Worker_DP2_TP0_EP8 pid=1) INFO 01-19 10:00:00",
               "[worker.py:283] Available memory: 0, total memory: 65464696832")))

#: W3-09 (grade C, probes): vllm-ascend #6572, v0.14.0rc1 (row 0.13.0), Qwen3-Coder-Next (= Qwen3-Next-80B config) on
#: 910B3 64 GB, mml 262,144, gmu 0.8, mnbt 4096, FULL_DECODE_ONLY: TP4 starts, TP8 runs out of memory at start.
W3_09_TP4 = (*_A2_64G, "hardware.software=vllm-ascend-0.13.0", "model=local", f"model.path={_CFG}qwen3_next_80b",
             "parallel.tensor_parallel_size=4", "engine.max_model_len=262144", "engine.max_num_batched_tokens=4096",
             "engine.gpu_memory_utilization=0.8", "graph=full_decode_only")
W3_09_URL = _ISSUES + "6572"

# ---------------------------------------------------------------------------------------------------------------------
# Public start-up logs found outside ../shared (the out-of-sample check of issue 27: their errors were recorded before
# any change to the memory model, docs/kv_layouts.md "Memory terms on large MoE and hybrid deployments").

#: N-01 (grade A): Pla-Yer/nano_vllm_ascend ``docs/nano_vllm_ascend_VS_vllm_ascend.md`` (commit af96b6d0; the sibling
#: ``docs/nano_vllm_ascend_VS_vllm_ascend_VS_vllm_VS_nano_vlm.md`` names the NPU: ``910B3``, 64 GB, an A2 die), vLLM
#: v0.18.0 + vllm-ascend 0.18.0 (``[worker.py:357] Available KV cache memory`` is the v0.18.0 line), offline
#: ``LLM(model=Qwen3-0.6B, dtype=bfloat16, max_model_len=4096, block_size=128, gpu_memory_utilization=0.8,
#: max_num_seqs=32)`` (``non-default args`` printed), chunked prefill at 8192 (printed), prefix caching on, PIECEWISE
#: with the 7 printed sizes, FFTS+ (the AIV warning is printed). Device total: the 910B3's 65,452,113,920 B (W3-04,
#: W3-05 print it; 0.8 of 61.27 GiB would leave 0.49 GiB for activation and non-torch memory, twice W3-01's 0.25 GiB
#: for the same model at 8 × the sequences).
N_01 = PublicLog(
    url="https://github.com/Pla-Yer/nano_vllm_ascend/blob/af96b6d0ef274e4c44ad0be708639289f9818ada/docs/"
        "nano_vllm_ascend_VS_vllm_ascend.md",
    release="vllm-ascend-0.18.0", hardware="atlas_800i_a2", kind="dense",
    overrides=(*_A2_64G, "hardware.software=vllm-ascend-0.18.0", "model=local", f"model.path={_CFG}qwen3_0_6b",
               "parallel=single", "engine.dtype=bfloat16", "engine.max_model_len=4096", "engine.block_size=128",
               "engine.gpu_memory_utilization=0.8", "engine.max_num_seqs=32", "engine.max_num_batched_tokens=8192",
               "engine.enable_prefix_caching=true", "engine.enable_chunked_prefill=true", "graph=piecewise",
               "ascend.hccl_op_expansion_mode_aiv=false"),
    pinned="model, dtype, TP, every limit (printed), utilisation (printed), graph mode and sizes (printed), NPU named",
    log=lines(("(EngineCore pid=18225) INFO 06-10 03:10:56", "[model_runner_v1.py:2589] Loading model weights took 1.1397 GB"),
              ("(EngineCore pid=18225) INFO 06-10 03:11:23", "[worker.py:357] Available KV cache memory: 47.39 GiB"),
              ("(EngineCore pid=18225) INFO 06-10 03:11:23", "[kv_cache_utils.py:1316] GPU KV cache size: 443,648 tokens"),
              ("(EngineCore pid=18225) INFO 06-10 03:11:23",
               "[kv_cache_utils.py:1321] Maximum concurrency for 4,096 tokens per request: 108.31x")))
#: N-01's printed ``cudagraph_capture_sizes`` (``No adjustment needed ... with 7 sizes``).
N_01_CAPTURE = [1, 2, 4, 8, 16, 24, 32]

#: N-02 (grade B: the device total is not printed; both 64 GB totals are planned): a public deployment report
#: "Qwen3-VL-8B-Instruct 模型 vLLM-Ascend 部署与性能测试报告" (2026-07-22, "Ascend NPU, vLLM-Ascend v0.18.0"; two
#: runs of the same command, 34.66 and 34.65 GiB, both 252,288 tokens; the lines below are the second run's). The
#: code index holds it as file id 55448493821 (the first run: 55204712336) without resolving the repository.
#: ``vllm serve Qwen3-VL-8B-Instruct --dtype bfloat16 --max-model-len 16384 --max-num-batched-tokens 16384``
#: (``non-default args`` printed): vLLM's defaults otherwise
#: (utilisation 0.9, 256 sequences, TP1, prefix caching and chunked prefill on, printed), PIECEWISE with 35 sizes,
#: FFTS+; ``Encoder cache will be initialized with a budget of 16384 tokens, and profiled with 1 image items of the
#: maximum feature size``.
N_02 = PublicLog(
    url="code-index:55448493821 (Qwen3-VL-8B-Instruct 模型 vLLM-Ascend 部署与性能测试报告, 2026-07-22)",
    release="vllm-ascend-0.18.0", hardware="atlas_800i_a2", kind="vl",
    overrides=(*_A2_64G, "hardware.software=vllm-ascend-0.18.0", "model=local", f"model.path={_CFG}qwen3_vl_8b",
               "parallel=single", "engine.dtype=bfloat16", "engine.max_model_len=16384",
               "engine.max_num_batched_tokens=16384", "engine.max_num_seqs=256", "engine.gpu_memory_utilization=0.9",
               "engine.enable_prefix_caching=true", "engine.enable_chunked_prefill=true", "graph=piecewise",
               "ascend.hccl_op_expansion_mode_aiv=false"),
    pinned="the serve command and vLLM's defaults (printed); device total inferred (60.96 or 61.27 GiB)",
    log=lines(("(EngineCore pid=8878) INFO 07-22 04:31:13", "[model_runner_v1.py:2589] Loading model weights took 16.9570 GB"),
              ("(EngineCore pid=8878) INFO 07-22 04:31:53", "[worker.py:357] Available KV cache memory: 34.65 GiB"),
              ("(EngineCore pid=8878) INFO 07-22 04:31:53", "[kv_cache_utils.py:1316] GPU KV cache size: 252,288 tokens"),
              ("(EngineCore pid=8878) INFO 07-22 04:31:53",
               "[kv_cache_utils.py:1321] Maximum concurrency for 16,384 tokens per request: 15.40x")))
#: N-02 on the other 64 GB total (61.27 GiB, the A3 die and 2026 A2 stacks: conf/hardware).
N_02_A3_TOTAL = tuple(o.replace("65452113920", "65796046848") for o in N_02.overrides)

# ---------------------------------------------------------------------------------------------------------------------
# Logs outside shared/ (issue 27, session 4): found after N-01/N-02, used only to check (no constant was fitted on them;
# their errors were recorded with the memory model as it stood: docs/calibrate.md, "Public start-up logs as tests").

#: Where a public write-up sits in the code index without a resolvable repository (as N-02).
_CODE_INDEX = "code-index:"

#: Public logs outside vllm-ascend's threads that could not be tests (source: what is missing).
UNPINNED_OUTSIDE = {
    _CODE_INDEX + "6775121577": "a developer note, Qwen3-VL-8B TP2, mml 65,536, mnbt 32,768, gmu 0.95, 8 sequences: "
                                "38.41 GiB, 559,232 tokens under a 'new profiling method' being developed after "
                                "v0.12.0rc1: neither the release nor the code is pinned",
}

#: N-03 (grade B: the device total is the A3 die's, 61.28 GiB, not printed): a public KV-cache debugging write-up on
#: vllm 0.23.0 + vllm-ascend 0.23.0 ("gggtest（a3 · 4× Ascend910 · PP2TP2）", Meta-Llama-3-8B from ModelScope
#: LLM-Research/Meta-Llama-3-8B, "32 层 / kv_heads 8 / TP2 下本地 4 / block_size 128"). The serve command, verbatim in
#: the 09-23 run's record (code index 69493147035): ``vllm serve <Meta-Llama-3-8B> --enforce-eager
#: --tensor-parallel-size 2 --pipeline-parallel-size 2``; everything else vLLM's defaults: utilisation 0.92
#: (``CacheConfig.gpu_memory_utilization``, printed as the default by W3-01 at 0.20.2; 0.9 cannot produce the log:
#: 0.9 × 61.28 − 3.7454 = 51.40 GiB < the 51.94 GiB logged), 256 sequences and 2,048 batched tokens (vLLM
#: ``arg_utils.py`` defaults for an API server on a device under 70 GiB), max_model_len 8,192 (the config's, printed
#: ``max_model_len=8192``), block 128 and prefix caching on (printed). The lines below are the 09-29 run's native lines
#: (code index 70867325609): per worker 51.98 / 51.99 / 51.94 / 51.95 GiB (PP0_TP0, PP0_TP1, PP1_TP0, PP1_TP1), the
#: engine takes the smallest: 13,296 blocks × 128 = 1,701,888 tokens. Other runs of the same command: 13,295 and
#: 13,291 blocks (09-23, 10-03 records) — a 0.04 % spread. The [KVC] patches add log lines only.
N_03 = PublicLog(
    url=_CODE_INDEX + "70867325609 (KVCache 调试打印体系实验, vllm-ascend 0.23.0, Meta-Llama-3-8B PP2 × TP2 on an A3; "
                      "command in code-index:69493147035)",
    release="vllm-ascend-0.23.0", hardware="atlas_800i_a3", kind="dense",
    overrides=("hardware=atlas_800i_a3", "hardware.software=vllm-ascend-0.23.0", "model=local",
               f"model.path={_CFG}llama3_8b", "parallel.tensor_parallel_size=2", "parallel.pipeline_parallel_size=2",
               "engine.max_model_len=8192", "engine.max_num_seqs=256", "engine.max_num_batched_tokens=2048",
               "engine.gpu_memory_utilization=0.92", "engine.enable_prefix_caching=true",
               "engine.enable_chunked_prefill=true", "graph=eager"),
    pinned="the serve command (verbatim) and vLLM 0.23's defaults; device total from the A3 label (not printed)",
    log=lines(("(Worker_PP0_TP0 pid=1077) INFO 09-29 02:27:47", "[worker.py:593] Available KV cache memory: 51.98 GiB"),
              ("(EngineCore pid=1047) INFO 09-29 02:27:48", "[kv_cache_utils.py:1771] GPU KV cache size: 1,701,888 tokens"),
              ("(EngineCore pid=1047) INFO 09-29 02:27:48",
               "[kv_cache_utils.py:1772] Maximum concurrency for 8,192 tokens per request: 207.75x")))
#: N-03's per-worker weights ("各 Worker Loading model weights took 3.7454 GB", a GiB figure) and the smallest worker's
#: KV budget (PP1_TP0, the [KVC] ``determine_available_memory`` line).
N_03_WEIGHTS_GIB = 3.7454
N_03_MIN_KV_GIB = 51.94

# ---------------------------------------------------------------------------------------------------------------------
# Logs outside shared/ (issue 27, session 5): found after N-03; recorded against the model as it stood, plus one term
# read from source for them (the pooling runner's profile run has no sampler logits: overheads.activation_bytes), which
# no constant was fitted for.

#: Where the 910C memory write-ups of N-04 sit (code index ids; their repository is not resolved, as N-02's):
#: "910C 显存画像报告" (the profile report: environment table, §3.1 lines, §5 A/B table) and "910C 锁定推理镜像 ·
#: 显存池定义" (the same A/B table).
N_04_SOURCES = _CODE_INDEX + "66176551107 (910C 显存画像报告, 2026-09-10) and " + _CODE_INDEX + "65847840435 (显存池定义)"

#: N-04 (grade A): a public memory profile of ``Qwen/Qwen3-Embedding-0.6B`` on one 910C die (Atlas A3, "Ascend910_9382",
#: 64 GB; the log prints the total: ``Free memory on device (61.13/61.28 GiB)``) in the image
#: ``quay.io/ascend/vllm-ascend:v0.20.2rc1-a3`` (vLLM 0.20.2, vllm-ascend 0.20.2rc1, CANN 9.0.0, as printed in the
#: report's environment table). Offline ``LLM(runner="pooling")`` (the report: "LLM(runner=\"pooling\") 直接可用"),
#: bf16, ``gpu_memory_utilization=0.9`` (printed), ``max_num_seqs=256``, ``max_model_len=8192``,
#: ``enforce_eager=False`` (its baseline run ``gmu0.9-eager`` is, despite the name, ACL graphs: "enforce_eager=false
#: (ACLGraph/PIECEWISE)"; the platform prints "Pooling models do not support full cudagraphs. Overriding cudagraph_mode
#: to PIECEWISE" and 35 capture sizes 1 … 256). ``max_num_batched_tokens`` is not stated: the offline default, 8,192 at
#: this release on a 64 GB die (W3-01 prints it), which is also what vLLM sets with chunked prefill off at
#: max_model_len 8,192; the report's max_model_len 32,768 run logs the same pool (53.76 GiB), so the profile batch did
#: not grow with max_model_len (chunked prefill on). The report quotes the messages, not the line prefixes: the
#: ``(EngineCore ...)`` prefix and line numbers below are this release's (W3-01 prints the same), decoration.
N_04 = PublicLog(
    url=N_04_SOURCES, release="vllm-ascend-0.20.2rc1", hardware="atlas_800i_a3", kind="dense",
    overrides=("hardware=atlas_800i_a3", "hardware.software=vllm-ascend-0.20.2rc1", "model=local",
               f"model.path={_CFG}qwen3_embedding_0_6b", "parallel=single", "engine.dtype=bfloat16",
               "engine.max_model_len=8192", "engine.max_num_seqs=256", "engine.max_num_batched_tokens=8192",
               "engine.gpu_memory_utilization=0.9", "engine.enable_prefix_caching=true",
               "engine.enable_chunked_prefill=true", "graph=piecewise", "engine.extra_args=[--runner,pooling]"),
    pinned="model, dtype, TP, runner, utilisation, max_num_seqs, max_model_len, graph mode (stated and printed), the "
           "device total (printed); max_num_batched_tokens: the offline default",
    log=lines(("(EngineCore pid=1) INFO 09-10 10:00:00",
               "[model_runner_v1.py:3421] Loading model weights took 1.1333 GB"),
              ("(EngineCore pid=1) INFO 09-10 10:00:00", "[worker.py:394] Available KV cache memory: 53.78 GiB"),
              ("(EngineCore pid=1) INFO 09-10 10:00:00", "[kv_cache_utils.py:1316] GPU KV cache size: 503,424 tokens"),
              ("(EngineCore pid=1) INFO 09-10 10:00:00",
               "[worker.py:546] Free memory on device (61.13/61.28 GiB) on startup. Desired GPU memory utilization is "
               "(0.9, 55.15 GiB). Actual usage: 1.13 GiB for weights, 0.22 GiB for peak activation, 0.01 GiB for "
               "non-torch memory, 0.1 GiB for NPU graph memory. Current KV cache memory: 53.78 GiB.")))
#: N-04's other start-ups in the report's A/B table (§5, batch 64, the baseline's flags but the one named): the KV
#: tokens and the ``Maximum concurrency`` printed. ``gmu0.9`` and ``eager`` are the same deployment (a rerun, and
#: ``enforce_eager=True``); ``gmu0.4`` is another deployment (utilisation 0.4), N-05 below.
N_04_AB = {"gmu0.9": (503_552, 61.47), "eager": (503_296, 61.44), "gmu0.4": (216_704, 26.45)}
#: N-04's ``enforce_eager=True`` run at max_model_len 32,768 (§4.1 item 3): the pool unchanged (503,296 tokens), 15.36x.
N_04_MML32K_EAGER = (503_296, 15.36)

#: N-05 (grade A; one write-up with N-04, a second deployment): N-04 at ``gpu_memory_utilization=0.4`` (the A/B row
#: ``gmu0.4``: "23.15 GiB | 216,704 | 26.45"; 0.1 GiB NPU graph memory, so ACL graphs). The table is the source's own
#: summary of the run's log, not its lines.
N_05 = PublicLog(
    url=N_04_SOURCES, release="vllm-ascend-0.20.2rc1", hardware="atlas_800i_a3", kind="dense",
    overrides=tuple(o.replace("utilization=0.9", "utilization=0.4") for o in N_04.overrides),
    pinned="as N-04, utilisation 0.4 (the A/B axis)",
    log=lines(("(EngineCore pid=1) INFO 09-10 10:00:00", "[kv_cache_utils.py:1316] GPU KV cache size: 216,704 tokens"),
              ("(EngineCore pid=1) INFO 09-10 10:00:00",
               "[kv_cache_utils.py:1321] Maximum concurrency for 8,192 tokens per request: 26.45x")))

#: W3-01's breakdown line, as printed in vllm-ascend PR #9606 (``docs/source/installation.md`` on the PR branch, the
#: run whose KV lines W3-01 keeps): the generate runner on N-04's model family and batch at the same release.
W3_01_BREAKDOWN = lines((
    "(EngineCore pid=75652) INFO 05-27 11:41:12",
    "[worker.py:546] Free memory on device (60.89/61.27 GiB) on startup. Desired GPU memory utilization is (0.92, "
    "56.37 GiB). Actual usage: 1.14 GiB for weights, 0.22 GiB for peak activation, 0.03 GiB for non-torch memory, "
    "0.09 GiB for NPU graph memory. Replace gpu_memory_utilization with `--kv-cache-memory=58786898124` (54.75 GiB) to "
    "fit into requested memory, or `--kv-cache-memory=63643382784` (59.27 GiB) to fully utilize NPU free memory. "
    "Current KV cache memory: 54.98 GiB."))
