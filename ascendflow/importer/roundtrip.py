"""Plan an imported recipe and read its ``vllm serve`` back: the round trip of :mod:`ascendflow.importer`.

The recipe is composed exactly as ``python -m ascendflow +recipe=NAME`` composes it (Hydra, the recipe file in a
search-path root), validated, compiled (:func:`ascendflow.compiler.compile_plan`), and the first worker's argv is
parsed by the same vLLM parser as the source. The two are compared as sets of options, values as vLLM's parser types
them (JSON values parsed): :func:`compare_argv`.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascendflow.compiler.plan import Plan
from ascendflow.importer.command import CONFIG_DESTS, ServeCommand, given_options, json_value, serve_parser
from ascendflow.importer.recipe import CONF, TOP_LEVEL_GRAPH, Imported

#: Options ascendflow writes where the source leaves vLLM's own default or detection, with the reason. An option
#: the plan writes with exactly vLLM's parser default needs none (:func:`compare_argv`).
WRITTEN_EXPLICITLY: dict[str, str] = {
    "served_model_name": "vLLM's default served name (the model positional), written explicitly",
    "dtype": "the checkpoint's torch_dtype, what vLLM's --dtype auto resolves to",
    "block_size": "the platform's KV block size (CUDA 16: CacheConfig; Ascend 128: vllm-ascend refresh_block_size), "
                  "what vLLM picks",
    "max_model_len": "the model's max_position_embeddings (after --hf-overrides), what vLLM derives",
    "max_num_batched_tokens": "vLLM's default of the release (get_batch_defaults), the value the plan is sized with",
    "compilation_config": "vLLM's default cudagraph_mode and the capture sizes the plan sized graph memory for",
    "host": "the launcher binds 0.0.0.0",
    "port": "run.launch_port (8000, vLLM's default port)",
    "async_scheduling": "the release's default (engine_rules async_scheduling), written explicitly",
    "enable_chunked_prefill": "vLLM's default (on), written explicitly",
    "enable_prefix_caching": "vLLM's default, written explicitly",
    "seed": "vLLM's default seed, written explicitly",
    # internal DP on one node: the values vLLM's defaults give there (rank 0, the node itself)
    "data_parallel_start_rank": "the launcher writes it per node (0 on an instance's first node)",
    "data_parallel_address": "the launcher writes the instance's first node (ASCENDFLOW_NODE<k>_IP)",
    "data_parallel_rpc_port": "the launcher writes parallel.data_parallel_rpc_port",
}
#: The model positional of Ascend launch scripts: the checkpoint directory given at deploy time.
MODEL_REF = "${ASCENDFLOW_MODEL_PATH}"
#: Options whose value the plan writes differently on purpose, with the reason.
CHANGED: dict[str, str] = {
    "host": "the launcher binds 0.0.0.0",
    "model_tag": "Ascend launch scripts take the checkpoint directory at deploy time (${ASCENDFLOW_MODEL_PATH})",
}
#: vLLM defaults its parser leaves ``None`` (the engine config fills them): ``CacheConfig.gpu_memory_utilization``.
VLLM_DEFAULTS: dict[str, Any] = {"gpu_memory_utilization": 0.9}
#: Options the source gives that the plan does not write, with the reason (besides the importer's NOT_CARRIED).
NOT_WRITTEN: dict[str, str] = {
    "quantization": "vllm-ascend >= 0.17.0rc1 detects 'ascend' from quant_model_description.json; ascendflow writes "
                    "--quantization ascend only before it (engine_rules.yaml quantization_flag)",
}


@dataclass
class RoundTrip:
    """The source argv against the plan's.

    Attributes:
        same: dests equal on both sides.
        written_explicitly: ``(flag, reason)`` the plan writes where the source left vLLM's default.
        not_written: ``(flag, reason)`` the source gives and the plan does not write (importer-named, or a rule).
        changed: ``(flag, source value, plan value, reason)``; ``reason`` ``None`` when unexplained.
        unexplained: ``(flag, what)`` for every difference without a reason: an empty list is a round trip.
    """

    same: list[str] = field(default_factory=list)
    written_explicitly: list[tuple[str, str]] = field(default_factory=list)
    not_written: list[tuple[str, str]] = field(default_factory=list)
    changed: list[tuple[str, Any, Any, str | None]] = field(default_factory=list)
    unexplained: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every difference has its reason."""
        return not self.unexplained


