"""Facts parsed from the engine's log: the KV capacity vLLM reports, model load size and time."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ascendflow.runner.engine_facts import parse_engine_facts

#: Formats of the model-loading line that :func:`parse_engine_log` reports as ``model_load_gib`` (see log_formats).
_LOAD_FORMATS = ("vllm_model_loading", "ascend_loading_weights")


def parse_engine_log(text: str) -> dict[str, Any]:
    """Extract the facts vLLM logs at start-up (every format of :mod:`ascendflow.runner.log_formats`).

    Returns:
        ``reported_kv_cache_tokens`` (int), ``reported_max_concurrency`` (float, requests of ``max_model_len``),
        ``reported_max_model_len`` (int), ``kv_cache_pool`` (``CPU``/``GPU``/``NPU``), ``model_load_gib`` and
        ``model_load_s`` — each only when its line is present. Several KV lines (one per worker before vLLM takes
        the minimum) report the minimum, as the engine does.
    """
    items = parse_engine_facts(text)
    facts: dict[str, Any] = {}
    if (tokens := items.items.get("kv_cache_tokens")) is not None:
        facts.update(kv_cache_pool=items.text.get("kv_cache_pool"), reported_kv_cache_tokens=int(tokens.value))
    if (concurrency := items.items.get("max_concurrency")) is not None:
        facts.update(reported_max_model_len=int(items.items["max_model_len"].value),
                     reported_max_concurrency=concurrency.value)
    if (weights := items.items.get("weights_bytes")) is not None and weights.format in _LOAD_FORMATS:
        facts["model_load_gib"] = weights.logged
    if (load := items.items.get("load_s")) is not None:
        facts["model_load_s"] = load.value
    return facts


def parse_engine_log_file(path: Path) -> dict[str, Any]:
    """:func:`parse_engine_log` on a file (empty dict when it does not exist)."""
    return parse_engine_log(path.read_text(errors="replace")) if path.exists() else {}


#: Exception lines in a log: ``ValueError: ...`` (with an optional ``(Worker pid=N) ERROR ... [file:line]`` prefix).
_EXCEPTION = re.compile(r"\b((?:[A-Z]\w*)?(?:Error|Exception)): (.+)$")
#: Wrapper errors that only point back at the real cause.
_GENERIC = ("Engine core initialization failed", "Worker failed with error", "please check the stack trace")


def failure_cause(text: str) -> str | None:
    """The first specific exception in an engine log (``ValueError: Available memory on node 0 ...``), skipping vLLM's
    wrappers ("Engine core initialization failed"...); ``None`` when there is none."""
    for line in text.splitlines():
        m = _EXCEPTION.search(line)
        if m and not any(g in m.group(2) for g in _GENERIC):
            return f"{m.group(1)}: {m.group(2).strip()}"
    for line in reversed(text.splitlines()):
        if "Address already in use" in line or "OSError" in line:
            return line.strip()
    return None


def log_tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file, for error messages."""
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
