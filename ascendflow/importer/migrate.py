"""Migrate an imported deployment to other hardware (Ascend): plan both, side by side.

:func:`migrate` plans the source recipe on its hardware and the same deployment on the target hardware and release
(``--to hardware=atlas_800i_a3 [release=vllm-ascend-0.23.0]``) with the compiler, and reports:

- per-device memory and KV cache of each side (:class:`Side`, from each plan's ``memory`` and ``kv_cache``);
- whether the layout fits the target at all, and the nearest TP × DP layouts that do (:func:`fitting_layouts`: a
  plain enumeration compiled one by one, ranked by device count and TP distance from the source);
- the quantization the target release does not serve (``data/quantization_support.yaml``, read from
  ``vllm_ascend/platform.py`` ``supported_quantization`` at each tag), with the msModelSlim command that makes a
  checkpoint it does serve (W8A8_DYNAMIC);
- the flags and environment that change (CUDA-only flags removed with the reason, Ascend environment added);
- the version-matrix row the target plan uses;
- the source's measured figures when given (:mod:`ascendflow.importer.baseline`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from ascendflow.compiler.plan import Plan
from ascendflow.importer.baseline import Baseline
from ascendflow.compiler.rules.software import version_at_least
from ascendflow.importer.recipe import CONF, Imported, check_target, target_row
from ascendflow.importer.roundtrip import compose_recipe, given_options, typed_values
from ascendflow.schema.errors import ConfigError

GIB = 2**30
#: CUDA-only vLLM options and environment (``data/cuda_only.yaml``): ``{"flags": {dest: reason}, "env_prefixes"}``.
_CUDA = yaml.safe_load(resources.files("ascendflow.importer").joinpath("data/cuda_only.yaml").read_text())
#: vLLM dests that select CUDA kernels or libraries, with the reason they go on Ascend.
CUDA_ONLY: dict[str, str] = dict(_CUDA["flags"])
#: Environment name prefixes of the CUDA stack (NCCL, CUDA, FlashInfer, DeepGEMM switches of vLLM).
CUDA_ENV: tuple[str, ...] = tuple(_CUDA["env_prefixes"])
#: Why a flag's value changes between the source and the target plan (both written by the compiler).
CHANGE_REASONS: dict[str, str] = {
    "block_size": "the platform's KV block size (CUDA: CacheConfig 16; vllm-ascend refresh_block_size: 128)",
    "max_num_batched_tokens": "vLLM's default follows device memory (get_batch_defaults: 8192 at 70 GiB and more, "
                              "2048 below)",
    "max_num_seqs": "vLLM's default follows device memory (get_batch_defaults: 1024 at 70 GiB and more, 256 below)",
    "compilation_config": "capture sizes follow max_num_seqs and the release's graph rules (graph=<option>)",
}
#: KV cache dtypes vllm-ascend's attention does not store (FP8 KV is a CUDA kernel feature; Ascend's 8-bit KV is
#: msModelSlim's C8 int8, vllm_ascend/quantization/methods/kv_c8.py at v0.23.0).
FP8_KV = {"fp8", "fp8_e4m3", "fp8_e5m2"}
#: Checkpoint formats no Ascend release serves (not in any ``supported_quantization``): vLLM CUDA kernels.
CUDA_FORMATS = {"awq", "awq_marlin", "gptq", "gptq_marlin", "marlin", "bitsandbytes", "gguf", "modelopt",
                "modelopt_fp4", "mxfp4", "fbgemm_fp8", "fp_quant", "torchao", "moe_wna16", "quark", "inc"}
#: msModelSlim ``--model_type`` per model option: the verified practice's model type where msModelSlim 26.1.0 ships
#: one (``lab_practice/<family>/*.yaml`` ``verified_model_types``), else ``default`` (its default-w8a8 preset).
MSMODELSLIM_MODEL_TYPE = {"qwen3_235b_a22b": "Qwen3-235B", "qwen3_30b_a3b": "Qwen3-30B", "qwen3_32b": "Qwen3-32B",
                          "qwen3_8b": "Qwen3-8B", "deepseek_r1": "DeepSeek-R1", "kimi_k2": "Kimi-K2"}


@dataclass
class Side:
    """One side of the migration: its plan's per-device figures, or the refusal.

    Attributes:
        hardware / device_name / devices: the option, its device and the devices the layout uses.
        layout: ``TP4 × DP1``-style text.
        device_memory_bytes, weights_bytes, kv_cache_bytes: per device, bytes (``plan.memory``).
        kv_tokens: KV-cache tokens per DP rank (``plan.kv_cache.tokens``); ``max_concurrency``: requests of
            ``max_model_len`` tokens at once.
        fits: the plan compiled and a request of ``max_model_len`` fits the KV cache; ``error``: the one line
            refusal when it did not compile.
    """

    hardware: str
    device_name: str = ""
    devices: int = 0
    tp: int = 1
    layout: str = ""
    device_memory_bytes: int = 0
    weights_bytes: int = 0
    kv_cache_bytes: int = 0
    kv_tokens: int = 0
    max_concurrency: float = 0.0
    max_model_len: int = 0
    fits: bool = False
    error: str | None = None
    plan: Plan | None = None


@dataclass
class Quantization:
    """The source checkpoint's quantization on the target release.

    Attributes:
        method: the source's ``--quantization`` (``None``: unquantized or detected).
        served: the target release serves it for this model (``None``: unquantized).
        why: the source of the verdict (file and function at the tag).
        command: the msModelSlim command that makes a checkpoint the target serves (W8A8_DYNAMIC), when not served.
        target: the quantization option the target plan uses.
    """

    method: str | None
    served: bool | None
    why: str
    command: str | None = None
    target: str = "none"


@dataclass
class Migration:
    """What :func:`migrate` reports."""

    source: Side
    target: Side
    layouts: list[Side]
    quantization: Quantization
    removed: list[tuple[str, str]] = field(default_factory=list)
    changed: list[tuple[str, Any, Any]] = field(default_factory=list)
    added: list[tuple[str, Any]] = field(default_factory=list)
    env_added: dict[str, str] = field(default_factory=dict)
    row: tuple[str, dict[str, Any]] = ("", {})
    baseline: Baseline | None = None
    recipe: Imported | None = None


@lru_cache(maxsize=1)
def quantization_support() -> dict[str, Any]:
    """``data/quantization_support.yaml``: ``{vllm-ascend version: {tag, methods}}`` plus ``_checked_through``."""
    return yaml.safe_load(resources.files("ascendflow.importer").joinpath("data/quantization_support.yaml").read_text())


def served(method: str, vllm_ascend: str, architecture: str) -> tuple[bool, str]:
    """Whether vllm-ascend ``vllm_ascend`` serves ``--quantization method`` for ``architecture``, and the source.

    The row is the newest at or below the version (``data/quantization_support.yaml``).
    """
    table = quantization_support()
    rows = [v for v in table if not v.startswith("_") and version_at_least(vllm_ascend, v)]
    if not rows:
        return False, f"no quantization row at or below vllm-ascend {vllm_ascend}"
    version = max(rows, key=lambda v: [int(p) if p.isdigit() else -1 for p in v.replace("rc", ".").split(".")])
    row = table[version]
    checked = table["_checked_through"]
    where = f"vllm_ascend/platform.py supported_quantization, the same from {row['tag']} (checked through {checked})"
    if not version_at_least(checked.lstrip("v"), vllm_ascend):
        where += f" (ESTIMATE for {vllm_ascend}: not checked past {checked})"
    methods = row["methods"]
    if method not in methods:
        return False, f"'{method}' is not in {where} ({', '.join(methods)})"
    rule = methods[method] or {}
    if rule.get("architectures") and architecture not in rule["architectures"]:
        return False, f"{rule['why']} ({where}); {architecture} is not one of {rule['architectures']}"
    return True, f"'{method}' is in {where}"


def msmodelslim_command(option: str, model_id: str) -> str:
    """The msModelSlim 26.1.0 command (``msmodelslim quant``, ``msmodelslim/cli/__main__.py``) that writes a
    W8A8_DYNAMIC checkpoint (``quant_model_description.json``) of the BF16 original of ``model_id``."""
    base = model_id.rstrip("/").rsplit("/", 1)[-1]
    for suffix in ("-FP8", "-fp8", "-AWQ", "-awq", "-GPTQ", "-gptq", "-Int4", "-Int8", "-FP8-Dynamic"):
        base = base.removesuffix(suffix)
    return (f"msmodelslim quant --model_path /path/to/{base} --save_path /path/to/{base}-W8A8 --device npu "
            f"--model_type {MSMODELSLIM_MODEL_TYPE.get(option, 'default')} --quant_type w8a8 --trust_remote_code True")


def _option(recipe: dict[str, Any], group: str) -> str | None:
    return next((d[f"override /{group}"] for d in recipe["defaults"] if f"override /{group}" in d), None)


def _side(hardware: str, raw: dict[str, Any], layout_overrides: dict[str, Any] | None = None) -> Side:
    """Compile ``raw`` (a composed config) and read its per-device figures; a refusal is kept as ``error``."""
    from ascendflow.compiler import compile_plan
    from ascendflow.models.resolve import resolve_model
    from ascendflow.schema import load_spec

    raw = copy.deepcopy(raw)
    for key, value in (layout_overrides or {}).items():
        raw["parallel"][key] = value
    par = raw["parallel"]
    hw = raw["hardware"]
    side = Side(hardware=hardware, device_name=hw.get("device_name", ""),
                devices=par["tensor_parallel_size"] * par.get("pipeline_parallel_size", 1) * par["data_parallel_size"],
                tp=par["tensor_parallel_size"], layout=_layout(par),
                device_memory_bytes=int(hw.get("device_memory_bytes") or 0))
    try:
        spec = load_spec(raw)
        plan = compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture,
                            model_path=raw["model"].get("path") or raw["model"]["id"])
    except ConfigError as error:
        side.error = str(error)
        return side
    side.plan = plan
    side.weights_bytes, side.kv_cache_bytes = plan.memory.weights_bytes, plan.memory.kv_cache_bytes
    side.kv_tokens, side.max_concurrency = plan.kv_cache.tokens, plan.kv_cache.max_concurrency
    side.max_model_len = int(plan.engine_args.get("max_model_len") or 0)
    side.fits = bool(plan.kv_cache.fits)
    return side


def _layout(par: dict[str, Any]) -> str:
    text = f"TP{par['tensor_parallel_size']} × DP{par['data_parallel_size']}"
    if par.get("pipeline_parallel_size", 1) > 1:
        text += f" × PP{par['pipeline_parallel_size']}"
    return text + (" EP" if par.get("enable_expert_parallel") else "")


def fitting_layouts(hardware: str, raw: dict[str, Any], source_tp: int, source_devices: int, *,
                    limit: int = 3) -> list[Side]:
    """The nearest TP × DP layouts (one node of ``hardware``, PP 1) whose plan compiles and fits.

    Enumerates TP and DP over powers of two with TP × DP ≤ devices per node, compiles each (the compiler's own
    feasibility: weights, KV budget, a request of ``max_model_len``), ranks the fitting ones by
    ``(|devices − source devices|, devices, |TP − source TP|)`` and returns the first ``limit``.
    """
    per_node = int(raw["hardware"]["devices_per_node"])
    sizes = [s for s in (1, 2, 4, 8, 16, 32) if s <= per_node]
    out = []
    for tp in sizes:
        for dp in sizes:
            if tp * dp > per_node:
                continue
            side = _side(hardware, raw, {"tensor_parallel_size": tp, "data_parallel_size": dp,
                                         "pipeline_parallel_size": 1, "nodes": 1})
            if side.fits and side.error is None:
                out.append(side)
    out.sort(key=lambda s: (abs(s.devices - source_devices), s.devices, abs(s.tp - source_tp)))
    return out[:limit]


def migrate(imported: Imported, to_hardware: str, release: str | None = None,
            baseline: Baseline | None = None, layouts: int = 3, name: str | None = None) -> Migration:
    """Plan ``imported`` on its own hardware and on ``to_hardware`` (release row ``release``, else the hardware
    option's), and say what changes. ``baseline``: the source's measured figures and what they were measured with
    (:func:`ascendflow.importer.baseline.read_record`), carried by the target recipe as ``run.baseline``
    (:mod:`ascendflow.schema.baseline`; its hardware the source side's option where the figures record none).

    Raises:
        ConfigError: an unknown hardware option or release row (one line).
    """
    check_target(to_hardware, release)
    row = target_row(to_hardware, release)
    source_hw = _option(imported.recipe, "hardware")
    source_raw = compose_recipe(imported)
    source = _side(source_hw, source_raw)

    recipe = copy.deepcopy(imported.recipe)
    named = list(imported.named)
    for d in recipe["defaults"]:
        if "override /hardware" in d:
            d["override /hardware"] = to_hardware
    recipe.setdefault("hardware", {})["software"] = row[0]
    from ascendflow.platforms import platform_for

    # CUDA-only flags, FP8 KV and the CUDA-stack env go where HCCL replaces NCCL (the Ascend platform); the
    # quantization verdict is read where the row names a vllm-ascend release
    hccl = platform_for(yaml.safe_load((CONF / "hardware" / f"{to_hardware}.yaml").read_text())["kind"]).hccl_env
    option = _option(recipe, "model")
    arch = (source_raw["model"].get("architecture") or {}).get("architectures", [""])[0]
    method = imported.checkpoint_quantization
    quant = Quantization(method=method, served=None, why="unquantized checkpoint",
                         target=_option(recipe, "quantization") or "none")
    removed: list[tuple[str, str]] = []
    kv = (recipe.get("quantization") or {}).get("kv_cache_dtype")
    if hccl and kv in FP8_KV:
        recipe["quantization"].pop("kv_cache_dtype")
        removed.append((f"--kv-cache-dtype {kv}", "FP8 KV cache is a CUDA attention feature; vllm-ascend stores KV in "
                                                  "the model dtype, or int8 via msModelSlim C8 (quantization/methods/"
                                                  "kv_c8.py at v0.23.0)"))
    if method and row[1].get("vllm_ascend") and method != "ascend":
        ok, why = served(method, str(row[1].get("vllm_ascend")), arch)
        quant = Quantization(method=method, served=ok, why=why, target=quant.target)
        if not ok:
            quant.command = msmodelslim_command(option or "", imported.commands[0].model)
            quant.target = "w8a8_dynamic_ascend"
            kept = {k: v for k, v in (recipe.get("quantization") or {}).items() if k == "kv_cache_dtype"}
            recipe.pop("quantization", None)
            if kept:
                recipe["quantization"] = kept
            for d in recipe["defaults"]:
                if "override /quantization" in d:
                    d["override /quantization"] = "w8a8_dynamic_ascend"
            removed.append((f"quantization {method} (the checkpoint's)", "not served by the target; re-quantize to "
                                                                         f"W8A8_DYNAMIC: {quant.command}"))
    extra = (recipe.get("engine") or {}).get("extra_args")
    if hccl and extra:
        kept = []
        tokens = list(extra)
        _, given = given_options(["MODEL", *tokens])
        for dest, flag_tokens in given.items():
            if dest in CUDA_ONLY:
                removed.append((flag_tokens[0].split("=", 1)[0], CUDA_ONLY[dest]))
            else:
                kept += flag_tokens
        recipe["engine"]["extra_args"] = kept or None
    env = (recipe.get("ascend") or {}).get("env") or {}
    if hccl and env:
        for key in [k for k in env if k.startswith(CUDA_ENV)]:
            removed.append((f"env {key}", "a CUDA-stack variable (NCCL / CUDA / FlashInfer / DeepGEMM); Ascend runs "
                                          "HCCL and CANN, set by the environment bundle (conf/ascend)"))
            env.pop(key)
        recipe["ascend"]["env"] = env or {}
    target_imported = Imported(recipe=recipe, named=named + [(f, w) for f, w in removed], commands=imported.commands,
                               name=name or f"{imported.name}_{to_hardware}", dropped=imported.dropped,
                               dropped_additional=imported.dropped_additional,
                               checkpoint_quantization=imported.checkpoint_quantization,
                               migrated_to=f"hardware={to_hardware}, version-matrix row {row[0]}")
    if baseline:
        # the plan carries them: logged with the run's params, set beside its figures by python -m ascendflow.compare
        target_imported.recipe.setdefault("run", {})["baseline"] = baseline.spec(source_hw)
    target_raw = compose_recipe(target_imported)
    target = _side(to_hardware, target_raw)
    par = source_raw["parallel"]
    fitting = fitting_layouts(to_hardware, target_raw, par["tensor_parallel_size"], source.devices or 1,
                              limit=layouts)
    if not target.fits and fitting:
        best = fitting[0]
        par = target_imported.recipe.setdefault("parallel", {})
        par.update({"tensor_parallel_size": best.tp, "data_parallel_size": best.devices // best.tp,
                    "pipeline_parallel_size": 1})
        target_imported.named.append(("parallel", f"{target.layout} does not fit {to_hardware}; the recipe takes the "
                                                  f"nearest layout that does, {best.layout}"))
    migration = Migration(source=source, target=target, layouts=fitting, quantization=quant, removed=removed,
                          row=row, baseline=baseline, recipe=target_imported)
    reference = target.plan or (fitting[0].plan if fitting else None)
    if source.plan and reference:
        a, b = _argv_values(source.plan), _argv_values(reference)
        migration.changed = [(f"--{d.replace('_', '-')}", a[d], b[d]) for d in sorted(set(a) & set(b))
                             if a[d] != b[d] and d not in ("model_tag",)]
        migration.added = [(f"--{d.replace('_', '-')}", b[d]) for d in sorted(set(b) - set(a))]
        migration.removed += [(f"--{d.replace('_', '-')}", "not written for the target (its release's rules)")
                              for d in sorted(set(a) - set(b))
                              if not any(r[0].startswith(f"--{d.replace('_', '-')}") for r in removed)]
        migration.env_added = {k: v for k, v in reference.env.items() if source.plan.env.get(k) != v}
    return migration


def _argv_values(plan: Plan) -> dict[str, Any]:
    argv = list(plan.serve_command[2:])
    model, given = given_options(argv)
    out = typed_values(given, argv)
    out["model_tag"] = model
    return out


def _gib(value: int) -> str:
    return f"{value / GIB:.2f} GiB"


def render(m: Migration) -> str:
    """The migration as text: the side-by-side table, then layouts, quantization, flags, env, row, baseline."""
    s, t = m.source, m.target
    rows = [("hardware", s.hardware, t.hardware), ("device", s.device_name, t.device_name),
            ("layout", s.layout, t.layout), ("devices used", str(s.devices), str(t.devices)),
            ("device memory", _gib(s.device_memory_bytes), _gib(t.device_memory_bytes))]
    if s.plan or t.plan:
        def cells(x: Side, attr: str, fmt) -> str:
            return fmt(getattr(x, attr)) if x.plan else "-"
        rows += [("weights / device", cells(s, "weights_bytes", _gib), cells(t, "weights_bytes", _gib)),
                 ("KV cache / device", cells(s, "kv_cache_bytes", _gib), cells(t, "kv_cache_bytes", _gib)),
                 ("KV tokens / DP rank", cells(s, "kv_tokens", lambda v: f"{v:,}"),
                  cells(t, "kv_tokens", lambda v: f"{v:,}")),
                 ("max_model_len", cells(s, "max_model_len", str), cells(t, "max_model_len", str)),
                 ("requests at max_model_len", cells(s, "max_concurrency", lambda v: f"{v:.1f}"),
                  cells(t, "max_concurrency", lambda v: f"{v:.1f}"))]
    rows.append(("fits", "yes" if s.fits else "no", "yes" if t.fits else "no"))
    width = max(len(r[0]) for r in rows)
    col = max(len(r[1]) for r in rows) + 2
    lines = [f"{'':{width}}  {'source':{col}}target", *[f"{k:{width}}  {a:{col}}{b}" for k, a, b in rows]]
    if s.plan and t.plan and s.kv_cache_bytes:
        lines.append(f"KV cache per device: {(t.kv_cache_bytes - s.kv_cache_bytes) / GIB:+.2f} GiB "
                     f"({t.kv_cache_bytes / s.kv_cache_bytes - 1:+.1%}); KV tokens per DP rank "
                     f"{t.kv_tokens - s.kv_tokens:+,}")
    for side, label in ((s, "source"), (t, "target")):
        if side.error:
            lines.append(f"{label} does not plan: {side.error}")
    lines.append("fitting layouts on the target (nearest first):" if m.layouts else
                 "no TP x DP layout of one target node fits")
    for x in m.layouts:
        lines.append(f"  {x.layout}: {x.devices} devices, KV {_gib(x.kv_cache_bytes)} / device, "
                     f"{x.kv_tokens:,} tokens / DP rank")
    q = m.quantization
    if q.method:
        verdict = "served" if q.served else ("not served" if q.served is False else "kept")
        lines.append(f"quantization {q.method}: {verdict} by the target ({q.why})")
        if q.command:
            lines.append(f"  make a checkpoint it serves: {q.command}")
            lines.append(f"  then plan it with quantization={q.target}")
    for flag, why in m.removed:
        lines.append(f"removed {flag}: {why}")
    for flag, a, b in m.changed:
        dest = flag[2:].replace("-", "_")
        if dest == "compilation_config" and isinstance(a, dict) and isinstance(b, dict):
            a, b = _graph_text(a), _graph_text(b)
        why = f" ({CHANGE_REASONS[dest]})" if dest in CHANGE_REASONS else ""
        lines.append(f"changed {flag}: {_short(a)} -> {_short(b)}{why}")
    for flag, b in m.added:
        lines.append(f"added {flag} {_short(b)}")
    for k, v in m.env_added.items():
        lines.append(f"env {k}={v}")
    name, row = m.row
    lines.append(f"version matrix row {name}: " + ", ".join(f"{k} {v}" for k, v in row.items() if v is not None))
    b = m.baseline
    if b:
        lines.append("source baseline (measured): " + ", ".join(f"{k} {v:g}" for k, v in b.metrics.items()))
        where = f"{b.source} ({b.tracking_uri})" if b.tracking_uri else b.source
        lines.append(f"  measured with {b.model or 'a model it does not name'} on "
                     f"{b.hardware or s.hardware + ' (the source side: the figures name no hardware)'}, from {where}")
        if b.contention:
            lines.append(f"  measured under contention (tag measurement.contention=true: "
                         f"{b.contention_reason or 'no reason recorded'}): the figures are not the deployment's alone")
    return "\n".join(lines)


def _graph_text(config: dict[str, Any]) -> str:
    sizes = config.get("cudagraph_capture_sizes") or []
    text = str(config.get("cudagraph_mode", "default mode"))
    return text + (f", {len(sizes)} capture sizes up to {max(sizes)}" if sizes else "")


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."