def compose_recipe(imported: Imported, overrides: list[str] | None = None) -> dict[str, Any]:
    """The recipe composed as ``python -m ascendflow +recipe=NAME`` composes it, resolved (a plain dict)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with tempfile.TemporaryDirectory() as root:
        (Path(root) / "recipe").mkdir()
        (Path(root) / "recipe" / f"{imported.name}.yaml").write_text(imported.text())
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[f"hydra.searchpath=[file://{root}]",
                                                           f"+recipe={imported.name}", *(overrides or [])])
        raw = OmegaConf.to_container(cfg, resolve=True)
    raw.pop("hydra", None)
    return raw


def plan_recipe(imported: Imported, overrides: list[str] | None = None) -> Plan:
    """Compose, validate and compile the imported recipe (the model positional is the source's).

    Raises:
        ConfigError: whatever ascendflow refuses in the recipe (one line each).
    """
    from ascendflow.compiler import compile_plan
    from ascendflow.models.resolve import resolve_model
    from ascendflow.schema import load_spec

    spec = load_spec(compose_recipe(imported, overrides))
    arch = resolve_model(spec.model, need_weights=False).architecture
    return compile_plan(spec, arch, model_path=imported.commands[0].model)


def typed_values(given: dict[str, list[str]], argv: list[str]) -> dict[str, Any]:
    """``{dest: value}`` of ``given`` (:func:`~ascendflow.importer.command.given_options` of ``argv``), typed by
    vLLM's parser; config flags (``--compilation-config``...) as their JSON."""
    namespace = serve_parser().parse_args(argv)
    return {dest: (json_value(tokens) if dest in CONFIG_DESTS else getattr(namespace, dest))
            for dest, tokens in given.items()}


def plan_argv(plan: Plan) -> list[str]:
    """The tokens after ``vllm serve`` of the plan's engine command (node 0's; the model positional as given to the
    compiler, where launch scripts write a deploy-time reference)."""
    return list(plan.serve_command[2:])


def compare_argv(source: ServeCommand, argv: list[str], imported: Imported | None = None, *,
                 dropped: dict[str, str] | None = None, dropped_additional: list[str] | None = None) -> RoundTrip:
    """Compare the source command with the plan's ``argv`` (tokens after ``vllm serve``).

    A dest only the plan writes is explained when its value is vLLM's default (its parser's, or
    :data:`VLLM_DEFAULTS`) or it is in :data:`WRITTEN_EXPLICITLY`; a dest only the source gives, when the importer
    did not carry it (``imported.dropped``) or it is in :data:`NOT_WRITTEN`. ``--compilation-config`` is equal when
    the plan's JSON holds the source's keys with the same values (the plan adds the capture sizes it sized graph memory
    for); ``--additional-config`` is compared without the keys the importer did not carry; ``--host`` may differ
    (the launcher binds 0.0.0.0). ``dropped`` / ``dropped_additional``: a PD role's, in place of ``imported``'s.
    """
    model, ours_given = given_options(argv)
    ours = typed_values(ours_given, argv)
    ours["model_tag"] = model
    theirs = dict(source.values)
    theirs["model_tag"] = source.model
    for key in TOP_LEVEL_GRAPH:  # the plan writes them inside --compilation-config
        if key in theirs and key not in ours:
            theirs["compilation_config"] = {**(theirs.get("compilation_config") or {}), key: theirs.pop(key)}
    dropped = dict(imported.dropped if imported else {}) if dropped is None else dict(dropped)
    if dropped_additional is None:
        dropped_additional = imported.dropped_additional if imported else []
    not_written_first: list[tuple[str, str]] = []
    if dropped_additional and isinstance(theirs.get("additional_config"), dict):
        kept = {k: v for k, v in theirs["additional_config"].items() if k not in dropped_additional}
        if kept:
            theirs["additional_config"] = kept
        else:
            theirs.pop("additional_config")
            not_written_first = [(source.given["additional_config"][0].split("=", 1)[0],
                                  f"keys {dropped_additional} not read by the target release")]
    defaults = {a.dest: a.default for a in serve_parser()._actions}
    out = RoundTrip(not_written=not_written_first)
    for dest in sorted(set(ours) | set(theirs)):
        flag = "--" + dest.replace("_", "-")
        if dest in theirs and dest in ours:
            a, b = theirs[dest], ours[dest]
            if dest == "compilation_config" and isinstance(a, dict) and isinstance(b, dict) and \
                    all(b.get(k) == v for k, v in a.items()):
                out.same.append(dest)
                continue
            if a == b:
                out.same.append(dest)
                continue
            reason = (CHANGED.get(dest) if dest != "model_tag" or b == MODEL_REF else None) or dropped.get(dest) or \
                (spec_rounded(a, b, ours.get("speculative_config")) if dest == "compilation_config" else None)
            out.changed.append((flag, a, b, reason))
            if reason is None:
                out.unexplained.append((flag, f"source {a!r}, plan {b!r}"))
        elif dest in ours:
            if ours[dest] == defaults.get(dest) or (dest in VLLM_DEFAULTS and ours[dest] == VLLM_DEFAULTS[dest]):
                out.written_explicitly.append((flag, "vLLM's default"))
            elif dest in WRITTEN_EXPLICITLY:
                out.written_explicitly.append((flag, WRITTEN_EXPLICITLY[dest]))
            else:
                out.unexplained.append((flag, f"written by the plan ({ours[dest]!r}), not in the source"))
        else:
            given = source.given.get(dest, [flag])[0].split("=", 1)[0]
            reason = dropped.get(dest) or NOT_WRITTEN.get(dest)
            if reason is None:
                out.unexplained.append((given, f"in the source ({theirs[dest]!r}), not written by the plan"))
            else:
                out.not_written.append((given, reason))
    return out


def spec_rounded(source: Any, plan: Any, speculative: Any) -> str | None:
    """The reason the plan's ``--compilation-config`` capture sizes differ from the source's, when they are the
    source's rounded up to multiples of ``1 + k`` as vLLM rounds them with ``k`` speculative tokens
    (``vllm/config/vllm.py`` ``adjust_cudagraph_sizes_for_spec_decode``, 0.32.0: the sizes vLLM captures); else
    ``None``."""
    if not (isinstance(source, dict) and isinstance(plan, dict) and isinstance(speculative, dict)):
        return None
    q = 1 + int(speculative.get("num_speculative_tokens") or 0)
    sizes = source.get("cudagraph_capture_sizes")
    if q < 2 or not sizes or {k: v for k, v in source.items() if k != "cudagraph_capture_sizes"} != {
            k: v for k, v in plan.items() if k in source and k != "cudagraph_capture_sizes"}:
        return None
    rounded = sorted({-(-s // q) * q for s in sizes if -(-s // q) * q <= max(sizes)})
    if plan.get("cudagraph_capture_sizes") != rounded:
        return None
    return (f"capture sizes rounded up to multiples of 1 + k = {q}, as vLLM rounds them with {q - 1} speculative "
            "tokens (adjust_cudagraph_sizes_for_spec_decode): the sizes vLLM captures")


def node_argvs(plan: Plan) -> list[list[str]]:
    """The tokens after ``vllm serve`` of each node's first engine process, node 0 first (Ray and ``mp``
    multi-node launches: nodes that run no ``vllm serve`` are left out)."""
    out: dict[int, list[str]] = {}
    for worker in plan.workers:
        command = list(worker.command)
        if command[:2] == ["vllm", "serve"] and worker.node_rank not in out:
            out[worker.node_rank] = command[2:]
    return [out[k] for k in sorted(out)] or [list(plan.serve_command[2:])]


def round_trip(imported: Imported, overrides: list[str] | None = None) -> tuple[Plan, list[RoundTrip]]:
    """Plan the imported recipe and compare each node's argv with the source command of that node.

    Returns:
        The plan, and one :class:`RoundTrip` per source command (node order).

    Raises:
        ConfigError: the recipe is refused by ascendflow, or the plan runs ``vllm serve`` on fewer nodes than the
            source has commands.
    """
    from ascendflow.schema.errors import ConfigError

    plan = plan_recipe(imported, overrides)
    ours = node_argvs(plan)
    if len(ours) < len(imported.commands):
        raise ConfigError("command", f"{len(imported.commands)} nodes", f"the plan runs vllm serve on {len(ours)}")
    return plan, [compare_argv(c, argv, imported) for c, argv in zip(imported.commands, ours)]
