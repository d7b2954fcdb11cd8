"""Plan beside log: each item's planned and logged value, the error, and whether the plan called it exact.

Pure (no I/O): a ``plan.json`` as a dict (``shared/DESIGN.md`` §3) and :class:`EngineLogFacts` in, rows out.
``error = plan − log`` and ``error_pct = 100 · (plan − log) / log``: positive means the plan is too high. A difference
within the log's printed precision (``%.2f`` GiB is ± 0.005 GiB) counts as a match.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from ascendflow.runner.engine_facts import EngineLogFacts

#: ``(item, plan field, log item, kind)``; the item name is the metric name (``calib.<item>.log``). Kinds: ``bytes``
#: (shown in GiB), ``count``, ``ratio``. ``graph_estimate_bytes`` is the engine's own pre-capture estimate
#: (ACL/CUDA graph memory profiling), set beside the plan's graph memory.
ITEMS: tuple[tuple[str, str, str, str], ...] = (
    ("weights_bytes", "memory.weights_bytes", "weights_bytes", "bytes"),
    ("activation_bytes", "memory.activation_bytes", "activation_bytes", "bytes"),
    ("non_torch_bytes", "memory.non_torch_bytes", "non_torch_bytes", "bytes"),
    ("graph_bytes", "memory.graph_bytes", "graph_bytes", "bytes"),
    ("graph_estimate_bytes", "memory.graph_bytes", "graph_estimate_bytes", "bytes"),
    ("kv_cache_bytes", "memory.kv_cache_bytes", "kv_cache_bytes", "bytes"),
    ("requested_bytes", "memory.requested_bytes", "requested_bytes", "bytes"),
    ("device_total_bytes", "memory.device_total_bytes", "device_total_bytes", "bytes"),
    ("kv_cache_tokens", "kv_cache.tokens", "kv_cache_tokens", "count"),
    ("max_concurrency", "kv_cache.max_concurrency", "max_concurrency", "ratio"),
    ("num_blocks", "kv_cache.num_blocks", "num_blocks", "count"),
    ("max_model_len", "engine_args.max_model_len", "max_model_len", "count"),
    ("gpu_memory_utilization", "engine_args.gpu_memory_utilization", "gpu_memory_utilization", "ratio"),
)
#: vLLM release from which the logged token count is ``int(concurrency × max_model_len)`` instead of
#: ``num_blocks // groups × block_size`` (vllm/v1/core/kv_cache_utils.py, read in the 0.19.1 and 0.20.2 wheels).
TOKENS_FROM_CONCURRENCY = (0, 20)


@dataclass
class Row:
    """One compared item.

    Attributes:
        item: metric name.
        plan_field: the plan.json field (dotted).
        kind: ``bytes``, ``count`` or ``ratio``.
        plan: the plan's value (``None`` when the plan has no such field or there is no plan).
        log: the log's value (``None`` when no line gives it).
        error: ``plan − log``.
        error_pct: ``100 · error / log``.
        match: ``|error|`` is within the log's printed precision.
        label: how the plan labels the field: ``exact``, ``estimate`` or ``unlabelled`` (no ``estimates`` section).
        source: the log format it came from (``derived`` when computed from other logged values).
        per_rank: the logged value of each process, when the log has several.
    """

    item: str
    plan_field: str
    kind: str
    plan: float | None
    log: float | None
    error: float | None
    error_pct: float | None
    match: bool | None
    label: str
    source: str | None
    per_rank: dict[str, float]


@dataclass
class Calibration:
    """The whole comparison: rows, the capture-size lists, the log facts and the plan's own estimate notes."""

    plan_hash: str | None
    rows: list[Row]
    capture_sizes: dict[str, Any]
    log_facts: dict[str, Any]
    plan_estimates: Any = None

    def to_json(self) -> dict[str, Any]:
        """Plain data for ``calibration.json``."""
        return {"plan_hash": self.plan_hash, "rows": [asdict(r) for r in self.rows],
                "capture_sizes": self.capture_sizes, "plan_estimates": self.plan_estimates,
                "log_facts": self.log_facts}

    def metrics(self) -> dict[str, float]:
        """``calib.<item>.log``, ``.plan``, ``.error_pct`` for every item with a value; capture sizes as counts, plus
        ``calib.capture_sizes.equal`` (1 or 0)."""
        out: dict[str, float] = {}
        for row in self.rows:
            for key, value in (("log", row.log), ("plan", row.plan), ("error_pct", row.error_pct)):
                if value is not None:
                    out[f"calib.{row.item}.{key}"] = float(value)
        cap = self.capture_sizes
        for key in ("log", "plan"):
            if cap.get(key) is not None:
                out[f"calib.capture_sizes.{key}"] = float(len(cap[key]))
        if cap.get("equal") is not None:
            out["calib.capture_sizes.equal"] = float(cap["equal"])
        return out


