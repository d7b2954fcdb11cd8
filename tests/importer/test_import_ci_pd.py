"""vllm-ascend's public CI PD configs (``tests/data/ci_pd/``, vendored at v0.23.0 and v0.25.1rc1) through
``python -m ascendflow.import``: each is imported with the installed vLLM's parser (:mod:`ascendflow.importer.pd`),
planned on its own release row, and every ``vllm serve`` the plan writes, node by node and DP rank by DP rank, equals
the one CI starts (options as a set, values as vLLM's parser types them, JSON parsed), prefill and decode alike; each
difference has its reason, listed here per role. Configs vLLM itself would refuse are refused with one line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ascendflow.importer.ci import node_ip
from ascendflow.importer.pd_roundtrip import pd_round_trip
from ascendflow.importer.sources import read_pd_config, read_yaml
from ascendflow.schema.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "ci_pd"
Q = ["--quantization"]  # vllm-ascend >= 0.17.0rc1 detects 'ascend' (engine_rules quantization_flag)
KV = "--kv-transfer-config"  # kv_port out of AscendDirect's range, engine_id <role><i>, use_ascend_direct not written
RPC = "--data-parallel-rpc-port"  # parallel.data_parallel_rpc_port: ascendflow's own port
EPLB = ["dynamic_eplb", "num_iterations_eplb_update", "num_wait_worker_iterations", "init_redundancy_expert",
        "gate_eplb"]  # read only under eplb_config from vllm-ascend 0.18.0 (additional_config_keys.yaml)
RECOMPUTE = ["recompute_scheduler_enable"]  # ignored on P nodes (v0.23.0 platform.py check_and_update_config)
MTP1 = {"prefill": (Q, [RPC, KV], RECOMPUTE), "decode": (Q, [RPC, KV], [])}
#: config -> role -> (flags the plan does not write, flags it writes changed (each with its reason), the role's
#: --additional-config keys not carried), over every process of the role.
EXPECTED = {
    "DeepSeek-V3@v0.23.0": {"prefill": (Q, [KV], []), "decode": (Q, [KV], [])},
    **{f"DeepSeek_V3.1T_MTP1{w}_PD@{v}": MTP1 for w in ("", "_128K_1K", "_3_5K_1_5K") for v in ("v0.23.0", "v0.25.1rc1")},
    # prefill runs 1 MTP token (PD tutorial: 1 on P nodes for non-hybrid models)
    **{f"DeepSeek_V3.1T_MTP3_PD@{v}": {"prefill": (Q, [RPC, KV, "--speculative-config"], RECOMPUTE),
                                       "decode": (Q, [RPC, KV], [])} for v in ("v0.23.0", "v0.25.1rc1")},
    # decode capture sizes [3, 4, ...] rounded to multiples of 1 + k = 2 as vLLM rounds them; every prefill
    # --additional-config key is one P nodes ignore
    **{f"DeepSeek_V3.1T_layerwise_PD@{v}": {"prefill": (["--additional-config", *Q], [RPC, KV], RECOMPUTE),
                                            "decode": (Q, ["--compilation-config", RPC, KV], [])}
       for v in ("v0.23.0", "v0.25.1rc1")},
    # prefill DP1: vLLM reads no DP address or RPC port, the plan writes none (CI's prefill swaps the two)
    "QWEN3_235B_PD@v0.23.0": {"prefill": (["--additional-config", "--data-parallel-address", RPC, *Q], [KV],
                                          ["ascend_scheduler_config"]),
                              "decode": (Q, [RPC, KV], EPLB)},
    "QWEN3_235B_PD_3_5K_1_5k@v0.23.0": {"prefill": (["--additional-config", *Q], [RPC, KV], ["ascend_scheduler_config"]),
                                        "decode": (Q, [RPC, KV], EPLB)},
    "Qwen3-235B-W8A8@v0.23.0": {"prefill": (Q, [KV], []), "decode": (Q, [KV], [])},
    **{f"Qwen3-235B-disagg-pd@{v}": {"prefill": ([], [KV], []), "decode": ([], [KV], [])}
       for v in ("v0.23.0", "v0.25.1rc1")},
}
#: Configs vLLM's own parser refuses (CI's own files), with the one line.
REFUSED = {
    # prefill: --data-parallel-rpc-port given no value at v0.25.1rc1
    "QWEN3_235B_PD@v0.25.1rc1": "--data-parallel-rpc-port: expects one value and none was given (vLLM's parser: "
                                "expected one argument) ({path} node 0 rank 0); fix: give one "
                                "(--data-parallel-rpc-port 8000) or drop the flag",
    # decode: a --compilation-config that is not JSON
    "QWEN3_235B_PD_3_5K_1_5k@v0.25.1rc1": "--compilation-config: vLLM's parser: 1 validation error for "
                                          "CompilationConfig Invalid JSON: expected `,` or `}}` at line 1 column 76",
}


def _release(name: str) -> str:
    return "vllm-ascend-" + name.split("@v", 1)[1]


def test_every_vendored_pd_config_is_listed():
    assert sorted(p.stem for p in DATA.glob("*.yaml")) == sorted([*EXPECTED, *REFUSED])
    assert len(EXPECTED) >= 10


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_pd_config_round_trips_per_role(name):
    imported = read_pd_config(str(DATA / f"{name}.yaml"), release=_release(name))
    plan, trips = pd_round_trip(imported)
    seen = {}
    for k, ranks in enumerate(trips):
        for trip, command in zip(ranks, imported.nodes[k]):
            assert trip.unexplained == [], f"node {k}"
            assert all(reason for *_, reason in trip.changed)
            # every option of the source is accounted for: the same, changed with a reason, or named as not written
            accounted = {*trip.same, *(f[2:].replace("-", "_") for f, _ in trip.not_written),
                         *(c[0][2:].replace("-", "_") for c in trip.changed)}
            assert {*command.given, "model_tag"} <= accounted
            written, changed = seen.setdefault(command.role, (set(), set()))
            written |= {f for f, _ in trip.not_written}
            changed |= {c[0] for c in trip.changed if c[0] != "--model-tag"}
    assert sorted(seen) == ["decode", "prefill"]
    for role, (not_written, changed, additional) in EXPECTED[name].items():
        assert (sorted(seen[role][0]), sorted(seen[role][1]), imported.role_dropped_additional[role]) == (
            sorted(not_written), sorted(changed), additional), role
    raw = read_yaml(str(DATA / f"{name}.yaml"))
    if "templates" in raw:
        # the proxy, as external_dp/scripts/runtime.py build_proxy_server_cmd (v0.23.0) starts it on node 0, port 1999;
        # CI's harness runs load_balance_proxy_server_example.py for every connector (external_dp_config.py
        # PROXY_SCRIPT_BY_ROUTING_TYPE), ascendflow the layerwise proxy for MooncakeLayerwiseConnector (pd.proxy.kind)
        ranks = {role: [(f"${{ASCENDFLOW_NODE{c.node}_IP}}", str(c.values["port"])) for node in imported.nodes
                        for c in node if c.role == role] for role in ("prefill", "decode")}
        script = "layerwise" if "layerwise" in name else "load_balance"
        assert plan.proxy.command[1].endswith({"layerwise": "/load_balance_proxy_layerwise_server_example.py",
                                               "load_balance": "/load_balance_proxy_server_example.py"}[script])
        assert plan.proxy.command[2:] == [
            "--host", "${ASCENDFLOW_NODE0_IP}", "--port", "1999", "--prefiller-hosts", *[h for h, _ in ranks["prefill"]],
            "--prefiller-ports", *[p for _, p in ranks["prefill"]], "--decoder-hosts", *[h for h, _ in ranks["decode"]],
            "--decoder-ports", *[p for _, p in ranks["decode"]]]


def test_kv_transfer_changes_are_named_whole():
    """The decode layout CI's MTP3 file names (TP1 × DP32) is not the one it runs (TP4 × DP8 at v0.25.1rc1): the plan
    writes the real one, and says so."""
    name = "DeepSeek_V3.1T_MTP3_PD@v0.25.1rc1"
    imported = read_pd_config(str(DATA / f"{name}.yaml"), release=_release(name))
    _, trips = pd_round_trip(imported)
    reasons = {k: [c[3] for c in ranks[0].changed if c[0] == KV] for k, ranks in enumerate(trips)}
    layout = ("kv_connector_extra_config layout {'prefill': {'dp_size': 2, 'tp_size': 8}, 'decode': {'dp_size': 32, "
              "'tp_size': 1}} -> the roles' own {'prefill': {'dp_size': 2, 'tp_size': 8}, 'decode': {'dp_size': 8, "
              "'tp_size': 4}} (CI's file names another layout; MooncakeConnector _get_prefill_decode_size pairs "
              "ranks by it)")
    assert reasons == {
        0: ["kv_port 30000 -> 36000 (out of AscendDirect's random-port range); engine_id 0 -> prefill0; " + layout],
        1: ["kv_port 30100 -> 36100 (out of AscendDirect's random-port range); engine_id 1 -> prefill1; " + layout],
        2: ["kv_port 30200 -> 36200 (out of AscendDirect's random-port range); engine_id 2 -> decode0; " + layout],
        3: ["kv_port 30200 -> 36200 (out of AscendDirect's random-port range); engine_id 2 -> decode0; " + layout]}


def test_two_instances_sharing_an_engine_id_stay_two():
    """CI's layerwise config gives both one-node prefill DP groups engine_id 0 and kv_port 30000: two instances (each
    its own DP master), written as prefill0 / prefill1 with their own kv_port."""
    name = "DeepSeek_V3.1T_layerwise_PD@v0.23.0"
    imported = read_pd_config(str(DATA / f"{name}.yaml"), release=_release(name))
    prefill = imported.recipe["pd"]["prefill"]
    assert (prefill["instances"], prefill["nodes"], prefill["data_parallel_size"], prefill["kv_port"],
            prefill["kv_port_stride"]) == (2, 1, 2, 36000, 100)
    assert imported.engine_ids == {0: "prefill0", 1: "prefill1", 2: "decode0", 3: "decode0"}
    _, trips = pd_round_trip(imported)
    assert [c[3] for c in trips[1][0].changed if c[0] == KV] == [
        "kv_port 30000 -> 36100 (out of AscendDirect's random-port range, +100: this instance's kv_port_stride step, "
        "where CI gives every instance one port); engine_id 0 -> prefill1; use_ascend_direct not written "
        "(MooncakeConnector does not read it)"]


def test_decode_only_async_scheduling_is_a_role_key():
    imported = read_pd_config(str(DATA / "QWEN3_235B_PD@v0.23.0.yaml"))
    assert "async_scheduling" not in imported.recipe["pd"]["prefill"]
    assert imported.recipe["pd"]["decode"]["async_scheduling"] is True
    # CI's DP1 prefill swaps --data-parallel-address and its RPC port; node addresses are the documentation range
    assert imported.commands[0].values["data_parallel_address"] == "12321"
    assert imported.commands[1].values["data_parallel_address"] == node_ip(1) == "192.0.2.2"


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_vllm_refuses_is_one_line(name):
    path = str(DATA / f"{name}.yaml")
    with pytest.raises(ConfigError) as error:
        read_pd_config(path)
    assert str(error.value).startswith(REFUSED[name].format(path=path)) and "\n" not in str(error.value)


def test_the_cli_imports_a_pd_config(tmp_path):
    out = tmp_path / "qwen3_pd.yaml"
    proc = subprocess.run([sys.executable, "-m", "ascendflow.import", str(DATA / "Qwen3-235B-disagg-pd@v0.23.0.yaml"),
                           "-o", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.startswith("round trip")] == [
        "round trip: node 0 (prefill): 1 processes, 0 with an unexplained difference",
        "round trip: node 1 (decode): 1 processes, 0 with an unexplained difference"]
    text = out.read_text()
    assert text.splitlines()[1] == (f"# Imported by `python -m ascendflow.import` from the PD CI config "
                                    f"{DATA / 'Qwen3-235B-disagg-pd@v0.23.0.yaml'}; kv_port moved out of "
                                    "AscendDirect's range where CI's lies inside it. Each node's first command:")
    assert "# Plan it: python -m ascendflow +recipe=qwen3_pd run.mode=plan" in text


def _with_extra(tmp_path: Path, decode_extra: list[str]) -> str:
    """The vendored internal-DP PD config with ``--max-logprobs 5`` added to every node, and ``decode_extra`` more
    on the decode node."""
    raw = read_yaml(str(DATA / "Qwen3-235B-disagg-pd@v0.23.0.yaml"))
    for k, node in enumerate(raw["deployment"]):
        node["server_cmd"] += " --max-logprobs 5" + "".join(f" {t}" for t in (decode_extra if k == 1 else []))
    path = tmp_path / "pd.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_further_flags_both_roles_give_go_to_extra_args_and_round_trip(tmp_path):
    imported = read_pd_config(_with_extra(tmp_path, []), release="vllm-ascend-0.23.0")
    assert imported.recipe["engine"]["extra_args"] == ["--max-logprobs", "5"]
    _, trips = pd_round_trip(imported)
    assert [[t.unexplained for t in ranks] for ranks in trips] == [[[]], [[]]]
    assert all("max_logprobs" in ranks[0].same for ranks in trips)


def test_further_flags_of_one_role_only_are_one_line(tmp_path):
    with pytest.raises(ConfigError) as error:
        read_pd_config(_with_extra(tmp_path, ["--enable-log-requests"]))
    assert str(error.value) == ("decode='--max-logprobs 5 --enable-log-requests': further flags differ from the other "
                                "role's (--max-logprobs 5); engine.extra_args is one list for both roles")


def test_the_ci_benchmark_is_the_recipe_workload():
    """New-user trial 2026-12-04: a PD config's recipe took ``workload=random`` with its defaults (256 in, 128 out,
    64 prompts, concurrency 32), not CI's benchmark. Its performance case now sets the workload as a co-located
    config's does (:func:`ascendflow.importer.ci.carry_workload`): the dataset name's input length, ``max_out_len``,
    ``num_prompts``, ``batch_size`` as concurrency, ``request_rate`` (0: all at once); CI's 1-token warm-up case is
    not the benchmark; a config with accuracy cases only keeps the defaults, named."""
    from ascendflow.importer.roundtrip import compose_recipe
    from ascendflow.schema import load_spec

    inf = float("inf")
    expected = {
        "Qwen3-235B-disagg-pd@v0.23.0": (
            {"random_input_len": 3500, "random_output_len": 1500, "num_prompts": 2800, "max_concurrency": 700,
             "request_rate": 11.2, "ignore_eos": True},
            ["CI's performance case perf (vllm-ascend/GSM8K-in3500-bs2800) as the random dataset: 3500 input tokens "
             "(ESTIMATE: the dataset name's in<N>, AISBench's prompt through the chat template), 1500 output "
             "(max_out_len, EOS ignored), 2800 prompts, concurrency 700 (batch_size), 11.2 req/s"]),
        "DeepSeek_V3.1T_MTP1_128K_1K_PD@v0.23.0": (
            {"random_input_len": 131072, "random_output_len": 1024, "num_prompts": 1, "max_concurrency": 1,
             "request_rate": inf, "ignore_eos": True},
            ["CI's performance case perf_1 (vllm-ascend/GSM8K-in128k-bs512-prefix90-ds) as the random dataset: 131072 "
             "input tokens (ESTIMATE: the dataset name's in<N>, AISBench's prompt through the chat template), 1024 "
             "output (max_out_len, EOS ignored), 1 prompts, concurrency 1 (batch_size), all at once (request_rate 0)",
             "the dataset's 90 % shared prefix (vllm-ascend/GSM8K-in128k-bs512-prefix90-ds): no workload key for it "
             "(random prompts share none); not carried"]),
        "QWEN3_235B_PD@v0.23.0": (
            None, ["the CI config has no performance benchmark case (only accuracy): the workload option's defaults"]),
    }
    for name, (workload, named) in expected.items():
        imported = read_pd_config(str(DATA / f"{name}.yaml"), release="vllm-ascend-0.23.0")
        assert imported.recipe.get("workload") == workload, name
        assert [why for flag, why in imported.named if flag == "workload"] == named, name
        assert {"override /workload": "random"} in imported.recipe["defaults"]
    spec = load_spec(compose_recipe(read_pd_config(str(DATA / "Qwen3-235B-disagg-pd@v0.23.0.yaml"),
                                                   release="vllm-ascend-0.23.0")))
    assert spec.workload.model_dump() == {
        "name": "random", "dataset": "random", "num_prompts": 2800, "max_concurrency": 700, "request_rate": 11.2,
        "max_output_tokens": 64, "random_input_len": 3500, "random_output_len": 1500, "prefix_suffix_len": 64,
        "num_prefixes": 4, "temperature": 0.0, "ignore_eos": True, "seed": 0}
