"""vllm-ascend's public CI PD configs (``tests/data/ci_pd/``, vendored at v0.23.0 and v0.25.1rc1): imported by
``scripts/import_ci_pd_config.py`` and compiled, every ``vllm serve`` ascendflow emits equals the one CI runs, node by
node and rank by rank (flags compared as a set, values parsed), except for the differences listed in
:data:`INTENDED` with their reason. Configs ascendflow cannot express are refused by the importer with one line.
"""

from __future__ import annotations

import copy
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ascendflow.compiler import compile_plan
from ascendflow.models.resolve import resolve_model
from ascendflow.schema import load_spec
from tests.conftest import compose_config

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "ci_pd"
_spec = importlib.util.spec_from_file_location("import_ci_pd_config", ROOT / "scripts" / "import_ci_pd_config.py")
ci = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ci)

#: Configs compared whole (file stem in tests/data/ci_pd/).
COMPARED = ["DeepSeek_V3.1T_MTP1_PD@v0.23.0", "DeepSeek_V3.1T_MTP1_PD@v0.25.1rc1", "DeepSeek_V3.1T_MTP3_PD@v0.23.0",
            "DeepSeek_V3.1T_MTP3_PD@v0.25.1rc1", "DeepSeek_V3.1T_MTP1_3_5K_1_5K_PD@v0.23.0",
            "DeepSeek_V3.1T_MTP1_3_5K_1_5K_PD@v0.25.1rc1", "DeepSeek_V3.1T_MTP1_128K_1K_PD@v0.23.0",
            "DeepSeek_V3.1T_MTP1_128K_1K_PD@v0.25.1rc1", "QWEN3_235B_PD_3_5K_1_5k@v0.23.0",
            "Qwen3-235B-disagg-pd@v0.23.0", "Qwen3-235B-disagg-pd@v0.25.1rc1", "Qwen3-235B-W8A8@v0.23.0",
            # decode TP8 with vLLM's default graph mode: 16 MLA heads per rank, a power of two (the per-release rule
            # mla_heads_per_rank, engine_rules.yaml; the {32, 64, 128} rule was TorchAir's at v0.9.x only)
            "DeepSeek-V3@v0.23.0"]
#: Configs the importer refuses, with the reason (one line each).
REFUSED = {
    "DeepSeek_V3.1T_layerwise_PD@v0.23.0": "decode: flags ['--async-scheduling'] have no ascendflow key",
    "DeepSeek_V3.1T_layerwise_PD@v0.25.1rc1": "decode: flags ['--async-scheduling'] have no ascendflow key",
    "QWEN3_235B_PD@v0.23.0": "decode: flags ['--async-scheduling'] have no ascendflow key",
    # CI's own file: the decode node 1 template was given the prefill envs/flags at v0.25.1rc1
    "QWEN3_235B_PD@v0.25.1rc1": "node 1: --max-model-len '40000' differs from node 0's '36864'",
    # CI's own file: an --additional-config that is not JSON (vLLM would refuse it too)
    "QWEN3_235B_PD_3_5K_1_5k@v0.25.1rc1": "Expecting ',' delimiter: line 1 column 76 (char 75)",
}

#: Per-config fixes of CI's own mistakes: the ``kv_connector_extra_config`` ascendflow writes is the real layout.
EXTRA_CONFIG_FIXED = {
    # v0.25.1rc1 moved this config's decode nodes to TP4 × DP8 (4 ranks per node) but kept the old TP1 × DP32 layout
    # in every --kv-transfer-config; MooncakeConnector (_get_prefill_decode_size) would then pair the wrong ranks
    "DeepSeek_V3.1T_MTP3_PD@v0.25.1rc1": {"prefill": {"dp_size": 2, "tp_size": 8}, "decode": {"dp_size": 8, "tp_size": 4}},
}

#: Flags ascendflow writes explicitly where CI leaves vLLM's default or its own detection (reason each).
ADDED = {
    "--served-model-name": "ascendflow names the served model by the catalogue id (clients and the proxy use it)",
    "--pipeline-parallel-size": "explicit 1 (vLLM's default); PD roles run without PP",
    "--dtype": "explicit bfloat16 (the checkpoint's torch_dtype, what vLLM's 'auto' resolves to)",
    "--block-size": "explicit 128 (vllm-ascend's refresh_block_size sets 128 on NPU whatever is given)",
}
#: Flags CI passes that ascendflow leaves out on purpose (reason each).
DROPPED = {
    "--quantization": "from v0.17.0rc1 vllm-ascend detects 'ascend' from quant_model_description.json "
                      "(engine_rules.yaml quantization_flag); the checkpoint is the same",
}


