"""A parsed ``vllm serve`` (:class:`~ascendflow.importer.command.ServeCommand`) as an ascendflow recipe.

Every option the command sets goes to one place (:data:`MAPPED`: its ascendflow key; else ``engine.extra_args``,
token for token), or is *named* with the reason it is not carried (:attr:`Imported.named`): nothing is dropped
silently. The recipe is ``recipes/recipe/*.yaml``-shaped (``# @package _global_``, group overrides, then values) and
its header says where the command came from and how to plan it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ascendflow.compiler.checks.extra_args import LAUNCHER_WRITTEN
from ascendflow.importer.command import ServeCommand
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.secrets import ENV_NAME, is_secret

CONF = Path(__file__).resolve().parents[2] / "conf"

#: vLLM dest -> ascendflow key, for the options the importer maps one to one (the value as vLLM's parser typed it).
MAPPED: dict[str, str] = {
    "tensor_parallel_size": "parallel.tensor_parallel_size",
    "pipeline_parallel_size": "parallel.pipeline_parallel_size",
    "data_parallel_size": "parallel.data_parallel_size", "enable_expert_parallel": "parallel.enable_expert_parallel",
    "max_model_len": "engine.max_model_len", "max_num_seqs": "engine.max_num_seqs",
    "max_num_batched_tokens": "engine.max_num_batched_tokens",
    "gpu_memory_utilization": "engine.gpu_memory_utilization", "kv_cache_memory_bytes": "engine.kv_cache_memory_bytes",
    "block_size": "engine.block_size", "enable_prefix_caching": "engine.enable_prefix_caching",
    "enable_chunked_prefill": "engine.enable_chunked_prefill", "dtype": "engine.dtype", "seed": "engine.seed",
    "async_scheduling": "engine.async_scheduling", "speculative_config": "engine.speculative_config",
    "trust_remote_code": "model.trust_remote_code", "hf_overrides": "model.hf_overrides",
    "limit_mm_per_prompt": "model.limit_mm_per_prompt", "mm_processor_cache_gb": "model.mm_processor_cache_gb",
    "mm_encoder_tp_mode": "model.mm_encoder_tp_mode",
    "kv_cache_dtype": "quantization.kv_cache_dtype", "port": "run.launch_port",
}
#: vLLM dests the importer handles itself (model, graph, quantization, additional config, names).
HANDLED = {"model_tag", "model", "served_model_name", "enforce_eager", "compilation_config", "quantization",
           "additional_config", "cudagraph_capture_sizes", "max_cudagraph_capture_size"}
#: vLLM dests not carried into the recipe, with the reason (named in the recipe header and on stderr): the launcher
#: writes them (one table with ``engine.extra_args``' refusal, compiler/checks/extra_args.py LAUNCHER_WRITTEN).
NOT_CARRIED: dict[str, str] = {dest: why for dest, (_, why) in LAUNCHER_WRITTEN.items()}
#: ``compilation_config.cudagraph_mode`` -> graph option (``conf/graph``).
GRAPH = {None: "compiled", "FULL_DECODE_ONLY": "full_decode_only", "PIECEWISE": "piecewise",
         "FULL_AND_PIECEWISE": "full_and_piecewise", "NONE": "eager"}
#: vLLM's top-level flags that set ``compilation_config`` keys (``vllm/engine/arg_utils.py`` EngineArgs, 0.32.0).
TOP_LEVEL_GRAPH = ("cudagraph_capture_sizes", "max_cudagraph_capture_size")
#: ``compilation_config`` keys with a graph key.
GRAPH_KEYS = {"cudagraph_mode", "cudagraph_capture_sizes", "max_cudagraph_capture_size"}
#: typed ``ascend.additional_config`` keys (``ascendflow/schema/ascend.py`` AdditionalConfig).
TYPED_EXTRA = ("enable_shared_expert_dp", "multistream_overlap_shared_expert", "recompute_scheduler_enable",
               "enable_kv_nz")
#: Node environment -> ascend key (``conf/ascend``); the launcher writes the rest of its bundle itself.
ENV_KEYS = {"HCCL_BUFFSIZE": "hccl_buffsize_mb", "OMP_NUM_THREADS": "omp_num_threads",
            "HCCL_CONNECT_TIMEOUT": "hccl_connect_timeout_s", "HCCL_EXEC_TIMEOUT": "hccl_exec_timeout_s"}
#: Environment the launcher writes per node (not carried, named).
ENV_LAUNCHER = {"PYTORCH_NPU_ALLOC_CONF": "ascendflow's environment bundle writes expandable_segments:True",
                "TASK_QUEUE_ENABLE": "ascendflow's environment bundle writes 1",
                "OMP_PROC_BIND": "ascendflow's environment bundle writes false",
                "ASCEND_RT_VISIBLE_DEVICES": "the launcher picks the devices (hardware.visible_devices_env)",
                "CUDA_VISIBLE_DEVICES": "the launcher picks the devices (hardware.visible_devices_env)",
                "VLLM_USE_V1": "V1 is vLLM's only engine from 0.11 on", "SERVER_PORT": "run.launch_port",
                **{name: "the launcher writes it per node from parallel.node_addresses / parallel.nic_name"
                   for name in ("HCCL_IF_IP", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME",
                                "LOCAL_IP", "MASTER_IP")},
                **{name: "hardware.multinode_moe_env (the A2 option sets it for multi-node MoE with EP)"
                   for name in ("HCCL_INTRA_PCIE_ENABLE", "HCCL_INTRA_ROCE_ENABLE")}}

def misnamed_env(name: str) -> str | None:
    """The reason a source's environment variable ``name`` is not carried when it is no valid name (``ENV_NAME``:
    letters, digits and ``_``), else ``None``. vllm-project/vllm-ascend's own CI configs give some with a hyphen
    (``VLLM-ASCEND_ENABLE_FUSED_MC2``, ``MiniMax-M2.5-W8A8-A3.yaml`` @2599328c143a): vllm-ascend reads only the
    ``_`` spelling (``vllm_ascend/envs.py`` ``env_variables``, ``os.getenv("VLLM_ASCEND_ENABLE_FUSED_MC2", "0")``,
    v0.23.0), so the variable had no effect where CI ran it. Renaming it would plan what CI did not run; the plan
    refuses the name as given (``schema/secrets.py`` ``check_env_names``): it is named, not carried."""
    if ENV_NAME.fullmatch(name):
        return None
    spelt = re.sub(r"\W", "_", name)
    reads = (" (vllm-ascend reads VLLM_ASCEND_* names spelt with _: vllm_ascend/envs.py, v0.23.0)"
             if spelt.startswith("VLLM_ASCEND_") else "")
    renamed = f" to {spelt}" if ENV_NAME.fullmatch(spelt) else ""
    return (f"is not a valid environment variable name: nothing read it as named where the source ran{reads}; not "
            f"carried, and not renamed{renamed} (that would plan what the source did not run)")


#: Checkpoint name prefix (lower case) -> catalogue option, where the catalogue id's name differs from the family's.
ALIASES = {
    # DeepSeek-V3 / V3.1 / R1 share DeepseekV3ForCausalLM with the same config.json shape fields
    "deepseek-v3": "deepseek_r1", "deepseek-v3.1": "deepseek_r1",
    "meta-llama-3-70b": "llama3_70b", "llama-3-70b": "llama3_70b",
}
#: ``--quantization`` -> the quantization the recipe plans with (option or inline values), and its note.
QUANT: dict[str, tuple[str | dict[str, Any], str]] = {
    "ascend": ("w8a8_dynamic_ascend", "msModelSlim checkpoint planned as W8A8_DYNAMIC (linear and experts); if it is "
                                      "another scheme, pass --quantization-option (conf/quantization)"),
    "fp8": ({"name": "fp8", "method": "fp8", "linear_scheme": "W8A8_DYNAMIC", "expert_scheme": "W8A8_DYNAMIC"},
            "ESTIMATE: FP8 weights planned as 1 byte per weight with per-channel scales (W8A8_DYNAMIC bytes); "
            "block-wise FP8 scales (128 x 128) are smaller"),
    "compressed-tensors": ({"name": "compressed_tensors", "method": "compressed-tensors",
                            "linear_scheme": "W8A8_DYNAMIC", "expert_scheme": "W8A8_DYNAMIC"},
                           "ESTIMATE: compressed-tensors planned as int8 W8A8_DYNAMIC weight bytes"),
}


@dataclass
class Imported:
    """The recipe of one deployment and what did not go into it.

    Attributes:
        recipe: ``{"defaults": [...], group: {key: value}}``, as ``recipes/recipe/*.yaml`` holds it.
        named: ``(flag or env name, reason)`` for every option given but not carried, and every choice the
            importer made (quantization scheme, model option).
        commands: the source commands (one per node).
        name: recipe name.
        dropped: ``{vLLM dest: reason}`` of the options given and not carried (a subset of ``named``).
        dropped_additional: ``--additional-config`` keys not carried (the target release does not read them).
        checkpoint_quantization: the checkpoint's quantization method as vLLM sees it (``--quantization``, else by
            the checkpoint's name: ``fp8``, ``awq``, ``gptq``, ``ascend``); ``None``: unquantized.
    """

    recipe: dict[str, Any]
    named: list[tuple[str, str]]
    commands: list[ServeCommand]
    name: str
    dropped: dict[str, str] = field(default_factory=dict)
    dropped_additional: list[str] = field(default_factory=list)
    checkpoint_quantization: str | None = None
    migrated_to: str | None = None

    def text(self, command_line: str | None = None) -> str:
        """The recipe as YAML text with its header: the source, the command, how to plan it, what is named."""
        first = self.commands[0]
        lines = ["# @package _global_",
                 f"# Imported by `python -m ascendflow.import` from {first.source}:",
                 *[f"#   {c.text}" for c in self.commands],
                 *([f"# Migrated to {self.migrated_to}."] if self.migrated_to else []),
                 f"# Plan it: python -m ascendflow +recipe={self.name} run.mode=plan"]
        if command_line:
            lines.append(f"# Re-import: {command_line}")
        if self.named:
            lines.append("# Not carried, or chosen by the importer:")
            lines += [f"#   {flag}: {why}" for flag, why in self.named]
        return "\n".join(lines) + "\n" + yaml.safe_dump(self.recipe, sort_keys=False, width=120,
                                                         default_flow_style=None)


@lru_cache(maxsize=1)
def catalogue() -> dict[str, str]:
    """``{model id name (lower case, after the last /): option}`` of ``conf/model``."""
    out = {}
    for path in sorted((CONF / "model").glob("*.yaml")):
        model_id = (yaml.safe_load(path.read_text()) or {}).get("id")
        if model_id:
            out[str(model_id).rstrip("/").rsplit("/", 1)[-1].lower()] = path.stem
    return out


def model_option(tag: str) -> str:
    """The catalogue option of checkpoint ``tag`` (hub id or path): the longest catalogue model name (or
    :data:`ALIASES` prefix) that the checkpoint's name starts with.

    Raises:
        ConfigError: no option matches (one line: pass ``--model OPTION``).
    """
    base = tag.rstrip("/").rsplit("/", 1)[-1].lower()
    names = {**catalogue(), **ALIASES}
    hits = sorted((n for n in names if base.startswith(n)), key=len)
    if not hits:
        options = ", ".join(sorted(set(names.values())))
        raise ConfigError("model", tag, f"matches no model option (conf/model: {options}); "
                                        "pass --model OPTION, or --model local for a local checkpoint directory")
    return names[hits[-1]]


def _set(recipe: dict[str, Any], key: str, value: Any) -> None:
    group, _, name = key.partition(".")
    recipe.setdefault(group, {})[name] = value


def _flag(command: ServeCommand, dest: str) -> str:
    return command.given[dest][0].split("=", 1)[0]


def to_recipe(commands: list[ServeCommand], *, hardware: str, model: str | None = None, name: str | None = None,
              quantization: str | None = None, release: str | None = None) -> Imported:
    """The recipe of ``commands`` (one ``vllm serve`` per node of one deployment).

    Args:
        hardware: the hardware option the commands ran on (``conf/hardware``).
        model: the model option (``conf/model``); ``None``: :func:`model_option` of the model positional;
            ``local``: ``model=local`` with ``model.path`` the positional.
        quantization: the quantization option for ``--quantization ascend`` checkpoints (default
            ``w8a8_dynamic_ascend``).
        release: ``hardware.software`` (a version-matrix row); ``None``: the hardware option's.

    Raises:
        ConfigError: unknown model, a PD command (``--kv-transfer-config``: import its CI PD config,
            :mod:`ascendflow.importer.pd`), nodes whose commands differ beyond the per-node flags, a ``--quantization`` ascendflow has no weight model for.
    """
    first = commands[0]
    if not (CONF / "hardware" / f"{hardware}.yaml").is_file():
        raise ConfigError("hardware", hardware, "is no hardware option (conf/hardware)")
    if "kv_transfer_config" in first.given:
        raise ConfigError("--kv-transfer-config", "given", "a PD role's command; import the CI PD config it comes "
                                                           "from: python -m ascendflow.import CONFIG.yaml")
    per_node = set(NOT_CARRIED) | {"host", "port"}
    for k, other in enumerate(commands[1:], 1):
        a = {d: v for d, v in first.given.items() if d not in per_node}
        b = {d: v for d, v in other.given.items() if d not in per_node}
        if a != b or other.model != first.model:
            diff = sorted(set(a) ^ set(b) | {d for d in a if d in b and a[d] != b[d]}) or ["model"]
            raise ConfigError("command", f"node {k}", f"differs from node 0 in {diff}; one deployment runs the "
                                                      "same engine flags on every node")
    option = model or model_option(first.model)
    named: list[tuple[str, str]] = []
    defaults: list[dict[str, str]] = [{"override /hardware": hardware}, {"override /model": option}]
    recipe: dict[str, Any] = {"defaults": defaults}
    if option == "local":
        _set(recipe, "model.path", first.model)
    else:
        named.append(("model", f"{first.model} planned from the catalogue option {option} (its config.json values)"))
    # vLLM's default served name is the model positional (vllm/entrypoints/openai/api_server.py); keep it
    served = first.values.get("served_model_name") or [first.model]
    _set(recipe, "model.served_model_name", served[0])
    if len(served) > 1:
        named.append(("--served-model-name", f"aliases {served[1:]} dropped: ascendflow serves one name"))
    values = first.values
    # vLLM's default context is the model's max_position_embeddings; ascendflow's engine=default says 2048
    _set(recipe, "engine.max_model_len", None)
    for dest, key in MAPPED.items():
        if dest in values:
            _set(recipe, key, values[dest])
    if release:
        _set(recipe, "hardware.software", release)
    _graph(first, recipe, defaults, named)
    dropped: dict[str, str] = {}
    checkpoint = _quantization(first, recipe, defaults, named, quantization, dropped)
    extra = dict(values.get("additional_config") or {})
    known = _additional_config_keys(hardware, release)
    dropped_additional = [k for k in extra if known is not None and k not in known]
    if dropped_additional:
        named.append(("--additional-config", f"keys {dropped_additional} are not read by the target vllm-ascend "
                                             "(compiler/rules/data/additional_config_keys.yaml: it would ignore them); "
                                             "not carried"))
        extra = {k: v for k, v in extra.items() if k not in dropped_additional}
    if extra:
        typed = {k: extra.pop(k) for k in TYPED_EXTRA if k in extra}
        _set(recipe, "ascend.additional_config", {**typed, "other": extra})
    extra_args: list[str] = []
    for dest, tokens in first.given.items():
        if dest in MAPPED or dest in HANDLED:
            continue
        if dest in NOT_CARRIED:
            if len(commands) == 1 or dest not in ("distributed_executor_backend",):
                named.append((_flag(first, dest), NOT_CARRIED[dest]))
                dropped[dest] = NOT_CARRIED[dest]
            continue
        extra_args += tokens
    backend = values.get("distributed_executor_backend")
    world = (values.get("tensor_parallel_size") or 1) * (values.get("pipeline_parallel_size") or 1) * (
        values.get("data_parallel_size") or 1)
    hardware_yaml = yaml.safe_load((CONF / "hardware" / f"{hardware}.yaml").read_text()) or {}
    per_node_devices = int(hardware_yaml["devices_per_node"])
    if len(commands) > 1:
        _set(recipe, "parallel.nodes", len(commands))
    elif backend == "ray" and world > per_node_devices:
        # Ray: one vllm serve on the head node; the cluster's other nodes join it (features/ray.md, v0.23.0)
        nodes = -(-world // per_node_devices)
        _set(recipe, "parallel.nodes", nodes)
        named.append(("parallel.nodes", f"{nodes}: TP x PP x DP = {world} > {per_node_devices} devices per node of "
                                        f"{hardware}; "
                                        "Ray spans the nodes, the command runs on the head node"))
    if backend and recipe.get("parallel", {}).get("nodes", 1) > 1:
        _set(recipe, "parallel.distributed_executor_backend", backend)
        dropped.pop("distributed_executor_backend", None)
        named[:] = [n for n in named if n[0] != "--distributed-executor-backend"]
    if extra_args:
        _set(recipe, "engine.extra_args", extra_args)
    _env(first, recipe, named, hardware)
    if "compilation_config" in first.given and first.values.get("enforce_eager"):
        dropped["compilation_config"] = "ignored by vLLM with --enforce-eager"
    return Imported(recipe=recipe, named=named, commands=commands, name=name or recipe_name(first, values),
                    dropped=dropped, dropped_additional=dropped_additional, checkpoint_quantization=checkpoint)


def check_target(hardware: str, release: str | None) -> None:
    """``--to hardware=OPTION [release=ROW]``: OPTION a ``conf/hardware`` option, ROW a version-matrix row.

    Raises:
        ConfigError: one line naming the key, the value, the rule and the fix (the nearest option, then all).
    """
    from ascendflow.compiler.rules.software import version_matrix

    _check_option("--to hardware", hardware, sorted(p.stem for p in (CONF / "hardware").glob("*.yaml")),
                  "a hardware option (conf/hardware)")
    if release is not None:
        _check_option("--to release", release, sorted(version_matrix()),
                      "a version-matrix row (ascendflow/compiler/rules/data/version_matrix.yaml)")


def _check_option(key: str, value: str, options: list[str], what: str) -> None:
    if value in options:
        return
    import difflib

    close = difflib.get_close_matches(value, options, n=1, cutoff=0.6)
    fix = f"did you mean {key.split()[-1]}={close[0]}? " if close else ""
    raise ConfigError(key, value, f"is not {what}; fix: {fix}pick from: {', '.join(options)}")


def target_row(hardware: str, release: str | None) -> tuple[str, dict[str, Any]]:
    """``(row name, version-matrix row)`` of ``hardware`` (its ``software``) or of ``release``."""
    from ascendflow.compiler.rules.software import version_matrix

    row = release or (yaml.safe_load((CONF / "hardware" / f"{hardware}.yaml").read_text()) or {}).get("software")
    matrix = version_matrix()
    if row not in matrix:
        raise ConfigError("release", row, f"is no version-matrix row (ascendflow/compiler/rules/data/"
                                          f"version_matrix.yaml: {', '.join(sorted(matrix)[:6])}, ...)")
    return row, matrix[row]


def _additional_config_keys(hardware: str, release: str | None) -> frozenset[str] | None:
    """The ``--additional-config`` keys the target vllm-ascend reads (``None``: no table, or not Ascend)."""
    from ascendflow.compiler.rules.additional_config import keys_by_version

    _, row = target_row(hardware, release)
    return keys_by_version().get(str(row.get("vllm_ascend"))) if row.get("vllm_ascend") else None


def recipe_name(command: ServeCommand, values: dict[str, Any]) -> str:
    """``<checkpoint name>_tp<N>`` in lower case, ``_`` for anything else (or the CI test case's name)."""
    tp = values.get("tensor_parallel_size") or 1
    base = command.name or f"{command.model.rstrip('/').rsplit('/', 1)[-1]}_tp{tp}"
    return re.sub(r"\W+", "_", base.lower()).strip("_")


def _graph(command: ServeCommand, recipe: dict, defaults: list, named: list) -> None:
    """``--enforce-eager`` / ``--compilation-config`` -> the graph option and its keys."""
    compilation = dict(command.values.get("compilation_config") or {})
    for key in TOP_LEVEL_GRAPH:  # vLLM's top-level --cudagraph-capture-sizes / --max-cudagraph-capture-size
        if key in command.values:
            compilation[key] = command.values[key]
    mode = compilation.get("cudagraph_mode")
    if command.values.get("enforce_eager"):
        defaults.append({"override /graph": "eager"})
        if compilation:
            named.append(("--compilation-config", "ignored by vLLM with --enforce-eager; not carried"))
        return
    if isinstance(mode, int) or mode not in GRAPH:
        raise ConfigError("--compilation-config", f"cudagraph_mode={mode}",
                          f"is not one of {sorted(GRAPH, key=str)[1:]}")
    defaults.append({"override /graph": GRAPH[mode]})
    for key in ("cudagraph_capture_sizes", "max_cudagraph_capture_size"):
        if key in compilation:
            _set(recipe, f"graph.{key}", compilation[key])
    rest = sorted(set(compilation) - GRAPH_KEYS)
    if rest:
        named.append(("--compilation-config", f"keys {rest} have no ascendflow key (graph=<option> plans "
                                              "cudagraph_mode and the capture sizes only); not carried"))


#: Checkpoint name pattern -> the quantization vLLM detects from its config.json (``quantization_config``), when no
#: ``--quantization`` is given. First match wins.
CHECKPOINT_NAMES = [(r"w8a8|int8", "ascend"), (r"fp8", "fp8"), (r"awq", "awq"), (r"gptq|int4", "gptq")]
#: 4-bit weight-only checkpoints (AWQ, GPTQ): planned with msModelSlim's W4A8_DYNAMIC weight bytes (4-bit weights,
#: per-group scales), an ESTIMATE of AWQ/GPTQ's 4-bit weights with group-128 scales and zeros.
FOUR_BIT = {"name": "int4_weights", "method": None, "linear_scheme": "W4A8_DYNAMIC", "expert_scheme": "W4A8_DYNAMIC"}


def _quantization(command: ServeCommand, recipe: dict, defaults: list, named: list, option: str | None,
                  dropped: dict[str, str]) -> str | None:
    """``--quantization`` (or the checkpoint's name, which vLLM's detection follows) -> the quantization option or
    inline values. Returns the checkpoint's quantization method as vLLM sees it (``None``: unquantized)."""
    given = command.values.get("quantization")
    method = given
    if method is None and option is None:
        base = command.model.rstrip("/").rsplit("/", 1)[-1]
        method = next((m for pattern, m in CHECKPOINT_NAMES if re.search(pattern, base, re.I)), None)
        if method is not None:
            named.append(("model", f"{base}: a {method} checkpoint by its name (no --quantization: vLLM detects it "
                                   "from the checkpoint's config.json / quant_model_description.json)"))
    if method is None and option:
        defaults.append({"override /quantization": option})
        return "ascend"
    if method is None:
        defaults.append({"override /quantization": "none"})
        return None
    if method in ("awq", "awq_marlin", "gptq", "gptq_marlin"):
        defaults.append({"override /quantization": "none"})
        recipe["quantization"] = {**FOUR_BIT, **recipe.get("quantization", {})}
        named.append(("--quantization", f"{method}: ESTIMATE: 4-bit weights planned with W4A8_DYNAMIC weight bytes"
                                        + ("; not written back (vLLM detects it from the checkpoint's config.json)"
                                           if given else "")))
        if given:
            dropped["quantization"] = "vLLM detects the 4-bit format from the checkpoint's config.json"
        return method
    if method not in QUANT:
        raise ConfigError("--quantization", method, f"has no ascendflow weight model (planned: "
                                                    f"{sorted([*QUANT, 'awq', 'gptq'])})")
    choice, note = QUANT[method]
    if method == "ascend" and option:
        choice, note = option, f"msModelSlim checkpoint planned with quantization={option}"
    if isinstance(choice, str):
        defaults.append({"override /quantization": choice})
    else:
        defaults.append({"override /quantization": "none"})
        # detected from the checkpoint (no --quantization given): plan its weight bytes, write no --quantization
        choice = {**choice, "method": choice["method"] if given else None}
        recipe["quantization"] = {**choice, **recipe.get("quantization", {})}
    named.append(("--quantization" if given else "quantization", note))
    return method


def _env(command: ServeCommand, recipe: dict, named: list, hardware: str) -> None:
    """The command's environment -> ascend keys, ``ascend.env`` and named launcher variables."""
    if not command.env:
        return
    from ascendflow.platforms import platform_for

    # HCCL platforms (Ascend) write HCCL_OP_EXPANSION_MODE=AIV unless told otherwise (ascend.hccl_op_expansion_mode_aiv)
    hccl = platform_for((yaml.safe_load((CONF / "hardware" / f"{hardware}.yaml").read_text()) or {})["kind"]).hccl_env
    other = {}
    for key, value in command.env.items():
        if key in ENV_KEYS:
            _set(recipe, f"ascend.{ENV_KEYS[key]}", int(value))
        elif key == "HCCL_OP_EXPANSION_MODE":
            _set(recipe, "ascend.hccl_op_expansion_mode_aiv", value == "AIV")
        elif key in ENV_LAUNCHER:
            named.append((key, ENV_LAUNCHER[key]))
        elif misnamed_env(key):
            named.append((key, misnamed_env(key)))
        elif is_secret(key, []):
            named.append((key, "a secret: not written into the recipe; export it where the engine starts"))
        else:
            other[key] = value
    if hccl and "HCCL_OP_EXPANSION_MODE" not in command.env:
        _set(recipe, "ascend.hccl_op_expansion_mode_aiv", False)
    if other:
        _set(recipe, "ascend.env", other)
