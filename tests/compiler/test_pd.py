"""PD disaggregation: per-role compile, the consistency checks (one refusal each), decode/prefill sizing, the
``--kv-transfer-config`` per instance, the proxy and the idle-device warning (pure compiler, no engine)."""

from __future__ import annotations

import time

import pytest

from ascendflow.compiler import compile_plan
from ascendflow.compiler.checks.pd import check_decode_capacity, check_kv_transfer, check_proxy
from ascendflow.compiler.compile import compile_colocated
from ascendflow.compiler.deployment import _role_spec
from ascendflow.models.resolve import resolve_model
from ascendflow.schema import ConfigError, load_spec
from tests.conftest import compose_config, run_ascendflow


def _spec(recipe: str, *overrides: str):
    raw = compose_config([f"+recipe={recipe}", *overrides])
    raw.pop("hydra", None)
    return load_spec(raw)


def _plan(recipe: str, *overrides: str):
    spec = _spec(recipe, *overrides)
    return compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture, model_path="/m")


def _refusal(recipe: str, *overrides: str) -> str:
    with pytest.raises(ConfigError) as info:
        _plan(recipe, *overrides)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_deepseek_2p1d_kv_transfer_and_workers():
    plan = _plan("deepseek_r1_pd_2p1d")
    layout = {"prefill": {"dp_size": 2, "tp_size": 8}, "decode": {"dp_size": 32, "tp_size": 1}}
    assert plan.roles["prefill"].kv_transfer == [
        {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_producer", "kv_port": 36000, "engine_id": "prefill0",
         "kv_connector_extra_config": layout},
        {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_producer", "kv_port": 36100, "engine_id": "prefill1",
         "kv_connector_extra_config": layout}]
    assert plan.roles["decode"].kv_transfer == [
        {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_consumer", "kv_port": 36200, "engine_id": "decode0",
         "kv_connector_extra_config": layout}]
    assert [(w.node_rank, w.dp_rank, w.devices) for w in plan.roles["prefill"].workers] == [
        (0, 0, list(range(8))), (0, 1, list(range(8, 16))), (1, 0, list(range(8))), (1, 1, list(range(8, 16)))]
    decode = plan.roles["decode"].workers
    assert [(w.node_rank, w.dp_rank, w.devices) for w in decode] == [
        (2 + r // 16, r, [r % 16]) for r in range(32)]
    assert decode[17].command[decode[17].command.index("--data-parallel-address") + 1] == "${ASCENDFLOW_NODE2_IP}"
    assert decode[17].command[-2:] == ["--port", "7101"]
    assert plan.roles["decode"].kv_port_ranges == [["${ASCENDFLOW_NODE2_IP}", 36200, 36215, "decode0"],
                                                   ["${ASCENDFLOW_NODE3_IP}", 36216, 36231, "decode0"]]
    proxy = plan.proxy.command
    assert proxy[proxy.index("--prefiller-ports") + 1:proxy.index("--decoder-hosts")] == ["7100", "7101"] * 2
    assert proxy[proxy.index("--decoder-ports") + 1:] == [str(7100 + i) for i in range(16)] * 2
    assert plan.target.nodes == 4 and len(plan.workers) == 36


def test_internal_dp_lists_one_endpoint_per_instance():
    plan = _plan("qwen3_235b_w8a8_pd_3nodes")
    assert plan.roles["decode"].endpoints == [["${ASCENDFLOW_NODE1_IP}", 8000]]
    node2 = plan.roles["decode"].workers[1].command
    assert "--headless" in node2
    assert node2[node2.index("--data-parallel-start-rank") + 1] == "4"


def test_decode_mlapo_copies_only_on_decode():
    """v0.23.0 row: mlapo_gating=decode_only (mla_v1.py): the same layout weighs more on a KV consumer."""
    spec = _spec("deepseek_r1_pd_2p1d")
    arch = resolve_model(spec.model, need_weights=False).architecture
    role = _role_spec(spec, spec.pd.decode)
    weights = {r: compile_colocated(role, arch, model_path="/m", role=r).memory.weights_bytes
               for r in (None, "prefill", "decode")}
    assert weights[None] == weights["prefill"] < weights["decode"]


def test_plan_hash_covers_roles_but_not_the_model_path():
    spec = _spec("qwen3_8b_pd_single_node")
    arch = resolve_model(spec.model, need_weights=False).architecture
    hashes = {compile_plan(spec, arch, model_path=path).plan_hash for path in ("/a", "/b")}
    assert len(hashes) == 1
    assert _plan("qwen3_8b_pd_single_node", "pd.decode.max_num_seqs=8").plan_hash not in hashes
    assert _plan("qwen3_8b_pd_single_node", "pd.decode.api_port=13702").plan_hash not in hashes


def test_colocated_plan_has_no_roles_and_says_idle_devices():
    plan = _plan("deepseek_r1")
    assert plan.roles is None and '"roles"' not in plan.to_json()
    assert plan.warnings[-1] == (
        "8 of 16 devices idle on each of 2 node(s) with TP8 × PP1 × DP2; nearest layouts that use them: TP8 × DP4 "
        "(2 DP rank(s) per node); TP16 × DP2 (one DP rank per node) (memory and KV change: recompile to compare)")


@pytest.mark.parametrize("recipe", ["deepseek_r1_pd_2p1d", "qwen3_235b_pd_1p1d", "qwen3_235b_w8a8_pd_3nodes",
                                    "qwen3_8b_pd_single_node"])
def test_pd_compile_is_fast(recipe):
    spec = _spec(recipe)
    arch = resolve_model(spec.model, need_weights=False).architecture
    compile_plan(spec, arch, model_path="/m")
    start = time.perf_counter()
    compile_plan(spec, arch, model_path="/m")
    assert time.perf_counter() - start < 0.25  # ~40-55 ms here on a loaded 2-core machine


REFUSALS = [
    (["pd.prefill.tensor_parallel_size=1"],
     "pd.prefill.tensor_parallel_size=1: < decode TP 4: mooncake_connector.py _get_prefill_decode_size refuses"),
    (["pd.decode.tensor_parallel_size=3", "pd.decode.data_parallel_size=4"],
     "pd.prefill.tensor_parallel_size=8: not a multiple of decode TP 3"),
    (["pd.prefill.kv_port=30000"],
     "pd.prefill.kv_port=30000: prefill0's handshake ports 30000-30015 overlap AscendDirectTransport's random ports "
     "[20000, 36000) on 16-NPU nodes (multi-node PD tutorial, kv_port guide: 'Address already in use'); "
     "fix: kv_port>=36000"),
    (["pd.prefill.additional_config.recompute_scheduler_enable=true"],
     "pd.prefill.additional_config.recompute_scheduler_enable=True: is for decode (KV consumer) nodes only"),
    (["pd.proxy.kind=layerwise"], "pd.proxy.kind='layerwise': MooncakeConnectorV1 needs the load_balance proxy"),
    (["pd.decode.data_parallel_size=8"],
     "pd.decode.dp_ranks_per_node=8: × TP 4 = 32 devices per node, the node has 16; fix: pd.decode.nodes=2"),
    (["pd.decode.num_speculative_tokens=1"], "with decode 1: non-hybrid models need 1 on prefill and >= 1 on decode"),
]


@pytest.mark.parametrize("overrides,fragment", REFUSALS)
def test_consistency_refusals(overrides, fragment):
    assert fragment in _refusal("qwen3_235b_pd_1p1d", *overrides)


def test_single_node_ports_and_devices():
    message = _refusal("qwen3_8b_pd_single_node", "pd.decode.kv_port=30000")
    assert message.startswith("pd.decode.kv_port=30000: decode0's handshake ports 30000-30000 overlap prefill0's "
                              "30000-30000 on node 0 (each engine listens on kv_port + dp_rank × TP × PP + tp_rank, "
                              "mooncake_connector.py); fix: kv_port>=30001 or a larger kv_port_stride")
    message = _refusal("qwen3_8b_pd_single_node", "pd.decode.tensor_parallel_size=1", "pd.prefill.instances=8")
    assert "pd.single_node=True: prefill 8 + decode 1 devices exceed the node's 8" in message


CLASH = " (one listener per port and node, else 'Address already in use'); fix: "
PORT_CLASHES = [
    (["pd.prefill.instances=2", "pd.prefill.kv_port_stride=10"],
     "pd.decode.api_port=13701: decode0's API port 13701 (DP rank 0) on node 0 is also prefill1's API port 13701 "
     "(DP rank 0)" + CLASH + "pd.decode.api_port=13702"),
    (["pd.decode.api_port=13700"],
     "pd.decode.api_port=13700: decode0's API port 13700 (DP rank 0) on node 0 is also prefill0's API port 13700 "
     "(DP rank 0)" + CLASH + "pd.decode.api_port=13701"),
    (["pd.proxy.port=13701"],
     "pd.proxy.port=13701: the proxy's port 13701 on node 0 is also decode0's API port 13701 (DP rank 0)" + CLASH +
     "pd.proxy.port=13702"),
    (["pd.decode.api_port=30100"],
     "pd.decode.api_port=30100: decode0's API port 30100 (DP rank 0) on node 0 is also decode0's handshake port "
     "30100" + CLASH + "pd.decode.api_port=30101"),
]


@pytest.mark.parametrize("overrides,line", PORT_CLASHES)
def test_listening_ports_clash_is_refused(overrides, line):
    assert _refusal("qwen3_8b_pd_single_node", *overrides) == line


def test_instances_sharing_a_node_get_their_own_api_ports():
    plan = _plan("qwen3_8b_pd_single_node", "pd.prefill.instances=2", "pd.prefill.kv_port_stride=10",
                 "pd.decode.api_port=13702")
    ports = [int(w.command[w.command.index("--port") + 1]) for w in plan.workers]
    assert ports == [13700, 13701, 13702]
    assert plan.roles["prefill"].endpoints == [["${ASCENDFLOW_NODE0_IP}", 13700], ["${ASCENDFLOW_NODE0_IP}", 13701]]
    proxy = plan.proxy.command
    assert proxy[proxy.index("--prefiller-ports") + 1:proxy.index("--prefiller-ports") + 3] == ["13700", "13701"]


def test_proc_port_clash_exits_2_in_one_line(tmp_path):
    proc = run_ascendflow(["+recipe=qwen3_8b_pd_single_node", "pd.proxy.port=13701", "run.mode=plan",
                           "tracking=none"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["error: " + PORT_CLASHES[2][1]]


def test_decode_sizing_names_how_many_fit():
    # A warning, not a refusal, as for a co-located plan (new-user trial of 2026-12-03: the search refused PD decode
    # roles for it while its co-located top pick planned with the warning): vLLM runs fewer requests at once.
    plan = _plan("qwen3_8b_pd_single_node", "workload.random_input_len=32000", "workload.random_output_len=4000",
                 "pd.decode.max_num_seqs=16")
    # 2040 blocks (one the null block) / ceil(36000 / 128) = 282 blocks per request -> 7 requests
    assert [w for w in plan.warnings if "decode KV" in w] == [
        "decode: decode KV per DP rank holds 7 requests of 36000 tokens (ISL + OSL + spec tokens; 2067 blocks × 128), "
        "fewer than max_num_seqs=16: vLLM runs at most 7 at once (the rest wait, or are preempted into recompute), "
        "and the prediction is priced so; fixes: pd.decode.max_num_seqs<=7, more decode DP ranks or instances (now "
        "1 × DP1), raise pd.decode.gpu_memory_utilization or pin the KV (engine.pin_kv_cache_memory=true)"]


def test_decode_kv_without_one_request_is_refused():
    # (The compiler's max_model_len check refuses such a plan first; the rule itself still refuses 0 requests.)
    with pytest.raises(ConfigError) as err:
        check_decode_capacity(200, 128, 16, 36000, "more decode DP ranks")
    assert str(err.value) == (
        "pd.decode.max_num_seqs=16: decode KV per DP rank holds 0 requests of 36000 tokens (ISL + OSL + spec tokens; "
        "199 blocks × 128): not one request fits; fixes: more decode DP ranks, raise "
        "pd.decode.gpu_memory_utilization or pin the KV (engine.pin_kv_cache_memory=true)")
    assert check_decode_capacity(2040, 128, 7, 36000, "x") == []


def test_prefill_sizing():
    # 2 GiB / (147456 B/token × 128) = 113 blocks, one the null block: 112 × 128 = 14336 tokens < 40000
    message = _refusal("qwen3_8b_pd_single_node", "engine.max_model_len=8192",
                       "pd.prefill.kv_cache_memory_bytes=2147483648")
    assert message.startswith("pd.prefill.max_num_batched_tokens=40000: a step's prompts need 40000 KV tokens, the "
                              "prefill KV per DP rank holds 14336; fixes: pd.prefill.max_num_batched_tokens<=14336")


def test_role_refusal_names_the_role_key():
    message = _refusal("qwen3_8b_pd_single_node", "pd.decode.gpu_memory_utilization=0.3")
    assert message.startswith("pd.decode.gpu_memory_utilization=0.3: leaves a negative KV budget")


def test_extra_config_engine_ids_and_proxy_checked():
    plan = _plan("qwen3_235b_pd_1p1d")
    layout = {"prefill": {"dp_size": 2, "tp_size": 8}, "decode": {"dp_size": 4, "tp_size": 4}}
    configs = [c for r in plan.roles.values() for c in r.kv_transfer]
    wrong = [{**configs[0], "kv_connector_extra_config": {**layout, "decode": {"dp_size": 4, "tp_size": 8}}}]
    with pytest.raises(ConfigError, match="kv_connector_extra_config.decode.*differs from the decode role's layout"):
        check_kv_transfer(wrong, layout)
    with pytest.raises(ConfigError, match="engine_id='prefill0': used by two instances"):
        check_kv_transfer([configs[0], configs[0]], layout)
    endpoints = {n: r.endpoints for n, r in plan.roles.items()}
    check_proxy(plan.proxy.command, endpoints)
    with pytest.raises(ConfigError, match="lists 1 decode endpoints, the plan serves 2"):
        check_proxy(plan.proxy.command, {**endpoints, "decode": endpoints["decode"] * 2})


def test_plan_cli_prints_role_lines(tmp_path):
    proc = run_ascendflow(["+recipe=qwen3_8b_pd_single_node", "run.mode=plan", "tracking=none",
                           f"hydra.run.dir={tmp_path}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "prefill (kv_producer, 1 × TP1 × DP1, NONE): weights" in out
    assert "decode (kv_consumer, 1 × TP1 × DP1, FULL_DECODE_ONLY): weights" in out
    assert "decode role: memory per device, 61.28 GiB total, requested 55.15 GiB" in out
    assert ("PD deployment: 6 of 8 devices idle on each of 1 node(s) (the roles use 2 devices on node 0)"
            in " ".join(proc.stderr.split()) + out)
    assert sorted(p.name for p in (tmp_path / "launch").iterdir()) == ["node0.sh", "preflight.sh", "proxy.sh"]


def test_roles_share_the_run_hardware_so_one_chip_generation():
    """Same chip generation for prefill and decode holds by construction: a role has no hardware key."""
    with pytest.raises(ConfigError) as info:
        _spec("qwen3_235b_pd_1p1d", "+pd.prefill.hardware=atlas_800i_a2")
    assert str(info.value) == ("pd.prefill.hardware='atlas_800i_a2': unknown key (not part of the schema; check the "
                               "spelling)")
    plan = _plan("qwen3_235b_pd_1p1d")
    assert {w.node_rank for w in plan.workers} == {0, 1} and plan.target.hardware == "atlas_800i_a3"
