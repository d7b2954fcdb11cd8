"""The app's side of the performance model (I/O): find the op table, measure the chat prompts' token lengths,
call the pure :func:`~ascendflow.perfmodel.predict.predict` and attach its result to the plan."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ascendflow.compiler import Plan
from ascendflow.perfmodel.calibration import load_calibration
from ascendflow.perfmodel.pd_ratio import pd_ratio
from ascendflow.perfmodel.predict import MEASURED_ERROR, SIMULATED_REQUESTS, predict
from ascendflow.perfmodel.shapes import layer_shapes
from ascendflow.perfmodel.table import TABLES_DIR, find_table
from ascendflow.platforms import platform_for
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.spec import RunSpec

#: The accuracy benchmark's results (``benchmarks/perf_model_accuracy.py``), quoted as the table model's error.
ACCURACY = Path("outputs") / "bench" / "perf_model_accuracy.json"
#: Token lengths of the chat workload per model and workload (see :func:`chat_lengths`).
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ascendflow" / "chat_lengths"


def chat_lengths(spec: RunSpec, model_path: str | None) -> list[tuple[int, int]] | None:
    """``(prompt tokens with the chat template, output_tokens)`` per chat request, in send order; ``None`` when
    the tokenizer cannot be read (no local model directory)."""
    if not model_path or not Path(model_path).is_dir():
        return None
    # Cached per model directory and workload: loading a tokenizer costs seconds (transformers' import) on every
    # plan of a sweep otherwise.
    key = hashlib.sha256(f"{Path(model_path).resolve()}|{spec.workload.model_dump_json()}".encode()).hexdigest()[:24]
    cache = CACHE_DIR / f"{key}.json"
    if cache.exists():
        try:
            return [tuple(x) for x in json.loads(cache.read_text())]
        except (OSError, ValueError):
            pass
    lengths = _tokenized_lengths(spec, model_path)
    if lengths is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(lengths))
            tmp.replace(cache)
        except OSError:
            pass
    return lengths


def _tokenized_lengths(spec: RunSpec, model_path: str) -> list[tuple[int, int]] | None:
    from ascendflow.workloads.chat import chat_requests

    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(model_path)
        lengths = []
        # Only the requests the prediction simulates (the first ones: chat_requests draws in order).
        n = min(spec.workload.num_prompts, SIMULATED_REQUESTS)
        for r in chat_requests(spec.workload.model_copy(update={"num_prompts": n})):
            ids = (tok.apply_chat_template([{"role": "user", "content": r["prompt"]}], add_generation_prompt=True)
                   if tok.chat_template else tok(r["prompt"])["input_ids"])
            ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
            lengths.append((len(ids), int(r["output_tokens"])))
        return lengths
    except Exception:  # noqa: BLE001 - a prediction is optional; the run goes on without it
        return None


def measured_error(root: Path) -> dict[str, Any]:
    """MAPE figures from the accuracy benchmark's results file under ``root``, else the committed figures
    (:data:`~ascendflow.perfmodel.predict.MEASURED_ERROR`)."""
    path = root / ACCURACY
    if not path.exists():
        return dict(MEASURED_ERROR)
    data = json.loads(path.read_text())
    return {"file": str(ACCURACY), "mape_percent": data["mape_percent"],
            "spearman_output_throughput": data["spearman_output_throughput"], "configs": len(data["configs"])}


def with_performance(plan: Plan, spec: RunSpec, model_path: str | None, root: Path,
                     tables_dir: Path = TABLES_DIR) -> Plan:
    """``plan`` with its ``performance`` section (see :func:`~ascendflow.perfmodel.predict.predict`); a failure
    of the model is recorded there (``status: not predicted``) and never stops the run, except a bad
    ``hardware.calibration`` (see :func:`calibration_file`)."""
    try:
        return _attach(plan, spec, model_path, root, tables_dir)
    except ConfigError:  # a calibration file the user named and that cannot be used: bad input, not advisory
        raise
    except Exception as exc:  # noqa: BLE001 - the prediction is advisory
        return plan.model_copy(update={"performance": {"status": "not predicted",
                                                       "reason": f"{type(exc).__name__}: {exc}"[:300]}})


def calibration_file(spec: RunSpec) -> Path | None:
    """The calibration file ``hardware.calibration`` names (relative paths from the working directory), ``None``
    when it names none (the packaged file is used).

    Raises:
        ConfigError: the file does not exist, or is not a calibration (a mapping with ``constants``).
    """
    if not spec.hardware.calibration:
        return None
    path = Path(spec.hardware.calibration).expanduser().resolve()
    fix = "give a file written by python -m ascendflow.perfmodel.fit --out, or hardware.calibration=null"
    if not path.is_file():
        raise ConfigError("hardware.calibration", spec.hardware.calibration, f"file not found; {fix}")
    try:
        load_calibration(spec.hardware.name, path)
    except Exception as exc:  # YAML error, or not a mapping with constants
        raise ConfigError("hardware.calibration", spec.hardware.calibration,
                          f"is not a calibration file ({str(exc).splitlines()[0][:120]}); {fix}") from None
    return path


def _attach(plan: Plan, spec: RunSpec, model_path: str | None, root: Path, tables_dir: Path) -> Plan:
    data = json.loads(plan.to_json())
    shapes = layer_shapes(data["model"]["architecture"], int(data["engine_args"].get("tensor_parallel_size") or 1))
    table = find_table(spec.hardware.name, spec.hardware.software, shapes, tables_dir)
    lengths = chat_lengths(spec, model_path) if spec.workload.dataset == "chat" else None
    slo = spec.slo if spec.slo is not None and spec.slo.targets else None
    calibrated = platform_for(spec.hardware.kind).step_calibration
    calibration = (load_calibration(spec.hardware.name, calibration_file(spec))
                   if table is None and calibrated else None)
    perf = predict(data, spec.hardware.model_dump(), spec.workload, slo, table, lengths,
                   measured_error(root) if table is not None else None, calibration=calibration,
                   quantization=spec.quantization.model_dump())
    if data.get("roles"):
        perf = {**perf, "pd_ratio": _pd_ratio(data, spec, calibration if calibration is not None else
                                              (load_calibration(spec.hardware.name, calibration_file(spec))
                                               if calibrated else None))}
    return plan.model_copy(update={"performance": perf})


def _pd_ratio(data: dict[str, Any], spec: RunSpec, calibration: dict[str, Any] | None) -> dict[str, Any]:
    """The P:D recommendation (:func:`~ascendflow.perfmodel.pd_ratio.pd_ratio`) of a PD plan; a failure is recorded
    as ``not estimated``, never raised (advisory, like the rest of the section)."""
    measured = {r: getattr(spec.pd, r).measured_capacity_rps for r in ("prefill", "decode")}
    try:
        return pd_ratio(data, spec.hardware.model_dump(), spec.workload, spec.slo, calibration,
                        spec.quantization.model_dump(), measured=measured)
    except Exception as exc:  # noqa: BLE001 - the recommendation is advisory
        return {"status": "not estimated", "reason": f"{type(exc).__name__}: {exc}"[:300]}