def plan_value(plan: Mapping[str, Any] | None, dotted: str) -> Any:
    """The plan's value at a dotted path, or ``None``."""
    node: Any = plan
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def estimate_label(plan: Mapping[str, Any] | None, dotted: str) -> str:
    """``estimate`` when the plan's ``estimates`` section names the field (by dotted path or leaf name; a dict keyed
    by field, a list of names, or a list of ``{"field": ...}``), ``exact`` when the section exists but does not,
    ``unlabelled`` when the plan has no such section."""
    estimates = plan.get("estimates") if isinstance(plan, Mapping) else None
    if estimates is None:
        return "unlabelled"
    names: set[str] = set()
    if isinstance(estimates, Mapping):
        names = {str(k) for k in estimates}
    elif isinstance(estimates, list):
        for entry in estimates:
            if isinstance(entry, Mapping):
                names.update(str(entry[k]) for k in ("field", "item", "name") if k in entry)
            else:
                names.add(str(entry))
    leaf = dotted.rsplit(".", 1)[-1]
    return "estimate" if dotted in names or leaf in names else "exact"


def _version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    parts = []
    for piece in str(text).lstrip("v").split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or None


def derived_num_blocks(tokens: int, block_size: int, max_model_len: int, vllm: tuple[int, ...] | None) -> int | None:
    """KV blocks from the logged token count (one KV group, no context parallelism).

    vLLM < 0.20 logs ``num_blocks // groups × block_size`` → ``tokens // block_size``; from 0.20 ``int(num_blocks /
    ceil(max_model_len / block_size) × max_model_len)``, whose inverse is the single integer
    ``ceil(tokens × ceil(max_model_len / block_size) / max_model_len)``. ``None`` when the vLLM release is unknown.
    """
    if vllm is None or block_size <= 0 or max_model_len <= 0:
        return None
    if vllm < TOKENS_FROM_CONCURRENCY:
        return tokens // block_size
    per_request = -(-max_model_len // block_size)
    return -(-tokens * per_request // max_model_len)


def _row(item: str, field: str, kind: str, plan: Mapping[str, Any] | None, log: float | None, resolution: float,
         source: str | None, per_rank: dict[str, float]) -> Row:
    planned = plan_value(plan, field)
    planned = float(planned) if isinstance(planned, (int, float)) and not isinstance(planned, bool) else None
    error = error_pct = match = None
    if planned is not None and log is not None:
        error = planned - log
        error_pct = 100.0 * error / log if log else (0.0 if error == 0 else None)
        match = abs(error) <= resolution + 1e-9 * max(abs(log), 1.0)
    if planned is not None and kind in ("bytes", "count"):
        planned = int(planned)
    return Row(item, field, kind, planned, log, error, error_pct, match, estimate_label(plan, field), source,
               per_rank if len(per_rank) > 1 else {})


def calibrate(plan: Mapping[str, Any] | None, facts: EngineLogFacts) -> Calibration:
    """Compare a plan with an engine log.

    Args:
        plan: the parsed ``plan.json`` (``None``: the log alone is reported).
        facts: :func:`ascendflow.runner.engine_facts.parse_engine_facts` of the log.

    Returns:
        One row per item the log or the plan has, and the capture sizes as whole lists (``equal``,
        ``only_in_plan``, ``only_in_log``).
    """
    rows = []
    for item, field, log_item, kind in ITEMS:
        logged = facts.items.get(log_item)
        value, resolution, source, per_rank = None, 0.0, None, {}
        if logged is not None:
            value, resolution, source, per_rank = logged.value, logged.resolution, logged.format, logged.per_rank
        elif item == "num_blocks" and "kv_cache_tokens" in facts.items:
            mml = facts.value("max_model_len") or plan_value(plan, "engine_args.max_model_len")
            block = plan_value(plan, "kv_cache.block_size")
            vllm = _version(facts.text.get("vllm_version")) or _version(plan_value(plan, "target.engine.vllm"))
            if mml and block:
                value = derived_num_blocks(int(facts.value("kv_cache_tokens")), int(block), int(mml), vllm)
                source = "derived" if value is not None else None
        if value is None and plan_value(plan, field) is None:
            continue
        if value is None and item == "graph_estimate_bytes":
            continue  # the engine profiles graph memory only at some releases; the graph row covers the plan value
        rows.append(_row(item, field, kind, plan, value, resolution, source, per_rank))
    planned = plan_value(plan, "graph.capture_sizes")
    planned = sorted(int(s) for s in planned) if isinstance(planned, list) else None
    logged_sizes = facts.capture_sizes
    capture: dict[str, Any] = {"plan": planned, "log": logged_sizes, "source": facts.capture_sizes_format,
                               "label": estimate_label(plan, "graph.capture_sizes"), "equal": None,
                               "only_in_plan": None, "only_in_log": None}
    if planned is not None and logged_sizes is not None:
        capture.update(equal=planned == logged_sizes, only_in_plan=sorted(set(planned) - set(logged_sizes)),
                       only_in_log=sorted(set(logged_sizes) - set(planned)))
    plan_hash = plan_value(plan, "plan_hash")
    return Calibration(plan_hash if isinstance(plan_hash, str) else None, rows, capture, facts.to_json(),
                       plan_value(plan, "estimates"))
