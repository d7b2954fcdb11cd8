"""Issue 26 items 5-7: vLLM's defaults unless the config says otherwise, ``engine.extra_args`` on every ``vllm serve``,
removing a recipe's entry, ``model.served_model_name``, PD socket variables and ``"$@"``, the Ascend hybrid block size
the scripts pass, the 300I Duo's four devices. Argv is read back with vLLM's own server parser."""

from __future__ import annotations

import pytest

from ascendflow.compiler.deployment import deployment_scripts
from ascendflow.report import engine_arg_rows
from ascendflow.schema import ConfigError
from tests.conftest import compose_config, plan_for

LADDER_256 = [1, 2, 4, 8, *range(16, 257, 8)]  # vLLM's capture ladder up to 256 (1, 2, 4, then steps of 8)
EXTRA = ["--enable-log-requests", "--max-logprobs", "5"]


def _parser():
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser())


def _parse(command: list[str]):
    """A worker's ``vllm serve MODEL ...`` argv as vLLM's server parser reads it (``--quantization ascend`` is the
    plugin's and not a choice of vLLM's parser)."""
    argv = command[2:]
    if "--quantization" in argv:
        i = argv.index("--quantization")
        argv = argv[:i] + argv[i + 2:]
    return _parser().parse_args(argv)


def test_a_pd_plan_without_max_num_seqs_passes_none_and_captures_vllm_s_default_ladder():
    spec, plan = plan_for(["+recipe=qwen3_8b_pd_single_node"])
    assert (spec.engine.max_num_seqs, spec.pd.prefill.max_num_seqs, spec.pd.decode.max_num_seqs) == (None, None, None)
    # vllm-ascend 0.23.0 row: get_batch_defaults reports 0 device memory there (batch_defaults: fallback) -> 256
    assert {n: r.engine_args["max_num_seqs"] for n, r in plan.roles.items()} == {"prefill": 256, "decode": 256}
    assert plan.engine_defaults == ["max_num_seqs"]
    assert [_parse(w.command).max_num_seqs for w in plan.workers] == [None, None]
    assert plan.roles["decode"].graph.capture_sizes == LADDER_256
    decode = _parse(plan.roles["decode"].workers[0].command)
    assert decode.compilation_config.cudagraph_capture_sizes == LADDER_256


def test_a_role_s_own_max_num_seqs_is_written_and_the_other_role_s_is_not():
    _, plan = plan_for(["+recipe=qwen3_8b_pd_single_node", "pd.decode.max_num_seqs=32"])
    assert {n: _parse(r.workers[0].command).max_num_seqs for n, r in plan.roles.items()} == {"prefill": None,
                                                                                             "decode": 32}
    assert plan.roles["decode"].graph.capture_sizes == [1, 2, 4, 8, 16, 24, 32]


def test_the_co_located_default_is_vllm_s_own_default_on_this_cpu():
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    _, plan = plan_for([])
    _, seqs = EngineArgs.get_batch_defaults(world_size=1)
    assert plan.engine_args["max_num_seqs"] == seqs[UsageContext.OPENAI_API_SERVER] == 128
    assert "--max-num-seqs" not in plan.serve_command and plan.engine_defaults == ["max_num_seqs"]
    assert engine_arg_rows(plan) == {"vLLM defaults": "max_num_seqs=128 (planned; not written, vLLM picks it)"}
    _, set_plan = plan_for(["engine.max_num_seqs=16"])
    assert set_plan.engine_defaults == [] and set_plan.serve_command[
        set_plan.serve_command.index("--max-num-seqs") + 1] == "16"


@pytest.mark.parametrize("recipe", ["qwen3_235b_tp16_2nodes", "qwen3_235b_tp8pp2_2nodes_ray", "deepseek_r1_pd_2p1d",
                                    "qwen3_8b_pd_single_node", "smollm2_cpu"])
