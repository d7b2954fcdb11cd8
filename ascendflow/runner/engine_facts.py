"""Facts read from a whole engine log (any vLLM 0.11 … 0.32 / vllm-ascend v0.11.0rc0 … v0.25.1rc1 release), per rank.

Formats: :data:`ascendflow.runner.log_formats.LOG_FORMATS`. Multi-process engines prefix each line with the process
(``(EngineCore_DP0 pid=7)``, ``(Worker_DP0_TP1_EP1 pid=9)``); values are kept per process ("rank") and reduced the way
the engine does: the KV cache takes the **minimum** over workers (``kv_cache_utils.py get_kv_cache_configs`` "Change
the num_blocks of each worker to the smallest among all workers"), the memory used by weights, activation, non-torch
allocations and graphs is reported at the **largest** rank (the bottleneck device).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ascendflow.runner.log_formats import DEPLOYMENT_FIELDS, INT_FACTS, LOG_FORMATS, RANK_INDEX, TEXT_FACTS

GIB = 1 << 30
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: ``(EngineCore_DP0 pid=107915) INFO ...``, ``(Worker_TP1_EP1 pid=315)``, ``(VllmWorker rank=0 pid=105)``, Ray's
#: ``(RayWorkerWrapper pid=1, ip=…)``: the process name without its pid is the rank.
_RANK = re.compile(r"^\((?P<rank>[A-Za-z][^()]*?)(?:,? pid=\d+[^()]*)?\)\s")
MAIN = "main"

#: Log items in bytes and where each comes from, best first: ``(format id, group, scale to bytes)``.
#: Exact byte counts first, then 4-decimal GiB lines, then 2-decimal ones.
BYTE_ITEMS: dict[str, tuple[tuple[str, str, int], ...]] = {
    "weights_bytes": (("vllm_model_loading", "weights_gib", GIB), ("ascend_loading_weights", "weights_gib", GIB),
                      ("ascend_memory_breakdown", "weights_gib", GIB), ("vllm_memory_breakdown", "weights_gib", GIB),
                      ("memory_profiling_result", "weights_gib", GIB)),
    "activation_bytes": (("ascend_memory_breakdown", "activation_gib", GIB),
                         ("vllm_memory_breakdown", "activation_gib", GIB),
                         ("memory_profiling_result", "activation_gib", GIB)),
    "non_torch_bytes": (("ascend_memory_breakdown", "non_torch_gib", GIB),
                        ("vllm_memory_breakdown", "non_torch_gib", GIB),
                        ("memory_profiling_result", "non_torch_gib", GIB)),
    "graph_bytes": (("graph_capturing", "graph_gib", GIB), ("ascend_memory_breakdown", "graph_gib", GIB),
                    ("vllm_memory_breakdown", "graph_gib", GIB), ("graph_pool_memory", "graph_gib", GIB)),
    "graph_estimate_bytes": (("graph_memory_estimate", "graph_estimate_gib", GIB),
                             ("graph_pool_memory", "graph_estimate_gib", GIB)),
    "kv_cache_bytes": (("ascend_available_memory_bytes", "kv_cache_bytes", 1),
                       ("available_kv_cache_memory", "kv_cache_gib", GIB),
                       ("kv_cache_memory_fast_path", "kv_cache_gib", GIB), ("cpu_kv_cache_set", "kv_cache_gib", GIB),
                       ("ascend_memory_breakdown", "kv_cache_gib", GIB),
                       ("vllm_memory_breakdown", "kv_cache_gib", GIB)),
    "device_total_bytes": (("ascend_available_memory_bytes", "device_total_bytes", 1),
                           ("ascend_memory_breakdown", "device_total_gib", GIB),
                           ("vllm_memory_breakdown", "device_total_gib", GIB),
                           ("cpu_kv_cache_set", "device_total_gib", GIB)),
    "requested_bytes": (("ascend_memory_breakdown", "requested_gib", GIB),
                        ("vllm_memory_breakdown", "requested_gib", GIB), ("cpu_kv_cache_set", "requested_gib", GIB)),
}
#: Other numeric items (unit as logged): ``item → ((format id, group), ...)``.
PLAIN_ITEMS: dict[str, tuple[tuple[str, str], ...]] = {
    "kv_cache_tokens": (("kv_capacity_one_line", "kv_cache_tokens"), ("kv_tokens", "kv_cache_tokens")),
    "max_concurrency": (("kv_capacity_one_line", "max_concurrency"), ("max_concurrency", "max_concurrency")),
    "max_model_len": (("kv_capacity_one_line", "max_model_len"), ("max_concurrency", "max_model_len")),
    "num_blocks": (("num_gpu_blocks_override", "num_blocks"),),
    "load_s": (("vllm_model_loading", "load_s"),),
    "graph_capture_s": (("graph_capturing", "graph_capture_s"),),
    "gpu_memory_utilization": (("graph_memory_profiling_equivalent", "gpu_memory_utilization"),
                               ("cuda_graph_memory_profiling_equivalent", "gpu_memory_utilization"),
                               ("ascend_memory_breakdown", "gpu_memory_utilization"),
                               ("vllm_memory_breakdown", "gpu_memory_utilization")),
    "equivalent_gpu_memory_utilization": (
        ("graph_memory_profiling_equivalent", "equivalent_gpu_memory_utilization"),
        ("cuda_graph_memory_profiling_equivalent", "equivalent_gpu_memory_utilization")),
    "capture_sizes_before": (("aclgraph_sizes_adjusted", "capture_sizes_before"),),
    "capture_sizes_after": (("aclgraph_sizes_adjusted", "capture_sizes_after"),),
}
#: Items the engine takes the minimum of over workers; all other per-rank items report the maximum.
MIN_ITEMS = {"kv_cache_bytes", "kv_cache_tokens", "max_concurrency", "num_blocks"}


@dataclass
class LogItem:
    """One item read from the log.

    Attributes:
        value: the engine's value (minimum or maximum over ranks, see the module docstring); bytes for ``*_bytes``.
        per_rank: the value of each process prefix (``main`` for unprefixed lines), last line wins per rank.
        all_values: every value in log order (DP engines print one KV line per worker).
        format: the :class:`~ascendflow.runner.log_formats.LogFormat` id it came from.
        resolution: half the last printed digit, in the item's unit (0 for exact integers).
        logged: ``value`` as the line printed it (e.g. ``7.63`` for "7.63 GiB").
        logged_unit: the unit printed (``GiB``, ``B`` or empty).
    """

    value: float
    per_rank: dict[str, float]
    all_values: list[float]
    format: str
    resolution: float
    logged: float
    logged_unit: str


@dataclass
class EngineLogFacts:
    """Everything recognised in an engine log."""

    items: dict[str, LogItem] = field(default_factory=dict)
    text: dict[str, str] = field(default_factory=dict)
    capture_sizes: list[int] | None = None
    capture_sizes_format: str | None = None
    capture_cases: list[dict[str, Any]] = field(default_factory=list)
    formats_seen: list[str] = field(default_factory=list)
    #: The engine-config line's deployment fields (:data:`~ascendflow.runner.log_formats.DEPLOYMENT_FIELDS`): text for
    #: ``model``/``served_model_name``, int for the sizes and ``max_model_len``; first line wins.
    deployment: dict[str, Any] = field(default_factory=dict)
    #: Smallest parallel size each process prefix implies: ``{"data_parallel_size": 2}`` after ``EngineCore_DP1``.
    min_sizes: dict[str, int] = field(default_factory=dict)

    def value(self, item: str) -> float | None:
        """The item's value, or ``None`` when the log does not have it."""
        return self.items[item].value if item in self.items else None

    def to_json(self) -> dict[str, Any]:
        """Plain-data form for ``calibration.json``."""
        return {"items": {k: vars(v) for k, v in self.items.items()}, "text": self.text,
                "capture_sizes": self.capture_sizes, "capture_sizes_format": self.capture_sizes_format,
                "capture_cases": self.capture_cases, "formats_seen": self.formats_seen,
                "deployment": self.deployment, "min_sizes": self.min_sizes}


