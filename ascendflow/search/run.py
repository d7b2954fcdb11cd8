"""The search, end to end and without I/O of its own: enumerate (:mod:`.space`), compile and price
(:mod:`.evaluate`), rank (:mod:`.rank`). :func:`search` returns every candidate's row; the mode writes them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ascendflow.compiler import Plan
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.spec import RunSpec
from ascendflow.search.evaluate import Evaluator, Priced
from ascendflow.search.rank import margin_percent, nearest_slo, rank_rows
from ascendflow.search.space import (Candidate, Counts, Knobs, Layout, RoleConfig, colocated_layouts, knob_grid,
                                     pd_counts, role_configs)

#: Refusals that depend on the layout alone (weights per device, TP over heads): a layout refused for one of them
#: with its first knobs is refused with every knob combination, so the rest are counted without compiling.
LAYOUT_REASONS = ("weights do not fit", "layout does not divide the model",
                  "a DP rank spanning nodes takes data_parallel_size=1")


@dataclass
class SearchResult:
    """What a search found.

    Attributes:
        rows: one dict per candidate (``kind``, ``label``, ``status``: ``ranked`` / ``misses SLO`` / ``not predicted``
            / ``infeasible``, ``reason``, figures), ranked rows first, best first.
        ranked: the ranked rows, best first (``rank``, ``tie``).
        counts: the enumeration's tallies; ``nodes``, ``devices_per_node``: what was searched.
        seconds / cpu_seconds: wall and CPU time of the search (this process); ``compiles``, ``priced``: compiler calls and capacity searches run.
        specs / plans: the run spec and compiled plan of each feasible candidate, by row ``id``.
    """

    rows: list[dict[str, Any]]
    ranked: list[dict[str, Any]]
    counts: Counts
    nodes: int
    devices_per_node: int
    seconds: float
    cpu_seconds: float
    compiles: int
    priced: int
    specs: dict[int, RunSpec] = field(default_factory=dict)
    plans: dict[int, Plan] = field(default_factory=dict)
    nearest: dict[str, float] = field(default_factory=dict)


def _is_moe(arch: Any) -> bool:
    a = arch.model_dump() if hasattr(arch, "model_dump") else dict(arch)
    return bool(a.get("n_routed_experts") or a.get("num_experts"))


def _figures(row: dict[str, Any], priced_at: Mapping[str, float], targets: Mapping[str, float]) -> None:
    row["p99_ttft_ms"] = priced_at.get("p99_ttft_ms")
    row["p99_tpot_ms"] = priced_at.get("p99_tpot_ms")
    tpot = priced_at.get("median_tpot_ms") or 0.0
    row["tps_per_user"] = 1000.0 / tpot if tpot else 0.0
    row["margin_percent"] = margin_percent(row, targets)


def search(spec: RunSpec, evaluator: Evaluator, nodes: int,
           progress: Callable[[str], None] | None = None) -> SearchResult:
    """Enumerate, compile, price and rank the deployments of ``spec.search`` on ``nodes`` nodes.

    Raises:
        ConfigError: nothing to search (a grid left empty).
    """
    start, cpu = time.perf_counter(), time.process_time()
    s, hw, wl = spec.search, spec.hardware, spec.workload
    dpn = hw.devices_per_node
    targets = spec.slo.targets
    osl = wl.random_output_len
    counts = Counts()
    rows: list[dict[str, Any]] = []
    specs: dict[int, RunSpec] = {}
    plans: dict[int, Plan] = {}
    moe = _is_moe(evaluator.arch)
    knobs = knob_grid(s)
    if not knobs:
        raise ConfigError("search.graph_modes", list(s.graph_modes), "the knob grid is empty; give at least one graph "
                                                                     "mode, max_num_seqs and max_num_batched_tokens")
    total = nodes * dpn

    def add(row: dict[str, Any], priced: Priced | None, spec_of: RunSpec | None) -> None:
        row["id"] = len(rows)
        rows.append(row)
        if priced is not None and priced.plan is not None and spec_of is not None:
            specs[row["id"]] = spec_of
            plans[row["id"]] = priced.plan

    for quant in evaluator.quantizations:
        layouts = colocated_layouts(s, nodes, dpn, moe)
        for li, layout in enumerate(layouts):
            if progress:
                progress(f"co-located {quant}: layout {li + 1}/{len(layouts)} {layout.label()}")
            refused_layout: Priced | None = None
            for kn in knobs:
                counts.enumerated += 1
                replicas = nodes // layout.nodes
                cand = Candidate("colocated", quant, layout=layout, knobs=kn, replicas=replicas)
                row = _colocated_row(cand, dpn)
                if refused_layout is not None:
                    priced = refused_layout
                else:
                    priced = evaluator.colocated(quant, layout, kn)
                    if priced.reason in LAYOUT_REASONS:
                        refused_layout = priced
                _fill_colocated(row, priced, layout, replicas, total, osl, targets, counts)
                add(row, priced, evaluator.colocated_spec(quant, layout, kn) if priced.plan is not None else None)
        if s.pd and nodes >= 2:
            _search_pd(spec, evaluator, quant, nodes, dpn, moe, counts, rows, add, targets, osl, progress)
    ranked = rank_rows(rows)
    order = {r["id"]: i for i, r in enumerate(ranked)}
    rows.sort(key=lambda r: (order.get(r["id"], len(order)), r["status"] != "misses SLO", r["id"]))
    near = nearest_slo([r for r in rows if r["status"] == "misses SLO"], targets) if not ranked and targets else {}
    return SearchResult(rows=rows, ranked=ranked, counts=counts, nodes=nodes, devices_per_node=dpn,
                        seconds=time.perf_counter() - start, cpu_seconds=time.process_time() - cpu, compiles=evaluator.compiles, priced=evaluator.priced,
                        specs=specs, plans=plans, nearest=near)


def _colocated_row(c: Candidate, dpn: int) -> dict[str, Any]:
    lay, kn = c.layout, c.knobs
    assert lay and kn
    return {"kind": "colocated", "quantization": c.quantization, "label": c.label(),
            "layout": lay.label(), "nodes_per_instance": lay.nodes, "replicas": c.replicas,
            "devices": lay.nodes * dpn * c.replicas,
            "tensor_parallel_size": lay.tensor_parallel_size, "pipeline_parallel_size": lay.pipeline_parallel_size,
            "data_parallel_size": lay.data_parallel_size, "enable_expert_parallel": lay.enable_expert_parallel,
            "cudagraph_mode": kn.cudagraph_mode, "max_num_seqs": kn.max_num_seqs,
            "max_num_batched_tokens": kn.max_num_batched_tokens}


def _fill_colocated(row: dict[str, Any], priced: Priced, layout: Layout, replicas: int, total: int, osl: int,
                    targets: Mapping[str, float], counts: Counts) -> None:
    row["status"], row["reason"], row["error"], row["note"] = priced.status, priced.reason, priced.error, priced.note
    row["lowest"] = priced.lowest
    if priced.status == "infeasible":
        counts.refuse(priced.reason)
        return
    devices = layout.nodes * row["devices"] // max(layout.nodes * replicas, 1)  # one instance's devices
    row["capacity_rps"] = priced.rps * replicas
    row["rps_per_device"] = priced.rps / devices if devices else 0.0
    row["tps_per_device"] = priced.output_tps / devices if devices else 0.0
    row["kv_cache_tokens"] = priced.plan.kv_cache.tokens if priced.plan is not None else None
    _figures(row, priced.at, targets)


def _search_pd(spec: RunSpec, evaluator: Evaluator, quant: str, nodes: int, dpn: int, moe: bool, counts: Counts,
               rows: list, add: Callable, targets: Mapping[str, float], osl: int,
               progress: Callable[[str], None] | None) -> None:
    """PD candidates: each role config compiled and priced once (:meth:`Evaluator.role`), refused pairs counted by
    the first refused role's reason, dominated role configs pruned (``search.pd_role_keep``), the kept pairs crossed
    with every coprime P:D count that fits the nodes."""
    s = spec.search
    k = spec.engine.num_speculative_tokens or 0
    configs = role_configs(s, nodes, dpn, moe, k, prefill_seqs=spec.engine.max_num_seqs or 16)
    priced: dict[str, list[tuple[RoleConfig, Priced]]] = {}
    for role in ("prefill", "decode"):
        priced[role] = []
        for i, rc in enumerate(configs[role]):
            if progress:
                progress(f"PD {quant}: {role} config {i + 1}/{len(configs[role])} {rc.label()}")
            priced[role].append((rc, evaluator.role(quant, rc, s.pd_connector)))
    kept: dict[str, dict[int, set[RoleConfig]]] = {}
    for role, items in priced.items():
        by_nodes: dict[int, list[tuple[RoleConfig, Priced]]] = {}
        for rc, p in items:
            if p.status == "ranked":
                by_nodes.setdefault(rc.layout.nodes, []).append((rc, p))
        kept[role] = {n: {rc for rc, _ in sorted(v, key=lambda x: (-x[1].rps, x[0].label()))[:s.pd_role_keep]}
                      for n, v in by_nodes.items()}
    for prc, pp in priced["prefill"]:
        for drc, dp in priced["decode"]:
            combos = pd_counts(nodes, prc.layout.nodes, drc.layout.nodes)
            if not combos:
                continue
            counts.enumerated += len(combos)
            bad = pp if pp.status == "infeasible" else dp if dp.status == "infeasible" else None
            if bad is not None:
                counts.refuse(bad.reason, len(combos))
                continue
            if pp.status != "ranked" or dp.status != "ranked":
                counts.prune("PD role misses its SLO target at any rate or is not predicted", len(combos))
                continue
            if prc not in kept["prefill"].get(prc.layout.nodes, ()) or drc not in kept["decode"].get(
                    drc.layout.nodes, ()):
                counts.prune(f"PD role config dominated (not in the top {s.pd_role_keep} by rate per instance "
                             f"on its nodes)", len(combos))
                continue
            for p, d in combos:
                row = pd_row(quant, prc, pp, drc, dp, p, d, nodes, dpn, osl, targets)
                add(row, None, None)
                row["_pd"] = (quant, prc, drc, p, d)


def pd_row(quant: str, prc: RoleConfig, pp: Priced, drc: RoleConfig, dp: Priced, p: int, d: int, nodes: int,
           dpn: int, osl: int, targets: Mapping[str, float]) -> dict[str, Any]:
    """The row of ``p`` prefill and ``d`` decode instances of two priced role configs: goodput
    ``min(P × prefill rate, D × decode rate)``, replicated as often as the unit fits ``nodes``."""
    cand = Candidate("pd", quant, prefill=prc, decode=drc, prefill_instances=p, decode_instances=d)
    unit_nodes = p * prc.layout.nodes + d * drc.layout.nodes
    replicas = nodes // unit_nodes
    unit_devices = unit_nodes * dpn
    goodput = min(p * pp.rps, d * dp.rps)
    row = {"kind": "pd", "quantization": quant, "label": cand.label(),
           "layout": f"{p}P:{d}D", "replicas": replicas, "devices": unit_devices * replicas,
           "prefill_instances": p, "decode_instances": d,
           **{f"prefill.{k2}": v for k2, v in _role_params(prc).items()},
           **{f"decode.{k2}": v for k2, v in _role_params(drc).items()},
           "status": "ranked", "reason": "", "error": "", "note": dp.note,
           "bottleneck": "prefill" if p * pp.rps < d * dp.rps else "decode",
           "capacity_rps": goodput * replicas, "rps_per_device": goodput / unit_devices,
           "tps_per_device": goodput * osl / unit_devices,
           "lowest": {"p99_ttft_ms": pp.at.get("p99_ttft_ms"), "p99_tpot_ms": dp.at.get("p99_tpot_ms")}}
    at = {"p99_ttft_ms": pp.at.get("p99_ttft_ms"), "p99_tpot_ms": dp.at.get("p99_tpot_ms"),
          "median_tpot_ms": dp.at.get("median_tpot_ms")}
    _figures(row, at, targets)
    return row


def _role_params(rc: RoleConfig) -> dict[str, Any]:
    lay, kn = rc.layout, rc.knobs
    return {"nodes": lay.nodes, "tensor_parallel_size": lay.tensor_parallel_size,
            "data_parallel_size": lay.data_parallel_size, "enable_expert_parallel": lay.enable_expert_parallel,
            "cudagraph_mode": kn.cudagraph_mode, "max_num_seqs": kn.max_num_seqs,
            "max_num_batched_tokens": kn.max_num_batched_tokens}


__all__ = ["SearchResult", "pd_row", "search"]