def _compile(recipe: dict[str, Any]):
    """Compose the imported recipe as Hydra would (its group overrides, then its values) and compile it."""
    groups = [f"{k.removeprefix('override /')}={v}" for d in recipe["defaults"] for k, v in d.items()]
    raw = compose_config(groups)
    raw.pop("hydra", None)
    _merge(raw, {k: v for k, v in recipe.items() if k not in ("defaults", "_notes")})
    spec = load_spec(raw)
    return compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture, model_path="MODEL")


def _merge(base: dict, extra: dict) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict) and key != "other":
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


def _normal(flags: dict[str, Any], role: str, offset: int, ids: dict[str, str],
            layout: dict[str, Any] | None = None) -> dict[str, Any]:
    """CI's flags with the intended differences applied (each one named in a comment)."""
    out = {k: v for k, v in flags.items() if k not in DROPPED}
    kv = dict(out["--kv-transfer-config"])
    kv["kv_port"] = int(kv["kv_port"]) + offset  # moved out of AscendDirect's random-port range (kv_port guide)
    # engine_id: ascendflow names instances <role><k> (unique by construction); CI numbers them or lets vLLM draw one
    kv["engine_id"] = ids[kv.get("engine_id", role)]
    # use_ascend_direct: not read by MooncakeConnector at v0.23.0/v0.25.1rc1 (AscendDirect is Mooncake's build option)
    kv["kv_connector_extra_config"] = {k: v for k, v in kv["kv_connector_extra_config"].items()
                                       if k != "use_ascend_direct"}
    if layout:
        kv["kv_connector_extra_config"] = layout
    out["--kv-transfer-config"] = kv
    if int(out.get("--data-parallel-size", 1)) == 1:
        # DP1: vLLM reads no DP address/RPC port; ascendflow writes none (CI's QWEN3 prefill even swaps the two)
        for flag in ("--data-parallel-address", "--data-parallel-rpc-port", "--data-parallel-rank"):
            out.pop(flag, None)
    if "--data-parallel-rpc-port" in out:
        out["--data-parallel-rpc-port"] = "RPC"  # ascendflow's own port (parallel.data_parallel_rpc_port)
    spec = out.get("--speculative-config")
    if role == "prefill" and spec and spec["num_speculative_tokens"] > 1:
        # multi-node PD tutorial (v0.25.1rc1) speculative-decoding note: 1 on P nodes for non-hybrid models
        out["--speculative-config"] = {**spec, "num_speculative_tokens": 1}
    extra = {k: v for k, v in (out.get("--additional-config") or {}).items()
             if k not in ci.OBSOLETE_EXTRA}  # keys the release no longer reads (importer's OBSOLETE_EXTRA)
    if role == "prefill":
        # decode-only: vllm-ascend v0.23.0 vllm_ascend/platform.py check_and_update_config sets it False on
        # kv_producer nodes ("ignored on PD-disaggregated P nodes"); ascendflow refuses it there, the importer drops it
        extra.pop("recompute_scheduler_enable", None)
    if extra:
        out["--additional-config"] = extra
    else:
        out.pop("--additional-config", None)
    return out


def _ours(flags: dict[str, Any], ci_flags: dict[str, Any]) -> dict[str, Any]:
    """ascendflow's flags less the explicit defaults it writes where CI leaves vLLM's (reason each)."""
    out = {k: v for k, v in flags.items() if k not in ADDED}
    if "--data-parallel-rpc-port" in out:
        out["--data-parallel-rpc-port"] = "RPC"
    comp = dict(out.get("--compilation-config") or {})
    ci_comp = ci_flags.get("--compilation-config") or {}
    if comp and "cudagraph_capture_sizes" not in ci_comp:
        # CI leaves vllm-ascend's capture sizes; ascendflow writes the list it sized the graph memory for
        comp.pop("cudagraph_capture_sizes", None)
    if comp == {"cudagraph_mode": "FULL_AND_PIECEWISE"} and not ci_comp:
        comp = {}  # vLLM's default mode (CompilationConfig), written explicitly by ascendflow
    if comp:
        out["--compilation-config"] = comp
    else:
        out.pop("--compilation-config", None)
    if "--data-parallel-size-local" in out and "--data-parallel-address" not in ci_flags:
        # internal DP on one node: ascendflow writes start rank 0, the node's own address and its RPC port, which CI
        # leaves to vLLM's defaults (one node: the same values)
        assert out.pop("--data-parallel-start-rank") == "0"
        out.pop("--data-parallel-address")
        out.pop("--data-parallel-rpc-port")
    return out