def _resolution(raw: str, scale: int) -> float:
    """Half the last printed digit. GiB values have at least two decimals: vLLM's ``format_gib`` is
    ``str(round(b / GiB, 2))``, which drops trailing zeros ("1.1" is 1.10 ± 0.005)."""
    decimals = len(raw.split(".")[1]) if "." in raw else 0
    if scale == GIB:
        decimals = max(decimals, 2)
    return 0.0 if decimals == 0 else 0.5 * 10 ** -decimals * scale


def _matches(text: str) -> list[tuple[str, str, dict[str, str]]]:
    """``(format id, rank, groups)`` for every recognised line, in log order."""
    found = []
    for raw in text.splitlines():
        line = _ANSI.sub("", raw)
        m = _RANK.match(line)
        rank = m.group("rank") if m else MAIN
        for fmt in LOG_FORMATS:
            if fmt.needle in line and (hit := fmt.pattern.search(line)):
                found.append((fmt.id, rank, {k: v for k, v in hit.groupdict().items() if v is not None}))
                break
    return found


_SIZE_NAMES = {"DP": "data_parallel_size", "TP": "tensor_parallel_size", "PP": "pipeline_parallel_size"}


def _deployment(text: str, facts: EngineLogFacts) -> None:
    """Fill ``facts.deployment`` from the first engine-config line and ``facts.min_sizes`` from every rank prefix."""
    for raw in text.splitlines():
        line = _ANSI.sub("", raw)
        if (m := _RANK.match(line)) is not None:
            for hit in RANK_INDEX.finditer(m.group("rank")):
                name = _SIZE_NAMES[hit.group("dim")]
                facts.min_sizes[name] = max(facts.min_sizes.get(name, 1), int(hit.group("index")) + 1)
        if not facts.deployment and "with config: model=" in line:
            for name, pattern in DEPLOYMENT_FIELDS.items():
                if (hit := pattern.search(line)) is not None:
                    value = hit.group("v")
                    facts.deployment[name] = int(value) if value.isdigit() and name not in (
                        "model", "served_model_name") else value


