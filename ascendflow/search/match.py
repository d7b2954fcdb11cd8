"""A deployment someone already runs, as a search candidate: read its layout from its run spec, find it among the
search's rows, and say where it ranks and what the top pick gains over it. Pure (no I/O).

Used by ``benchmarks/search_vs_ci.py`` for the public record (vllm-ascend's CI configs, docs/search.md "Against the
public record"). What is matched is what the search enumerates (:mod:`.space`): co-located TP × PP × DP × EP, the
nodes one instance spans, the graph mode, ``max_num_seqs`` and ``max_num_batched_tokens``; PD: each role's nodes,
TP × DP × EP, graph mode and ``max_num_seqs`` (prefill also ``max_num_batched_tokens``; a decode role's budget is the
search's rule, :func:`.space.decode_tokens`, not enumerated) and the P:D counts reduced to coprime ones (``2P:2D`` is
``1P:1D`` twice, the same goodput per device: :mod:`.space` symmetry). A co-located instance smaller than a node is
matched to the node filled with DP (``TP4×DP1`` on 4 of 8 devices is one DP rank of ``TP4×DP2``: DP ranks are
independent engines, the same goodput per device).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ascendflow.schema.spec import RunSpec
from ascendflow.search.space import Candidate, Knobs, Layout, RoleConfig, decode_tokens


def graph_mode(enforce_eager: bool | None, cudagraph_mode: str | None, default: str = "FULL_AND_PIECEWISE") -> str:
    """The search's graph mode name of a graph setting: ``NONE`` when eager, else the mode, else ``default``
    (vLLM V1's own default where nothing is set: ``compiler/graph/capture.py``)."""
    if enforce_eager:
        return "NONE"
    return cudagraph_mode or default


def candidate_of(spec: RunSpec, devices_per_node: int) -> tuple[Candidate, list[str]]:
    """``spec``'s deployment as the search would enumerate it, and notes on what was normalised (one line each).

    Co-located: one instance over ``parallel.nodes`` nodes (DP filled to the node when it uses less than one).
    PD: ``pd.prefill`` / ``pd.decode`` roles, the role's graph setting over the run's ``graph``.
    """
    notes: list[str] = []
    g = spec.graph
    base_mode = graph_mode(g.enforce_eager, g.cudagraph_mode)
    quant = spec.quantization.name
    if not spec.pd.enabled:
        par, eng = spec.parallel, spec.engine
        tp, pp, dp = par.tensor_parallel_size, par.pipeline_parallel_size, par.data_parallel_size
        devices = par.nodes * devices_per_node
        if tp * pp * dp < devices and devices % (tp * pp * dp) == 0 and par.nodes == 1:
            notes.append(f"TP{tp}xDP{dp} on {tp * pp * dp} of {devices} devices matched as TP{tp}xDP{devices // (tp * pp)}"
                         f" (DP filled to the node: the same goodput per device)")
            dp = devices // (tp * pp)
        layout = Layout(par.nodes, tp, pp, dp, par.enable_expert_parallel)
        knobs = Knobs(base_mode, eng.max_num_seqs or 0, eng.max_num_batched_tokens or 0)
        return Candidate("colocated", quant, layout=layout, knobs=knobs, replicas=1), notes
    k = spec.engine.num_speculative_tokens or 0
    roles = {}
    for name in ("prefill", "decode"):
        r = getattr(spec.pd, name)
        mode = graph_mode(r.enforce_eager if r.enforce_eager is not None else g.enforce_eager,
                          r.cudagraph_mode or g.cudagraph_mode)
        seqs = r.max_num_seqs or spec.engine.max_num_seqs or 0
        tokens = r.max_num_batched_tokens or spec.engine.max_num_batched_tokens or 0
        if name == "decode":
            if tokens != decode_tokens(seqs, k):
                notes.append(f"decode max_num_batched_tokens {tokens} not enumerated (the search gives a decode role "
                             f"{decode_tokens(seqs, k)}); matched without it")
            tokens = decode_tokens(seqs, k)
        roles[name] = RoleConfig(name, Layout(r.nodes, r.tensor_parallel_size, 1, r.data_parallel_size,
                                              r.enable_expert_parallel), Knobs(mode, seqs, tokens))
    p, d = spec.pd.prefill.instances, spec.pd.decode.instances
    g_pd = math.gcd(p, d)
    if g_pd > 1:
        notes.append(f"{p}P:{d}D matched as {p // g_pd}P:{d // g_pd}D ×{g_pd} (the same goodput per device)")
    return Candidate("pd", quant, prefill=roles["prefill"], decode=roles["decode"], prefill_instances=p // g_pd,
                     decode_instances=d // g_pd), notes


def _role_fields(rc: RoleConfig) -> dict[str, Any]:
    lay, kn = rc.layout, rc.knobs
    return {"nodes": lay.nodes, "tensor_parallel_size": lay.tensor_parallel_size,
            "data_parallel_size": lay.data_parallel_size, "enable_expert_parallel": lay.enable_expert_parallel,
            "cudagraph_mode": kn.cudagraph_mode, "max_num_seqs": kn.max_num_seqs,
            "max_num_batched_tokens": kn.max_num_batched_tokens}


def row_fields(c: Candidate) -> dict[str, Any]:
    """The fields of a search row (``search/run.py``) that identify ``c``."""
    if c.kind == "colocated":
        lay, kn = c.layout, c.knobs
        assert lay and kn
        return {"kind": "colocated", "quantization": c.quantization, "nodes_per_instance": lay.nodes,
                "tensor_parallel_size": lay.tensor_parallel_size, "pipeline_parallel_size": lay.pipeline_parallel_size,
                "data_parallel_size": lay.data_parallel_size, "enable_expert_parallel": lay.enable_expert_parallel,
                "cudagraph_mode": kn.cudagraph_mode, "max_num_seqs": kn.max_num_seqs,
                "max_num_batched_tokens": kn.max_num_batched_tokens}
    assert c.prefill and c.decode
    return {"kind": "pd", "quantization": c.quantization, "prefill_instances": c.prefill_instances,
            "decode_instances": c.decode_instances,
            **{f"prefill.{k}": v for k, v in _role_fields(c.prefill).items()},
            **{f"decode.{k}": v for k, v in _role_fields(c.decode).items()}}


def find_row(rows: Sequence[Mapping[str, Any]], c: Candidate) -> Mapping[str, Any] | None:
    """The search row of candidate ``c`` (every identifying field equal), or ``None`` (not enumerated, or a PD pair
    pruned before it became a row)."""
    want = row_fields(c)
    return next((r for r in rows if all(r.get(k) == v for k, v in want.items())), None)


def rank_of(ranked: Sequence[Mapping[str, Any]], row: Mapping[str, Any]) -> int:
    """Where ``row`` ranks among ``ranked`` (best first): its own ``rank`` when it is one of them, else one more than
    the ranked rows with a higher ``tps_per_device`` (where it would stand)."""
    if row.get("rank"):
        return int(row["rank"])
    return 1 + sum(1 for r in ranked if r["tps_per_device"] > row["tps_per_device"])


def gain(top: Mapping[str, Any], ci: Mapping[str, Any]) -> dict[str, float | None]:
    """The top pick's predicted gain over ``ci`` in tokens/s per device, ``top / ci − 1`` in percent, and its interval
    from the two figures' intervals (``tps_low``/``tps_high``) combined at their extremes
    (``top_low / ci_high − 1`` .. ``top_high / ci_low − 1``: no correlation between the two errors assumed, so the
    interval is the widest the two allow); ``None`` where a figure has no interval."""
    t, c = float(top["tps_per_device"]), float(ci["tps_per_device"])
    out: dict[str, float | None] = {"gain_percent": (t / c - 1) * 100 if c > 0 else None, "gain_low": None,
                                    "gain_high": None}
    if c > 0 and all(x.get(k) is not None for x in (top, ci) for k in ("tps_low", "tps_high")):
        out["gain_low"] = (float(top["tps_low"]) / float(ci["tps_high"]) - 1) * 100
        out["gain_high"] = (float(top["tps_high"]) / float(ci["tps_low"]) - 1) * 100
    return out


__all__ = ["candidate_of", "find_row", "gain", "graph_mode", "rank_of", "row_fields"]
