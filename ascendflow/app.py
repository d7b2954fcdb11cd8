"""The job: config → spec → plan → run → record. Called by the Hydra task in ``__main__``."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ascendflow import console
from ascendflow.compiler import Plan, compile_plan
from ascendflow.models.errors import ModelNotFoundError
from ascendflow.models.resolve import resolve_model
from ascendflow.report import kv_capacity_line, result_record, summary_rows
from ascendflow.runner.artifacts import write_json, write_plan
from ascendflow.runner.detect import cpu_has_amx, cpu_node_memory_bytes, hardware_present
from ascendflow.runner.local import run_offline, serve_and_benchmark
from ascendflow.runner.server import EngineStartError
from ascendflow.runner.versions import VersionMismatchError, verify_installed
from ascendflow.schema import ConfigError, RunSpec, load_spec
from ascendflow.schema.tracking import TrackingSpec
from ascendflow.tracking import TrackedRun


class _Terminated(Exception):
    """SIGTERM received: unwinds like Ctrl-C so every child is stopped and the run is ended."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated(f"signal {signum}")


def _tracking_settings(raw: dict[str, Any]) -> TrackingSpec:
    try:
        return TrackingSpec.model_validate(raw.get("tracking") or {})
    except Exception:  # invalid tracking keys are reported by load_spec; record with defaults meanwhile
        return TrackingSpec()


def _mode(spec: RunSpec) -> str:
    present = hardware_present(spec.hardware)
    if spec.run.mode == "auto":
        return "serve" if present else "plan"
    if spec.run.mode != "plan" and not present:
        raise ConfigError("run.mode", spec.run.mode, f"hardware={spec.hardware.name} ({spec.hardware.kind}) is not "
                                                     "on this machine; use run.mode=plan (or auto) to write the plan "
                                                     "and launch scripts for it")
    return spec.run.mode


def run_job(cfg: DictConfig) -> float | None:
    """Run one Hydra job end to end and return the sweep objective (output tokens/s), or ``None`` when plan-only.

    Exits with code 2 and one line on stderr for bad input (``HYDRA_FULL_ERROR=1`` re-raises it with its traceback);
    the MLflow run is ended FAILED with the run directory attached on any error, KILLED on Ctrl-C/SIGTERM.
    """
    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir)
    choices = {k: v for k, v in hc.runtime.choices.items() if not k.startswith("hydra") and v is not None}
    recipe = choices.get("recipe")
    try:
        raw = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except OmegaConfBaseException as exc:
        return _bad_input(ConfigError(getattr(exc, "full_key", "?") or "?", "???", "is missing or cannot be "
                                      "resolved; set it on the command line"), None)

    tracked = TrackedRun(
        _tracking_settings(raw), Path.cwd() / "outputs", experiment=recipe or "ascendflow",
        run_name="-".join(str(choices.get(g, "?")) for g in ("model", "hardware", "parallel")),
        tags={"recipe": recipe or "", **{f"choice.{k}": str(v) for k, v in choices.items()}},
    )
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        spec = load_spec(raw)
        mode = _mode(spec)
        tracked.set_tags({"run.mode": mode, "run_dir": str(run_dir)})
        tracked.log_params(spec.model_dump(mode="json"))
        with console.step(f"model {spec.model.name}") as update:
            model = resolve_model(spec.model, need_weights=mode in ("serve", "offline"), progress=update)
        plan = compile_plan(spec, model.architecture, model_path=model.path or spec.model.id,
                            host_memory_bytes=cpu_node_memory_bytes() if spec.hardware.kind == "cpu" else None,
                            host_amx=cpu_has_amx(), checkpoint=model.checkpoint)
        written = write_plan(plan, run_dir)
        tracked.set_tags({"plan_hash": plan.plan_hash})
        tracked.log_metrics(_plan_metrics(plan))
        outcome = _execute(mode, plan, spec, run_dir)
        record = result_record(plan, outcome)
        write_json(run_dir / "result.json", record)
        tracked.log_metrics({**_plan_metrics(plan), **record["metrics"]})
        tracked.end("FINISHED", run_dir)
        console.memory_waterfall(plan.memory.model_dump(), kv_capacity_line(plan))
        console.summary(f"ascendflow · {mode} · plan {plan.plan_hash}", summary_rows(plan, record, written),
                        _footer(tracked, run_dir))
        console.warn_lines(plan.warnings)
        return record["metrics"].get("output_throughput")
    except ConfigError as exc:
        return _bad_input(exc, tracked, run_dir)
    except (EngineStartError, ModelNotFoundError, VersionMismatchError) as exc:
        tracked.set_tags({"error": str(exc).splitlines()[0][:500]})
        (run_dir / "error.txt").write_text(f"{exc}\n")
        tracked.end("FAILED", run_dir)
        console.fail_line(str(exc))
        sys.exit(1)
    except (KeyboardInterrupt, _Terminated):
        tracked.set_tags({"error": "interrupted"})
        tracked.end("KILLED", run_dir)
        console.fail_line("interrupted: engine stopped, MLflow run ended KILLED")
        sys.exit(130)
    except BaseException as exc:
        tracked.set_tags({"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]})
        (run_dir / "error.txt").write_text(f"{type(exc).__name__}: {exc}\n")
        tracked.end("FAILED", run_dir)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def _bad_input(exc: ConfigError, tracked: TrackedRun | None, run_dir: Path | None = None) -> None:
    if tracked is not None:
        tracked.set_tags({"error": str(exc)[:500]})
        if run_dir is not None:
            (run_dir / "error.txt").write_text(str(exc) + "\n")
        tracked.end("FAILED", run_dir)
    if os.environ.get("HYDRA_FULL_ERROR") == "1":
        raise exc
    console.fail_line(str(exc))
    sys.exit(2)


def _execute(mode: str, plan: Plan, spec: RunSpec, run_dir: Path) -> dict[str, Any]:
    if mode == "plan":
        return {}
    verify_installed(plan.target.engine)
    if mode == "serve":
        with console.step("serve + benchmark (vLLM server, vLLM's benchmark client)") as update:
            return serve_and_benchmark(plan, spec, run_dir, update)
    with console.step("offline generation (vllm.LLM)") as update:
        return run_offline(plan, spec, run_dir, update)


def _plan_metrics(plan: Plan) -> dict[str, float]:
    return {
        "predicted_kv_cache_tokens": plan.kv_cache.tokens,
        "predicted_kv_cache_blocks": plan.kv_cache.num_blocks,
        "predicted_max_concurrency": plan.kv_cache.max_concurrency,
        "predicted_kv_bytes_per_token": plan.kv_cache.bytes_per_token,
        **{f"predicted_{k}": v for k, v in plan.memory.model_dump().items()},
    }


def _footer(tracked: TrackedRun, run_dir: Path) -> list[str]:
    lines = [f"run directory: {run_dir}"]
    if tracked.ui_command():
        lines.append(f"MLflow run {tracked.run_id} (experiment {tracked.experiment_id}); see it with:")
        lines.append(f"  {tracked.ui_command()}")
    return lines