def _number(raw: str, scale: int, whole: bool) -> float:
    value = float(raw.replace(",", "")) * scale
    return int(round(value)) if whole else value


def _sizes(raw: str) -> list[int]:
    return sorted({int(x) for x in raw.replace(",", " ").split()})


def parse_engine_facts(text: str) -> EngineLogFacts:
    """Read every recognised start-up line of an engine log.

    Args:
        text: the engine's log (stdout and stderr of ``vllm serve`` or of the offline engine).

    Returns:
        The facts; ``items`` is empty and ``formats_seen`` too when no line is recognised.
    """
    matches = _matches(text)
    facts = EngineLogFacts(formats_seen=sorted({fid for fid, _, _ in matches}))
    _deployment(text, facts)
    by_format: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for fid, rank, groups in matches:
        by_format.setdefault(fid, []).append((rank, groups))
    sources = {**BYTE_ITEMS, **{k: tuple((f, g, 1) for f, g in v) for k, v in PLAIN_ITEMS.items()}}
    for item, options in sources.items():
        for fid, group, scale in options:
            hits = [(rank, groups[group]) for rank, groups in by_format.get(fid, []) if group in groups]
            if not hits:
                continue
            whole = item.endswith("_bytes") or group in INT_FACTS
            values = [_number(raw, scale, whole) for _, raw in hits]
            per_rank = {rank: _number(raw, scale, whole) for rank, raw in hits}
            pick = min if item in MIN_ITEMS else max
            at = values.index(pick(values))
            resolution = max(_resolution(raw, scale) for _, raw in hits)
            logged = _number(hits[at][1], 1, whole and scale == 1)
            unit = "GiB" if scale == GIB else "B" if item.endswith("_bytes") else ""
            facts.items[item] = LogItem(values[at], per_rank, values, fid, resolution, logged, unit)
            break
    for fid, hits in by_format.items():
        for _, groups in hits:
            for name in TEXT_FACTS & groups.keys():
                facts.text.setdefault(name, groups[name])
    for _, groups in by_format.get("ascend_capture_cases", []):
        facts.capture_cases.append({"sizes": _sizes(groups["capture_cases"]), "mode": groups["capture_mode"],
                                    "uniform_decode": groups["uniform_decode"] == "True"})
    if facts.capture_cases:
        facts.capture_sizes = sorted({s for case in facts.capture_cases for s in case["sizes"]})
        facts.capture_sizes_format = "ascend_capture_cases"
    elif by_format.get("engine_config"):
        facts.capture_sizes = _sizes(by_format["engine_config"][-1][1]["capture_sizes"])
        facts.capture_sizes_format = "engine_config"
    return facts