@pytest.mark.parametrize("name", COMPARED)
def test_ci_config_argv_equals_ascendflow(name):
    raw = yaml.safe_load((DATA / f"{name}.yaml").read_text())
    recipe = ci.to_recipe(raw, name="ci")
    plan = _compile(recipe)
    ips = [f"${{ASCENDFLOW_NODE{k}_IP}}" for k in range(int(raw["num_nodes"]))]
    nodes = ci.ci_node_argvs(raw, ips)
    ci_flags = {k: [ci.parse_flags(r["argv"][3:]) for r in ranks] for k, ranks in nodes.items()}
    offset = ci.kv_port_offset(raw, [int(f[0]["--kv-transfer-config"]["kv_port"]) for f in ci_flags.values()])
    ours: dict[int, list] = {}
    for w in plan.workers:
        ours.setdefault(w.node_rank, []).append(w.command)
    assert sorted(ours) == sorted(nodes), "same nodes"
    # engine ids in order of first appearance per role: CI's "0", "1", "2" ... -> prefill0, prefill1, decode0 ...
    ids: dict[str, str] = {}
    for role in ("prefill", "decode"):
        seen = list(dict.fromkeys(ci_flags[k][0]["--kv-transfer-config"].get("engine_id", role)
                                  for k in sorted(nodes) if nodes[k][0]["role"] == role))
        ids.update({ci_id: f"{role}{i}" for i, ci_id in enumerate(seen)})
    for k in sorted(nodes):
        role = nodes[k][0]["role"]
        assert len(ours[k]) == len(nodes[k]), f"node {k}: one vllm serve per CI process"
        for rank, (argv, ci_argv) in enumerate(zip(ours[k], nodes[k])):
            # the model positional: ascendflow's is a deploy-time reference (${ASCENDFLOW_MODEL_PATH}), CI's a hub id
            assert argv[:2] == ci_argv["argv"][:2] == ["vllm", "serve"]
            expected = _normal(ci_flags[k][rank], role, offset, ids, EXTRA_CONFIG_FIXED.get(name))
            assert _ours(ci.parse_flags(argv[3:]), ci_flags[k][rank]) == expected, f"node {k} rank {rank}"
    if "templates" in raw:
        # the proxy, as external_dp/scripts/runtime.py build_proxy_server_cmd (v0.23.0) starts it on node 0, port 1999
        ranks = {role: [(ips[k], ci_argv["argv"][ci_argv["argv"].index("--port") + 1]) for k in sorted(nodes)
                        for ci_argv in nodes[k] if ci_argv["role"] == role] for role in ("prefill", "decode")}
        assert plan.proxy.command[1].endswith("/load_balance_proxy_server_example.py")
        assert plan.proxy.command[2:] == [
            "--host", ips[0], "--port", "1999", "--prefiller-hosts", *[h for h, _ in ranks["prefill"]],
            "--prefiller-ports", *[p for _, p in ranks["prefill"]], "--decoder-hosts", *[h for h, _ in ranks["decode"]],
            "--decoder-ports", *[p for _, p in ranks["decode"]]]


def test_ten_or_more_configs_compared():
    assert len(COMPARED) >= 10 and all((DATA / f"{n}.yaml").exists() for n in [*COMPARED, *REFUSED])
    assert sorted(p.stem for p in DATA.glob("*.yaml")) == sorted([*COMPARED, *REFUSED])


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_importer_refuses_what_ascendflow_cannot_express(name):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "import_ci_pd_config.py"), str(DATA / f"{name}.yaml")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"import_ci_pd_config: {DATA / name}.yaml: {REFUSED[name]}\n"
