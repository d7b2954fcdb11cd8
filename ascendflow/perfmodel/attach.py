"""The app's side of the performance model (I/O): find the op table, measure the chat prompts' token lengths,
call the pure :func:`~ascendflow.perfmodel.predict.predict` and attach its result to the plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ascendflow.compiler import Plan
from ascendflow.perfmodel.predict import MEASURED_ERROR, predict
from ascendflow.perfmodel.shapes import layer_shapes
from ascendflow.perfmodel.table import TABLES_DIR, find_table
from ascendflow.schema.spec import RunSpec

#: The accuracy benchmark's results (``benchmarks/perf_model_accuracy.py``), quoted as the table model's error.
ACCURACY = Path("outputs") / "bench" / "perf_model_accuracy.json"


def chat_lengths(spec: RunSpec, model_path: str | None) -> list[tuple[int, int]] | None:
    """``(prompt tokens with the chat template, output_tokens)`` per chat request, in send order; ``None`` when
    the tokenizer cannot be read (no local model directory)."""
    from ascendflow.runner.workload import chat_requests

    if not model_path or not Path(model_path).is_dir():
        return None
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(model_path)
        lengths = []
        for r in chat_requests(spec.workload):
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
    of the model is recorded there (``status: not predicted``) and never stops the run."""
    try:
        return _attach(plan, spec, model_path, root, tables_dir)
    except Exception as exc:  # noqa: BLE001 - the prediction is advisory
        return plan.model_copy(update={"performance": {"status": "not predicted",
                                                       "reason": f"{type(exc).__name__}: {exc}"[:300]}})


def _attach(plan: Plan, spec: RunSpec, model_path: str | None, root: Path, tables_dir: Path) -> Plan:
    data = json.loads(plan.to_json())
    shapes = layer_shapes(data["model"]["architecture"], int(data["engine_args"].get("tensor_parallel_size") or 1))
    table = find_table(spec.hardware.name, spec.hardware.software, shapes, tables_dir)
    lengths = chat_lengths(spec, model_path) if spec.workload.dataset == "chat" else None
    slo = spec.slo if spec.slo is not None and spec.slo.targets else None
    perf = predict(data, spec.hardware.model_dump(), spec.workload, slo, table, lengths,
                   measured_error(root) if table is not None else None)
    return plan.model_copy(update={"performance": perf})
