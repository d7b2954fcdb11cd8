"""``run.mode=attach``'s check that the deployment runs the plan's KV cache knobs: the plan's engine arguments
against the server's ``vllm:cache_config_info`` gauge on ``/metrics``.

vLLM 0.32.0 publishes one config gauge only: ``vllm/v1/metrics/loggers.py`` ``PrometheusStatLogger.log_metrics_info``
writes ``vllm:cache_config_info`` (value 1) whose labels are every field of the engine's ``CacheConfig`` as ``str()``
(``vllm/config/cache.py`` ``CacheConfig.metrics_info``: ``block_size``, ``gpu_memory_utilization``,
``kv_cache_memory_bytes``, ``cache_dtype``, ``enable_prefix_caching``, ``num_gpu_blocks``, ...) plus ``engine``.
No scheduler or parallel config gauge exists, so ``max_num_seqs`` and the parallel sizes cannot be compared.

The knobs are compared exactly (they are the deployment's arguments); the KV token count (``num_gpu_blocks`` x
``block_size``) is not: it differs from the plan's prediction by the memory model's error, which
``python -m ascendflow.calibrate`` measures from the engine's log (docs/attach.md).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

from ascendflow.schema.errors import ConfigError

#: ``(plan key, engine_args name, cache_config_info label)`` compared when the plan sets the argument.
KNOBS = (
    ("engine.block_size", "block_size", "block_size"),
    ("engine.kv_cache_memory_bytes", "kv_cache_memory_bytes", "kv_cache_memory_bytes"),
    ("engine.enable_prefix_caching", "enable_prefix_caching", "enable_prefix_caching"),
    ("quantization.kv_cache_dtype", "kv_cache_dtype", "cache_dtype"),
)


def cache_config_labels(text: str) -> dict[str, str] | None:
    """The labels of the first ``vllm:cache_config_info`` sample in a ``/metrics`` text (engine 0's; every engine of
    a deployment has the same ``CacheConfig``), ``None`` when the text has none (not vLLM, or an older one)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "vllm:cache_config_info":
                return dict(sample.labels)
    return None


def _same(planned: Any, served: str) -> bool:
    """``planned`` (an engine argument) equals ``served`` (its ``str()`` in a label), numbers compared as numbers."""
    if isinstance(planned, bool):
        return str(planned) == served
    if isinstance(planned, (int, float)):
        try:
            return float(planned) == float(served)
        except ValueError:
            return False
    return str(planned) == served


def _fix_value(served: str) -> str:
    """The label's value as a Hydra override writes it (``True`` -> ``true``; ``4000000000.0`` -> ``4000000000``)."""
    if served in ("True", "False"):
        return served.lower()
    try:
        number = float(served)
    except ValueError:
        return served
    return str(int(number)) if number.is_integer() else served


def mismatches(engine_args: dict[str, Any], labels: dict[str, str]) -> list[tuple[str, Any, str]]:
    """``(plan key, plan value, server value)`` for each KV cache knob the plan sets and the server runs otherwise.

    ``engine_args`` are the plan's (``plan.engine_args``); ``labels`` those of ``vllm:cache_config_info``
    (:func:`cache_config_labels`). ``gpu_memory_utilization`` (a fraction) is compared only when the plan sets no
    ``kv_cache_memory_bytes`` (bytes), which vLLM then sizes the cache by instead (``vllm/config/cache.py``
    ``CacheConfig.kv_cache_memory_bytes``). A label the server does not publish is not compared.
    """
    knobs = list(KNOBS)
    if engine_args.get("kv_cache_memory_bytes") is None:
        knobs.append(("engine.gpu_memory_utilization", "gpu_memory_utilization", "gpu_memory_utilization"))
    found = []
    for key, arg, label in knobs:
        planned = engine_args.get(arg)
        if planned is None or label not in labels:
            continue
        if not _same(planned, labels[label]):
            found.append((key, planned, labels[label]))
    return found


def mismatch_line(url: str, found: list[tuple[str, Any, str]]) -> str:
    """One line for :class:`ConfigError`: each knob's server value and the overrides that would match the server."""
    served = ", ".join(f"{key.split('.')[-1]} {value}" for key, _, value in found)
    fix = " ".join(f"{key}={_fix_value(value)}" for key, _, value in found)
    return (f"the server at {url} runs {served} (its /metrics vllm:cache_config_info); attach to the deployment this "
            f"plan describes, or set {fix} (or run.attach_allow_mismatch=true to record it tagged)")


def served_cache_config(url: str, api_key: str | None) -> dict[str, str] | None:
    """``vllm:cache_config_info``'s labels from ``GET <url>/metrics``; ``None`` when ``/metrics`` does not answer
    or has no such gauge (nothing to compare)."""
    request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            text = resp.read().decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError):
        return None
    return cache_config_labels(text)


def check_cache_config(url: str, engine_args: dict[str, Any], labels: dict[str, str] | None,
                       allow: bool) -> list[str]:
    """The knobs that differ, as ``key=planned`` (for the ``ascendflow.attach_mismatch`` tag); ``[]`` when none.

    Raises:
        ConfigError: some differ and ``allow`` (``run.attach_allow_mismatch``) is false; named by the first key.
    """
    found = mismatches(engine_args, labels or {})
    if found and not allow:
        key, planned, _ = found[0]
        raise ConfigError(key, planned, mismatch_line(url, found))
    return [f"{key}={planned}" for key, planned, _ in found]