def test_extra_args_reach_every_vllm_serve_and_the_hash(recipe):
    _, base = plan_for([f"+recipe={recipe}"])
    _, plan = plan_for([f"+recipe={recipe}", "engine.extra_args=[--enable-log-requests,--max-logprobs,5]"])
    assert plan.extra_args == EXTRA and plan.plan_hash != base.plan_hash
    serves = [w.command for w in plan.workers if w.command[:2] != ["ray", "start"]]
    assert len(serves) == (1 if recipe.endswith("_ray") else len(plan.workers))
    for command in serves:
        args = _parse(command) if command[0] == "vllm" else _parser().parse_args(command[3:])
        assert (args.enable_log_requests, args.max_logprobs) == (True, 5)
    before = [w.command for w in base.workers if w.command[:2] != ["ray", "start"]]
    for command, without in zip(serves, before):  # the tokens as one run, after the planned flags
        i = command.index(EXTRA[0])
        assert (command[i:i + 3], command[:i] + command[i + 3:]) == (EXTRA, without)
    scripts = deployment_scripts(plan)
    assert all("--enable-log-requests --max-logprobs 5" in scripts[f"node{k}.sh"] for k in
               sorted({w.node_rank for w in plan.workers if w.command[:2] != ["ray", "start"]}))
    assert engine_arg_rows(plan)["extra args"] == ("--enable-log-requests --max-logprobs 5 (engine.extra_args, on "
                                                   "every vllm serve)")


def test_extra_args_as_a_dict_are_the_same_tokens():
    _, listed = plan_for(["engine.extra_args=[--enable-log-requests,--max-logprobs,5,--no-enable-log-outputs]"])
    _, mapped = plan_for(["engine.extra_args={enable_log_requests: true, max-logprobs: 5, "
                          "--enable-log-outputs: false, allowed-origins: null}"])
    assert mapped.extra_args == listed.extra_args == [*EXTRA, "--no-enable-log-outputs"]
    assert mapped.plan_hash == listed.plan_hash


@pytest.mark.parametrize(("tokens", "line"), [
    ("[--max-model-len,4096]", "engine.extra_args='--max-model-len': is planned by ascendflow; set "
                               "engine.max_model_len instead"),
    ("['--tensor-parallel-size=2']", "engine.extra_args='--tensor-parallel-size': is planned by ascendflow; set "
                                   "parallel.tensor_parallel_size instead"),
    ("[--no-enable-prefix-caching]", "engine.extra_args='--no-enable-prefix-caching': is planned by ascendflow; set "
                                     "engine.enable_prefix_caching instead"),
    ("[--kv-cache-memory-bytes,1]", "engine.extra_args='--kv-cache-memory-bytes': is planned by ascendflow; set "
                                    "engine.kv_cache_memory_bytes instead"),
    ("[5,--max-logprobs]", "engine.extra_args='5': must start with a flag (--name), e.g. [--enable-log-requests]"),
    # Keys ascendflow plans even when unset (null: no flag): a pass-through would bypass their planning.
    ("['--hf-overrides={\"max_position_embeddings\":131072}']", "engine.extra_args='--hf-overrides': is planned by "
                                                               "ascendflow; set model.hf_overrides instead"),
    ("[--async-scheduling]", "engine.extra_args='--async-scheduling': is planned by ascendflow; set "
                             "engine.async_scheduling instead"),
    ("['--speculative-config={}']", "engine.extra_args='--speculative-config': is planned by ascendflow; set "
                                    "engine.speculative_config instead"),
])
def test_a_flag_the_plan_sets_is_refused_with_its_key(tokens, line):
    with pytest.raises(ConfigError) as err:
        plan_for([f"engine.extra_args={tokens}"])
    assert str(err.value) == line


def test_served_model_name_is_the_servers_name():
    from ascendflow.runner.bench import served_name

    spec, plan = plan_for(["+recipe=qwen3_0_6b", "model.served_model_name=qwen3"])
    assert _parse(plan.serve_command).served_model_name == ["qwen3"]
    assert (spec.model.served_name, served_name(plan), plan.model["id"]) == ("qwen3", "qwen3", "Qwen/Qwen3-0.6B")
    _, default = plan_for(["+recipe=qwen3_0_6b"])
    assert served_name(default) == default.engine_args["served_model_name"] == "Qwen/Qwen3-0.6B"


@pytest.mark.parametrize("model", ["local", "qwen3_8b", "smollm2_135m", "tiny_deepseek"])
def test_trust_remote_code_and_served_model_name_compose_with_every_model_option(model, tmp_path):
    from ascendflow.__main__ import refuse_bad_overrides
    from ascendflow.schema import load_spec

    overrides = [f"model={model}", "model.trust_remote_code=true", "model.served_model_name=m"]
    overrides += [f"model.path={tmp_path}"] if model == "local" else []
    refuse_bad_overrides(overrides)
    raw = compose_config(overrides)
    raw.pop("hydra", None)
    spec = load_spec(raw)
    assert (spec.model.trust_remote_code, spec.model.served_model_name) == (True, "m")


