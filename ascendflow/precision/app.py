"""The precision report job: resolve both engines, share token ids, run the two workers, compare, record.

Exit codes as ``python -m ascendflow``: 2 and one line for bad input (``ConfigError``), 1 when an engine fails or a
threshold is breached (the MLflow run then ends FAILED with the report attached), 0 when every threshold holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from ascendflow import console
from ascendflow.precision.metrics import breaches, compare
from ascendflow.schema import ConfigError, load_spec

DATA = Path(__file__).resolve().parent / "data"
#: Engine arguments of the candidate's plan that the precision engines keep (the rest are serving-only).
KEPT_ENGINE_ARGS = ("model", "dtype", "quantization", "enforce_eager", "kv_cache_dtype", "seed",
                    "tensor_parallel_size", "compilation_config", "block_size")
WORKER_TIMEOUT_S = 1800


class PrecisionFailedError(RuntimeError):
    """A threshold was breached, or an engine failed."""


def _checkpoint_dtype(model_dir: str) -> str:
    config = json.loads((Path(model_dir) / "config.json").read_text())
    return str(config.get("dtype") or config.get("torch_dtype") or "bfloat16")


def _reference_dir(prec: dict[str, Any], candidate_dir: str, candidate_quant: str | None) -> tuple[str, str]:
    """Directory of the reference model and how it was chosen: ``precision.reference.model`` (conf/model option or
    directory); for a quantized checkpoint ascendflow built, the float model it was quantized from
    (:func:`ascendflow.models.checkpoint.float_source`); else the candidate's own (refused for any other msModelSlim
    candidate: its int8 weights have no float dtype to run in).

    Raises:
        ConfigError: the option names no model here, or the candidate is quantized, was not built by ascendflow and no
            reference is given.
    """
    from ascendflow.models.checkpoint import float_source
    from ascendflow.models.resolve import resolve_model
    from ascendflow.schema.model import ModelSpec

    name = prec["reference"]["model"]
    if name is None:
        if candidate_quant:
            source = float_source(Path(candidate_dir))
            if source is None:
                raise ConfigError("precision.reference.model", None, f"the candidate is an msModelSlim "
                                                                     f"{candidate_quant} checkpoint; name its float "
                                                                     f"model, e.g. precision.reference.model="
                                                                     f"smollm2_135m")
            return str(source[0]), (f"{source[1]}: the float model this checkpoint was quantized from (recorded when "
                                    f"ascendflow built it; precision.reference.model chooses another)")
        return candidate_dir, "the candidate's own model (precision.reference.model not set)"
    option = Path(__file__).resolve().parents[2] / "conf" / "model" / f"{name}.yaml"
    if option.is_file():
        spec = ModelSpec.model_validate(OmegaConf.to_container(OmegaConf.load(option), resolve=True))
        return str(resolve_model(spec, need_weights=True).path), f"{name} (precision.reference.model)"
    if (Path(name) / "config.json").is_file():
        return str(Path(name).resolve()), f"{name} (precision.reference.model)"
    raise ConfigError("precision.reference.model", name, "is neither a conf/model option nor a model directory; "
                                                         "use e.g. precision.reference.model=smollm2_135m")


#: Engine arguments that decide what is computed: equal in both engines means candidate = reference.
SAME_COMPUTATION = ("model", "dtype", "quantization", "kv_cache_dtype", "enforce_eager", "compilation_config")


def same_engine(reference: dict[str, Any], candidate: dict[str, Any]) -> bool:
    """True when both engines run the same weights the same way (:data:`SAME_COMPUTATION`, model paths resolved):
    the report then compares a model with itself and every metric is perfect by construction."""
    def key(llm: dict[str, Any]) -> tuple:
        return tuple(str(Path(llm[k]).resolve()) if k == "model" and llm.get(k) else
                     bool(llm.get(k)) if k == "enforce_eager" else llm.get(k) for k in SAME_COMPUTATION)
    return key(reference) == key(candidate)


def _llm_kwargs(base: dict[str, Any], prec: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in base.items() if k in KEPT_ENGINE_ARGS and v is not None}
    return {**kept, "max_model_len": prec["max_model_len"], "kv_cache_memory_bytes": prec["kv_cache_memory_bytes"],
            "max_num_seqs": prec["max_num_seqs"], "enable_prefix_caching": False}


def _run_worker(role: str, job: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """Run one engine in its own process (``ascendflow.precision.worker``); its output goes to ``<role>.log``.

    Raises:
        PrecisionFailedError: the engine failed or timed out.
    """
    job_path, out_path, log = run_dir / f"{role}_job.json", run_dir / f"{role}_result.json", run_dir / f"{role}.log"
    job_path.write_text(json.dumps(job))
    with log.open("w") as out:
        try:
            proc = subprocess.run([sys.executable, "-m", "ascendflow.precision.worker", str(job_path), str(out_path)],
                                  stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=WORKER_TIMEOUT_S, env=os.environ.copy())
        except subprocess.TimeoutExpired as exc:
            raise PrecisionFailedError(f"{role} engine timed out after {WORKER_TIMEOUT_S} s; see {log}") from exc
    if proc.returncode != 0:
        # vLLM's teardown can abort (SIGABRT, "terminate called without an active exception") after the worker
        # wrote its complete result (seen here in a full test run): the measurement stands.
        try:
            return json.loads(out_path.read_text())
        except (OSError, ValueError):
            pass
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-12:])
        raise PrecisionFailedError(f"{role} engine failed (exit {proc.returncode}); last lines of {log}:\n{tail}")
    return json.loads(out_path.read_text())


def _reference(name: str, dtype: str, job: dict[str, Any], use_cache: bool, run_dir: Path,
               say) -> tuple[dict[str, Any], str]:
    """The reference worker's result and where it came from: ``"engine"`` (run now, then kept in the cache) or
    ``"cache <file>"`` (an earlier run with the same key, :mod:`ascendflow.precision.cache`)."""
    from ascendflow.precision import cache

    key = cache.cache_key(job) if use_cache else None
    if key and (hit := cache.load(key)) is not None:
        say(f"reference engine: {name} {dtype} (results reused: {cache.CACHE_DIR / (key + '.json')})")
        return hit, f"cache {cache.CACHE_DIR / (key + '.json')}"
    say(f"reference engine: {name} {dtype}")
    result = _run_worker("reference", job, run_dir)
    if key:
        cache.store(key, result)
    return result, "engine"


def _measure(spec, prec: dict[str, Any], run_dir: Path, say) -> dict[str, Any]:
    """Resolve both engines, run them and return the report (without thresholds)."""
    from ascendflow.models.resolve import resolve_model
    from ascendflow.precision.tokens import check_same_tokenizer, load_tokenizer, prompt_ids, text_ids
    from ascendflow.runner.detect import compile_for_this_host, hardware_present

    if not hardware_present(spec.hardware):
        raise ConfigError("hardware", spec.hardware.name, "the precision report runs both engines on this machine; "
                                                          "use hardware=cpu here")
    model = resolve_model(spec.model, need_weights=True, progress=say)
    plan = compile_for_this_host(spec, model)
    quant = model.checkpoint.quant_type if model.checkpoint else None
    ref_dir, ref_choice = _reference_dir(prec, model.path, quant)
    ref_dtype = prec["reference"]["dtype"] or _checkpoint_dtype(ref_dir)
    candidate = _llm_kwargs(plan.engine_args, prec)
    reference = _llm_kwargs({"model": ref_dir, "dtype": ref_dtype, "enforce_eager": prec["reference"]["enforce_eager"],
                             "seed": spec.engine.seed}, prec)
    ref_tok, cand_tok = load_tokenizer(ref_dir), load_tokenizer(model.path)
    check_same_tokenizer(ref_tok, cand_tok, "precision.reference.model", prec["reference"]["model"] or ref_dir)
    prompts = prompt_ids(cand_tok, Path(prec["prompts"]) if prec["prompts"] else DATA / "prompts.jsonl",
                         prec["num_prompts"])
    texts = text_ids(cand_tok, Path(prec["text"]) if prec["text"] else DATA / "pride_and_prejudice_ch1.txt",
                     prec["max_model_len"] - 1)
    job = {"prompts": prompts, "max_tokens": prec["max_tokens"], "texts": texts}
    ref, ref_source = _reference(Path(ref_dir).name, ref_dtype, {**job, "llm": reference, "teacher": None},
                                 prec.get("reference_cache", True), run_dir, say)
    same = same_engine(reference, candidate)
    if same:  # the same computation twice: the candidate's results are the reference's
        cand = ref
    else:
        say(f"candidate engine: {Path(model.path).name} {candidate.get('dtype')} "
            f"{candidate.get('quantization') or ''}")
        cand = _run_worker("candidate", {**job, "llm": candidate, "teacher": ref["teacher"]}, run_dir)
    report = compare(ref, cand, [len(p) for p in prompts])
    report["reference"], report["candidate"] = reference, candidate
    report["reference_choice"], report["reference_result"] = ref_choice, ref_source
    if same:
        report["note"] = (f"candidate equals reference ({Path(ref_dir).name}, {ref_dtype}, no quantization, same "
                          "graph mode): every metric is perfect by construction; compare another build with "
                          "quantization=..., engine.dtype=..., graph=... or precision.reference.model=... "
                          "(the candidate engine was not started: its results are the reference's)")
    report["text_tokens"] = sum(len(t) for t in texts)
    report["greedy_text"] = {"reference": [ref_tok.decode(g, skip_special_tokens=True) for g in ref["greedy"]],
                             "candidate": [cand_tok.decode(g, skip_special_tokens=True) for g in cand["greedy"]]}
    report["engine_seconds"] = {  # [load, run] s of each engine started for this report
        "reference": [ref["load_seconds"], ref["run_seconds"]] if ref_source == "engine" else None,
        "candidate": None if same else [cand["load_seconds"], cand["run_seconds"]]}
    return report


SUMMARY_KEYS = ("greedy_agreement", "earliest_divergence", "top1_agreement", "mean_abs_dlogprob", "max_abs_dlogprob",
                "perplexity_reference", "perplexity_candidate", "scored_tokens", "text_tokens")


def run_report(cfg: DictConfig) -> None:
    """Run the precision report for the composed config and exit with its status (see the module docstring)."""
    from ascendflow.precision.plot import dlogprob_histogram
    from ascendflow.schema.tracking import TrackingSpec
    from ascendflow.tracking import TrackedRun

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    raw = OmegaConf.to_container(cfg, resolve=True)
    raw.pop("hydra", None)
    prec = raw.pop("precision")
    tracked = TrackedRun(TrackingSpec.model_validate(raw.get("tracking", {})), Path.cwd() / "outputs",
                         experiment="ascendflow-precision", run_name=f"{raw['model']['name']}-precision",
                         tags={"run.mode": "precision", "run_dir": str(run_dir)})
    try:
        spec = load_spec(raw)
        tracked.log_params({**spec.model_dump(mode="json"), "precision": prec})
        with console.step("precision: reference vs candidate (vllm.LLM, one engine at a time)") as say:
            report = _measure(spec, prec, run_dir, say)
        failed = breaches(report, prec["thresholds"])
        report["thresholds"], report["breaches"] = prec["thresholds"], failed
        (run_dir / "precision_report.json").write_text(json.dumps(report, indent=1))
        dlogprob_histogram(report["dlogprob"], f"{spec.model.name}: candidate vs reference "
                                               f"({report['scored_tokens']} tokens)", run_dir / "dlogprob_hist.png")
        tracked.log_metrics({k: report[k] for k in SUMMARY_KEYS if report[k] is not None})
        tracked.set_tags({"precision.reference": report["reference_choice"][:500],
                          **({"precision.note": report["note"][:500]} if "note" in report else {})})
        footer = [f"reference: {report['reference_choice']}", f"report: {run_dir / 'precision_report.json'}"]
        if tracked.ui_command():  # as the main command's footer (ascendflow/app.py)
            footer += [f"MLflow run {tracked.run_id} (experiment {tracked.experiment_id}); see it with:",
                       f"  {tracked.ui_command()}"]
        console.summary("ascendflow · precision", {k: f"{report[k]:.4g}" if isinstance(report[k], float)
                                                   else str(report[k]) for k in SUMMARY_KEYS}, footer)
        if "note" in report:
            console.warn_lines([report["note"]])
        if failed:
            raise PrecisionFailedError("precision thresholds breached: " + "; ".join(failed))
        tracked.end("FINISHED", run_dir)
    except (ConfigError, PrecisionFailedError) as exc:
        (run_dir / "error.txt").write_text(str(exc) + "\n")
        tracked.set_tags({"error": str(exc).splitlines()[0][:500]})
        tracked.end("FAILED", run_dir)
        console.fail_line(str(exc))
        sys.exit(2 if isinstance(exc, ConfigError) else 1)
    except Exception:
        (run_dir / "error.txt").write_text(traceback.format_exc())
        tracked.end("FAILED", run_dir)
        raise
