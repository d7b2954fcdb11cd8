"""The search space: co-located layouts over whole nodes and PD role layouts, with the knob grids. Pure.

Symmetry (why the space is smaller than every device assignment):

* a deployment of ``R`` identical co-located instances has the goodput per device of one instance (the client's
  requests split evenly, instances share nothing), so one instance over ``k`` whole nodes is enumerated for every
  ``k`` dividing the node count, and replicated ``nodes / k`` times;
* an instance of less than a node is DP over that node (DP ranks are independent engines: ``vllm/v1/engine/core.py``
  ``DPEngineCoreProc``), so instances start at one node;
* P:D counts ``(kP, kD)`` have the goodput per device of ``(P, D)`` (rate matching is linear): only coprime counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ascendflow.schema.search import SearchSpec


@dataclass(frozen=True)
class Layout:
    """One engine instance's layout (vLLM names): ``nodes`` it spans, TP × PP × DP devices, EP."""

    nodes: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    enable_expert_parallel: bool

    @property
    def devices(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    def label(self) -> str:
        """``TP8xDP2 EP`` (``PP`` only when > 1)."""
        pp = f"xPP{self.pipeline_parallel_size}" if self.pipeline_parallel_size > 1 else ""
        return (f"TP{self.tensor_parallel_size}{pp}xDP{self.data_parallel_size}"
                + (" EP" if self.enable_expert_parallel else ""))


#: Short names of the graph modes in labels.
GRAPH_SHORT = {"NONE": "eager", "PIECEWISE": "PW", "FULL": "FULL", "FULL_DECODE_ONLY": "FDO",
               "FULL_AND_PIECEWISE": "F+PW"}


@dataclass(frozen=True)
class Knobs:
    """Engine and graph knobs of one instance: ``cudagraph_mode`` (``NONE``: ``--enforce-eager``), ``max_num_seqs``,
    ``max_num_batched_tokens``."""

    cudagraph_mode: str
    max_num_seqs: int
    max_num_batched_tokens: int

    def label(self) -> str:
        """``FDO s64 t4096`` (graph mode short name, ``max_num_seqs``, ``max_num_batched_tokens``)."""
        return f"{GRAPH_SHORT[self.cudagraph_mode]} s{self.max_num_seqs} t{self.max_num_batched_tokens}"


@dataclass(frozen=True)
class RoleConfig:
    """One PD role instance: ``role`` (``prefill``/``decode``), its layout and knobs."""

    role: str
    layout: Layout
    knobs: Knobs

    def label(self) -> str:
        return f"{self.layout.label()} {self.knobs.label()}"


@dataclass(frozen=True)
class Candidate:
    """One deployment: co-located (``layout``, ``knobs``, ``replicas``) or PD (``prefill``/``decode`` role configs
    and their instance counts), with its quantization option name."""

    kind: str  # "colocated" or "pd"
    quantization: str
    layout: Layout | None = None
    knobs: Knobs | None = None
    replicas: int = 1
    prefill: RoleConfig | None = None
    decode: RoleConfig | None = None
    prefill_instances: int = 0
    decode_instances: int = 0

    def label(self) -> str:
        """Readable layout, e.g. ``TP8xDP2 EP FULL_DECODE_ONLY seqs32 tok4096 x2`` or
        ``PD 2P(TP8xDP2) : 1D(TP1xDP32 EP)``."""
        if self.kind == "colocated":
            assert self.layout and self.knobs
            return f"{self.layout.label()} {self.knobs.label()} ×{self.replicas} [{self.quantization}]"
        assert self.prefill and self.decode
        return (f"PD {self.prefill_instances}P({self.prefill.label()}) {self.decode_instances}D"
                f"({self.decode.label()}) [{self.quantization}]")


def devices_of(c: Candidate, devices_per_node: int) -> int:
    """Devices the candidate's unit uses: a co-located instance's nodes × devices per node (one replica), a PD
    deployment's ``P × prefill nodes + D × decode nodes`` whole nodes."""
    if c.kind == "colocated":
        assert c.layout
        return c.layout.nodes * devices_per_node
    assert c.prefill and c.decode
    return (c.prefill_instances * c.prefill.layout.nodes + c.decode_instances * c.decode.layout.nodes) * \
        devices_per_node


def powers_of_two(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit``."""
    out, x = [], 1
    while x <= limit:
        out.append(x)
        x *= 2
    return out


def colocated_layouts(search: SearchSpec, nodes: int, devices_per_node: int, moe: bool) -> list[Layout]:
    """Every co-located instance layout: ``k`` whole nodes for each ``k`` dividing ``nodes``, TP from
    ``search.tensor_parallel_sizes`` (or powers of two), PP from ``search.pipeline_parallel_sizes``, DP filling the
    instance's devices exactly, EP from ``search.expert_parallel`` (``false`` only for a dense model)."""
    out = []
    eps = sorted(set(search.expert_parallel)) if moe else [False]
    for k in range(1, nodes + 1):
        if nodes % k:
            continue
        devices = k * devices_per_node
        tps = search.tensor_parallel_sizes or tuple(powers_of_two(devices))
        for tp in tps:
            for pp in search.pipeline_parallel_sizes:
                if devices % (tp * pp):
                    continue
                for ep in eps:
                    out.append(Layout(k, tp, pp, devices // (tp * pp), ep))
    return out


def knob_grid(search: SearchSpec, modes: tuple[str, ...] | None = None, seqs: tuple[int, ...] | None = None,
              tokens: tuple[int, ...] | None = None) -> list[Knobs]:
    """The knob grid (graph modes × ``max_num_seqs`` × ``max_num_batched_tokens``), the search's own by default."""
    return [Knobs(g, s, t) for g in (modes or search.graph_modes) for s in (seqs or search.max_num_seqs)
            for t in (tokens or search.max_num_batched_tokens)]


def role_layouts(search: SearchSpec, nodes: int, devices_per_node: int, moe: bool) -> list[Layout]:
    """PD role instance layouts: 1 .. ``pd_max_nodes_per_instance`` nodes (and fewer than ``nodes``: the other role
    needs one), TP up to one node's devices (DP ranks launched one per TP group, ``launch_online_dp.py``), PP 1."""
    out = []
    eps = sorted(set(search.expert_parallel)) if moe else [False]
    for k in range(1, min(search.pd_max_nodes_per_instance, nodes - 1) + 1):
        devices = k * devices_per_node
        for tp in search.tensor_parallel_sizes or tuple(powers_of_two(devices_per_node)):
            if tp > devices_per_node or devices % tp:
                continue
            for ep in eps:
                out.append(Layout(k, tp, 1, devices // tp, ep))
    return out


def decode_tokens(max_num_seqs: int, speculative_tokens: int) -> int:
    """A decode role's ``max_num_batched_tokens``: the PD tutorials' 256, or one decode step's rows when more
    (``max_num_seqs × (1 + k)``; vLLM refuses a budget below ``max_num_seqs``)."""
    return max(256, max_num_seqs * (1 + speculative_tokens))


def role_configs(search: SearchSpec, nodes: int, devices_per_node: int, moe: bool, speculative_tokens: int,
                 prefill_seqs: int) -> dict[str, list[RoleConfig]]:
    """``{"prefill": [...], "decode": [...]}``: prefill varies ``max_num_batched_tokens`` (its ``max_num_seqs`` is
    ``prefill_seqs``) over ``pd_prefill_graph_modes``; decode varies ``max_num_seqs`` over ``graph_modes``."""
    layouts = role_layouts(search, nodes, devices_per_node, moe)
    prefill = [RoleConfig("prefill", lay, Knobs(g, prefill_seqs, t)) for lay in layouts
               for g in search.pd_prefill_graph_modes for t in search.max_num_batched_tokens]
    decode = [RoleConfig("decode", lay, Knobs(g, s, decode_tokens(s, speculative_tokens))) for lay in layouts
              for g in search.graph_modes for s in search.max_num_seqs]
    return {"prefill": prefill, "decode": decode}


def pd_counts(nodes: int, prefill_nodes: int, decode_nodes: int) -> list[tuple[int, int]]:
    """Coprime ``(P, D)`` with ``P × prefill_nodes + D × decode_nodes <= nodes`` (symmetry: module docstring)."""
    out = []
    for p in range(1, nodes + 1):
        for d in range(1, nodes + 1):
            if p * prefill_nodes + d * decode_nodes <= nodes and math.gcd(p, d) == 1:
                out.append((p, d))
    return out


@dataclass
class Counts:
    """Tallies of the enumeration: ``enumerated`` candidates, ``infeasible`` by reason, ``pruned`` by rule."""

    enumerated: int = 0
    infeasible: dict[str, int] = field(default_factory=dict)
    pruned: dict[str, int] = field(default_factory=dict)

    def refuse(self, reason: str, n: int = 1) -> None:
        self.infeasible[reason] = self.infeasible.get(reason, 0) + n

    def prune(self, reason: str, n: int = 1) -> None:
        self.pruned[reason] = self.pruned.get(reason, 0) + n

    def line(self) -> str:
        """``312 infeasible: 240 weights do not fit, 72 KV below one max_model_len request``."""
        total = sum(self.infeasible.values())
        parts = ", ".join(f"{n} {r}" for r, n in sorted(self.infeasible.items(), key=lambda x: (-x[1], x[0])))
        return f"{total} infeasible" + (f": {parts}" if parts else "")

    def as_dict(self) -> dict[str, Any]:
        return {"enumerated": self.enumerated, "infeasible": dict(self.infeasible), "pruned": dict(self.pruned)}


__all__ = ["Candidate", "Counts", "Knobs", "Layout", "RoleConfig", "colocated_layouts", "decode_tokens",
           "devices_of", "knob_grid", "pd_counts", "powers_of_two", "role_configs", "role_layouts"]