def _vllm_ascend_env(plan) -> dict[str, dict[str, str]]:
    return {n: {k: v for k, v in r.env.items() if k.startswith("VLLM_ASCEND")} for n, r in plan.roles.items()}


def test_a_recipe_s_env_entry_is_removed_by_hydra_deletion_or_null():
    _, kept = plan_for(["+recipe=qwen3_235b_w8a8_pd_3nodes"])
    assert _vllm_ascend_env(kept) == {r: {"VLLM_ASCEND_ENABLE_FLASHCOMM1": "1", "VLLM_ASCEND_ENABLE_FUSED_MC2": "2"}
                                      for r in ("prefill", "decode")}
    _, deleted = plan_for(["+recipe=qwen3_235b_w8a8_pd_3nodes", "~ascend.env.VLLM_ASCEND_ENABLE_FLASHCOMM1"])
    _, nulled = plan_for(["+recipe=qwen3_235b_w8a8_pd_3nodes", "ascend.env.VLLM_ASCEND_ENABLE_FLASHCOMM1=null"])
    assert _vllm_ascend_env(deleted) == _vllm_ascend_env(nulled) == {r: {"VLLM_ASCEND_ENABLE_FUSED_MC2": "2"}
                                                                     for r in ("prefill", "decode")}
    assert deleted.plan_hash == nulled.plan_hash != kept.plan_hash
    assert "FLASHCOMM1" not in deployment_scripts(nulled)["node0.sh"]


def test_a_recipe_s_additional_config_key_is_removed_by_hydra_deletion_or_null():
    _, kept = plan_for(["+recipe=qwen3_235b_pd_1p1d"])
    assert {n: r.engine_args["additional_config"] for n, r in kept.roles.items()} == {
        r: {"enable_fused_mc2": 1, "enable_flashcomm1": True} for r in ("prefill", "decode")}
    for override in ("~ascend.additional_config.other.enable_flashcomm1",
                     "ascend.additional_config.other.enable_flashcomm1=null"):
        _, plan = plan_for(["+recipe=qwen3_235b_pd_1p1d", override])
        assert {n: r.engine_args["additional_config"] for n, r in plan.roles.items()} == {
            r: {"enable_fused_mc2": 1} for r in ("prefill", "decode")}


def test_pd_roles_on_one_node_export_the_socket_interface_and_pass_script_arguments():
    _, plan = plan_for(["+recipe=qwen3_8b_pd_single_node", "parallel.nic_name=eth0"])
    for role in plan.roles.values():
        assert {k: role.env[k] for k in ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME")} == {
            "GLOO_SOCKET_IFNAME": "eth0", "TP_SOCKET_IFNAME": "eth0", "HCCL_SOCKET_IFNAME": "eth0"}
    script = deployment_scripts(plan)["node0.sh"]
    engines = [line for line in script.splitlines() if line.startswith("( export")]
    assert len(engines) == 2 and all(line.endswith(' "$@" ) &') for line in engines)
    assert all("export GLOO_SOCKET_IFNAME=eth0; " in line for line in engines)


def test_qwen3_next_on_ascend_passes_the_block_size_the_plan_uses():
    _, plan = plan_for(["hardware=atlas_800i_a2", "model=local", "model.path=tests/data/configs/qwen3_next_80b",
                        "engine.max_model_len=4096", "parallel.tensor_parallel_size=4", "graph=eager"])
    # patch_mamba_config.py: 128 x cdiv(SSM state bytes, 128 x K bytes per token) = 512; the plan's KV is in
    # 512-token blocks and the script says so (vllm-ascend keeps a size at or above the Mamba-aligned one).
    assert plan.kv_cache.block_size == 512
    assert (plan.engine_args["block_size"], _parse(plan.serve_command).block_size) == (512, 512)


def test_the_300i_duo_option_has_the_ci_runner_s_four_devices():
    raw = compose_config(["hardware=atlas_300i_duo"])
    assert raw["hardware"]["devices_per_node"] == 4
    _, plan = plan_for(["hardware=atlas_300i_duo", "model=qwen3_4b", "engine.dtype=float16", "graph=eager",
                        "engine.max_model_len=4096", "parallel=tp4"])
    assert (plan.target.devices_per_node, plan.workers[0].devices) == (4, [0, 1, 2, 3])
