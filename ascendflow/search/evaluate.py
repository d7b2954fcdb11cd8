"""Compile and price search candidates: the compiler's exact refusal (classified by reason) and the performance
model's capacity at the SLO, each cached on what it depends on.

Capacity (co-located): the performance model's capacity search (:func:`ascendflow.perfmodel.predict.predicted_capacity`,
the same :class:`~ascendflow.capacity.search.History` search a measured ``run.mode=capacity`` uses) on **one DP rank**
of the instance: DP ranks are identical engines fed round-robin (:func:`~ascendflow.perfmodel.scheduler.simulate_dp`
simulates them independently), so the instance's capacity is ``DP ×`` the rank's. The rank's load goes up to
``LOAD_PER_SEQ × max_num_seqs`` requests in flight with ``PROMPTS_PER_LOAD ×`` that many prompts: the search sizes the
load to the candidate rather than to ``workload.num_prompts`` (a benchmark of 64 prompts cannot load 64 devices).
The step model sees the whole instance (TP, DP, EP, nodes: expert weights and all-to-all over ``TP × DP``).

Capacity (PD roles): :func:`ascendflow.perfmodel.pd_ratio.role_capacity` itself (one DP rank, Poisson arrivals up
to ``UTILIZATION_CAP`` of the saturated rate, bisection on the role's p99 target: prefill ``slo.p99_ttft_ms``, decode
``slo.p99_tpot_ms`` with the prompt's KV received), with pd_ratio's requests per point and halvings, so that a PD
row's figure is the one its recipe's plan carries (``performance.pd_ratio``). A cheaper resolution (64 requests per
point, 6 halvings) was used while a role config took 4 s; with the memoised step terms it takes 0.2-0.6 s, and the
64-request p99 had drifted 2 × from pd_ratio's on Qwen3-235B W8A8 2 × A3 prefill (13.9 against 6.2 req/s per
instance). Computed once per role config and reused for every P:D count.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from pydantic import ValidationError

from ascendflow.compiler import Plan, compile_plan
from ascendflow.compiler.checks.pd import check_decode_capacity, check_prefill_capacity, request_tokens
from ascendflow.compiler.deployment import compile_role
from ascendflow.perfmodel.pd_ratio import role_capacity
from ascendflow.perfmodel.predict import limits_of, predicted_capacity, step_model
from ascendflow.perfmodel.shapes import layer_shapes
from ascendflow.perfmodel.table import find_table
from ascendflow.platforms import HostFacts
from ascendflow.schema.engine import EngineSpec
from ascendflow.schema.errors import ConfigError, format_validation_error
from ascendflow.schema.graph import GraphSpec
from ascendflow.schema.parallel import ParallelSpec
from ascendflow.schema.pd import PDSpec, ProxySpec, RoleSpec
from ascendflow.schema.quantization import QuantizationSpec
from ascendflow.schema.spec import RunSpec
from ascendflow.search.space import Knobs, Layout, RoleConfig

#: Highest load per DP rank the co-located capacity search tries, in multiples of ``max_num_seqs``: past
#: ``max_num_seqs`` in flight the batch is full, so requests/s no longer grow and only TTFT does (the waiting queue).
LOAD_PER_SEQ = 1
#: Prompts simulated per load point, in multiples of the highest load (two waves: the second shows the queueing).
PROMPTS_PER_LOAD = 2

#: Refusal classes, first match wins: (pattern on the compiler's one line, short reason). The reasons name the rule
#: the compiler applied (its message carries the figures); anything else is reported by its config key.
REASONS: tuple[tuple[str, str], ...] = (
    (r"DP rank spanning nodes", "a DP rank spanning nodes takes data_parallel_size=1"),
    (r"weights? .*(do(es)? not fit|exceed)|no room for the KV cache|leaves no memory|not enough memory",
     "weights do not fit"),
    (r"max_model_len|one request of", "KV below one max_model_len request"),
    (r"decode KV per DP rank holds", "decode KV below max_num_seqs requests"),
    (r"prefill KV per DP rank holds|a step's prompts need", "prefill KV below one step's batched tokens"),
    (r"divisible|divide", "layout does not divide the model"),
    (r"cudagraph|graph mode|capture", "graph mode refused by the release"),
)


def refusal_reason(error: ConfigError) -> str:
    """The short reason of a compiler refusal (:data:`REASONS`), else ``"<key> refused"``."""
    text = str(error)
    budget = re.search(r"negative KV budget.*?requested ([0-9.]+) GiB − weights ([0-9.]+)", text)
    if budget:
        requested, weights = float(budget.group(1)), float(budget.group(2))
        return "weights do not fit" if weights >= requested else "no KV budget after weights and overheads"
    for pattern, reason in REASONS:
        if re.search(pattern, text, re.IGNORECASE):
            return reason
    return f"{error.key} refused"


@dataclass
class Priced:
    """One priced instance (co-located instance, or one PD role instance).

    Attributes:
        plan: the compiled plan (``None`` when refused).
        reason: the refusal's short reason (``""`` when feasible); ``error``: the compiler's line.
        rps: requests/s one instance sustains at the SLO (co-located: the capacity; a role: its rate within its
            target); ``output_tps``: output tokens/s at that point; ``at``: the simulated metrics there
            (``p99_ttft_ms``, ``p99_tpot_ms``, ``median_tpot_ms``...); ``lowest``: the metrics at the lowest load tried
            (what the nearest SLO any candidate meets is read from); ``status``: ``ranked``, ``misses SLO`` or
            ``not predicted``; ``note``: why not predicted.
    """

    plan: Plan | None = None
    reason: str = ""
    error: str = ""
    rps: float = 0.0
    output_tps: float = 0.0
    at: dict[str, float] = field(default_factory=dict)
    lowest: dict[str, float] = field(default_factory=dict)
    status: str = "ranked"
    note: str = ""


class Evaluator:
    """Compiles candidate specs from a base spec and prices them, with caches (one per process).

    Args:
        spec: the search run's validated spec (hardware, model, engine defaults, workload, SLO).
        arch: the model's architecture; ``model_path``, ``host``, ``checkpoint``, ``draft``: as
            :func:`ascendflow.compiler.compile_plan` takes them.
        quantizations: quantization option name -> its spec.
        calibration: the hardware's NPU calibration (:func:`ascendflow.perfmodel.calibration.load_calibration`) or
            ``None``; ``tables_dir``: where op tables are looked up (:func:`ascendflow.perfmodel.table.find_table`).
    """

    def __init__(self, spec: RunSpec, arch: Any, *, model_path: str, host: HostFacts, checkpoint: Any,
                 draft: Any, quantizations: Mapping[str, QuantizationSpec], calibration: Mapping[str, Any] | None,
                 tables_dir: Any = None) -> None:
        self.spec, self.arch, self.model_path, self.host = spec, arch, model_path, host
        self.checkpoint, self.draft, self.quantizations = checkpoint, draft, dict(quantizations)
        self.calibration, self.tables_dir = calibration, tables_dir
        self.hardware = spec.hardware.model_dump()
        self._engine = spec.engine.model_dump()
        self._parallel = spec.parallel.model_dump()
        self._capacity: dict[Any, Any] = {}
        self._roles: dict[Any, Priced] = {}
        self._tables: dict[int, Any] = {}
        wl = spec.workload
        self.isl = wl.random_input_len + (wl.prefix_suffix_len if wl.dataset == "prefix_repetition" else 0)
        self.osl = wl.random_output_len
        self.compiles = 0
        self.priced = 0

    # -- specs ---------------------------------------------------------------------------------------------------
    def _graph(self, mode: str) -> GraphSpec:
        """The graph option of ``mode``; a graph mode keeps the run's own ``graph.cudagraph_capture_sizes`` when it
        sets them (a release rule may need them: vllm-ascend 0.11.0 captures FULL_DECODE_ONLY with MTP only at
        multiples of ``k + 1``, ``compiler/graph``), else the release's default sizes."""
        if mode == "NONE":
            return GraphSpec(name="eager", enforce_eager=True, cudagraph_mode="NONE")
        sizes = self.spec.graph.cudagraph_capture_sizes
        return GraphSpec(name=mode.lower(), cudagraph_mode=mode,
                         **({"cudagraph_capture_sizes": sizes} if sizes else {}))

    def colocated_spec(self, quantization: str, layout: Layout, knobs: Knobs) -> RunSpec:
        """The run spec of one co-located instance (validated section by section).

        Raises:
            ConfigError: a section's validation (a knob out of its bounds).
        """
        try:
            parallel = ParallelSpec.model_validate({**self._parallel, "tensor_parallel_size": layout.tensor_parallel_size,
                                                    "pipeline_parallel_size": layout.pipeline_parallel_size,
                                                    "data_parallel_size": layout.data_parallel_size,
                                                    "enable_expert_parallel": layout.enable_expert_parallel,
                                                    "nodes": layout.nodes, "node_addresses": ()})
            engine = EngineSpec.model_validate({**self._engine, "max_num_seqs": knobs.max_num_seqs,
                                                "max_num_batched_tokens": knobs.max_num_batched_tokens})
        except ValidationError as exc:
            raise format_validation_error(exc) from None
        return self.spec.model_copy(update={"parallel": parallel, "engine": engine, "graph": self._graph(knobs.cudagraph_mode),
                                            "quantization": self.quantizations[quantization], "pd": PDSpec()})

    def pd_spec(self, quantization: str, prefill: RoleConfig, decode: RoleConfig, p: int, d: int,
                connector: str) -> RunSpec:
        """The run spec of a PD deployment: ``p`` prefill and ``d`` decode instances on whole nodes, ports and
        ``HCCL_BUFFSIZE`` as the multi-node PD tutorial (``conf/pd/mooncake_1p1d.yaml``)."""
        def role(rc: RoleConfig, instances: int, **ports: Any) -> RoleSpec:
            lay, k = rc.layout, rc.knobs
            graph = ({"enforce_eager": True} if k.cudagraph_mode == "NONE" else {"cudagraph_mode": k.cudagraph_mode})
            return RoleSpec(instances=instances, nodes=lay.nodes, tensor_parallel_size=lay.tensor_parallel_size,
                            data_parallel_size=lay.data_parallel_size,
                            enable_expert_parallel=lay.enable_expert_parallel, max_num_seqs=k.max_num_seqs,
                            max_num_batched_tokens=k.max_num_batched_tokens, **graph, **ports)
        pd = PDSpec(name="search", connector=connector, proxy=ProxySpec(),
                    prefill=role(prefill, p, hccl_buffsize_mb=256, kv_port=36000),
                    decode=role(decode, d, hccl_buffsize_mb=600, kv_port=36100, api_port=7200))
        parallel = self.spec.parallel.model_copy(update={"nodes": p * prefill.layout.nodes + d * decode.layout.nodes,
                                                         "node_addresses": ()})
        return self.spec.model_copy(update={"pd": pd, "parallel": parallel,
                                            "quantization": self.quantizations[quantization]})

    def compile(self, spec: RunSpec) -> Plan:
        """:func:`ascendflow.compiler.compile_plan` of ``spec`` with the search's model and host.

        Raises:
            ConfigError: the compiler's refusal.
        """
        self.compiles += 1
        return compile_plan(spec, self.arch, model_path=self.model_path, host=self.host, checkpoint=self.checkpoint,
                            draft=self.draft)

    # -- pricing -------------------------------------------------------------------------------------------------
    def _step(self, plan: Mapping[str, Any], quantization: str):
        tp = int(plan["engine_args"].get("tensor_parallel_size") or 1)
        if tp not in self._tables:
            shapes = layer_shapes(plan["model"]["architecture"], tp)
            kwargs = {} if self.tables_dir is None else {"tables_dir": self.tables_dir}
            self._tables[tp] = find_table(self.spec.hardware.name, self.spec.hardware.software, shapes, **kwargs)
        table = self._tables[tp]
        step, source = step_model(plan, self.hardware, table,
                                  calibration=None if table is not None else self.calibration,
                                  quantization=self.quantizations[quantization].model_dump())
        return step, source

    @staticmethod
    def _step_key(step: Any, plan: Mapping[str, Any]) -> str:
        layout = getattr(step, "layout", None)
        if layout is not None:
            return repr(layout)
        ea = plan["engine_args"]
        return json.dumps([type(step).__name__, ea.get("tensor_parallel_size"), ea.get("data_parallel_size"),
                           ea.get("enable_expert_parallel"), plan.get("graph")], sort_keys=True, default=str)

    def colocated(self, quantization: str, layout: Layout, knobs: Knobs) -> Priced:
        """Compile and price one co-located instance (see the module docstring)."""
        try:
            plan = self.compile(self.colocated_spec(quantization, layout, knobs))
        except ConfigError as exc:
            return Priced(reason=refusal_reason(exc), error=str(exc), status="infeasible")
        if layout.pipeline_parallel_size > 1:
            return Priced(plan=plan, status="not predicted",
                          note=f"PP not modelled (pipeline_parallel_size={layout.pipeline_parallel_size})")
        data = json.loads(plan.to_json())
        step, source = self._step(data, quantization)
        if step is None:
            return Priced(plan=plan, status="not predicted", note=source)
        rank = {**data, "engine_args": {**data["engine_args"], "data_parallel_size": 1}}
        limits = limits_of(rank)
        key = (quantization, self._step_key(step, data), limits)
        if key not in self._capacity:
            self.priced += 1
            self._capacity[key] = self._rank_capacity(rank, step, limits.max_num_seqs)
        rps, tps, at, lowest, note = self._capacity[key]
        dp = layout.data_parallel_size
        short = [w for w in plan.warnings if w.startswith("KV cache holds ")]  # fewer than max_num_seqs: as PD decode
        return Priced(plan=plan, rps=rps * dp, output_tps=tps * dp, at=at, lowest=lowest,
                      status="ranked" if rps > 0 else ("not predicted" if note else "misses SLO"),
                      note=note or "; ".join(short)[:300])

    def _rank_capacity(self, rank: Mapping[str, Any], step: Any, seqs: int) -> tuple[float, float, dict, dict, str]:
        top = LOAD_PER_SEQ * seqs
        wl = self.spec.workload.model_copy(update={"num_prompts": PROMPTS_PER_LOAD * top, "max_concurrency": top})
        slo = self.spec.slo.model_copy(update={"max_load": float(top), "min_load": 1.0})
        if slo.variable == "request_rate":
            slo = slo.model_copy(update={"max_load": None, "min_load": self.spec.slo.min_load})
        try:
            cap = predicted_capacity(rank, wl, slo, step)
        except ValueError as exc:
            return 0.0, 0.0, {}, {}, str(exc)[:200]
        curve = cap["curve"]
        lowest = curve[min(curve, key=float)] if curve else {}
        if not cap["slo_met"]:
            return 0.0, 0.0, {}, lowest, ""
        at = curve.get(str(cap["capacity_load"]), {})
        return float(cap["capacity_rps"]), float(cap["capacity_output_throughput"]), at, lowest, ""

    def role(self, quantization: str, rc: RoleConfig, connector: str) -> Priced:
        """Compile and price one PD role instance (cached per role config; reused across P:D counts), with the
        role-level PD sizing checks of :func:`ascendflow.compiler.compile_plan` (prefill KV holds one step's batched
        tokens; a decode KV that holds fewer than ``max_num_seqs`` whole requests per DP rank is priced as the
        simulator runs it, at most what fits in flight, with the warning as its ``note``, the rule of a co-located
        candidate; it is refused only when not one request fits)."""
        key = (quantization, rc)
        if key in self._roles:
            return self._roles[key]
        spec = self.pd_spec(quantization, rc, rc, 1, 1, connector)
        try:
            plan = compile_role(spec, rc.role, self.arch, model_path=self.model_path, host=self.host,
                                checkpoint=self.checkpoint, draft=self.draft)
            self.compiles += 1
            kv, ea = plan.kv_cache, plan.engine_args
            short: list[str] = []  # fewer requests in the KV than max_num_seqs: priced at what fits, as co-located
            if rc.role == "decode" and kv.attention != "hybrid" and self.spec.workload.dataset != "chat":
                k = ea.get("speculative_config", {}).get("num_speculative_tokens", 0)
                short = check_decode_capacity(kv.num_blocks, kv.block_size, ea["max_num_seqs"],
                                              request_tokens(self.isl, self.osl, k), "more decode DP ranks")
            if rc.role == "prefill" and kv.attention != "hybrid":
                check_prefill_capacity(kv.num_blocks, kv.block_size, ea["max_num_batched_tokens"])
        except ConfigError as exc:
            out = Priced(reason=refusal_reason(exc), error=str(exc), status="infeasible")
            self._roles[key] = out
            return out
        data = json.loads(plan.to_json())
        data["target"] = {**data["target"], "nodes": rc.layout.nodes}
        step, source = self._step(data, quantization)
        if step is None:
            out = Priced(plan=plan, status="not predicted", note=source)
        else:
            slo = self.spec.slo
            price = (rc.role, quantization, self._step_key(step, data), limits_of(data))
            if price not in self._capacity:  # graph modes the step model prices alike share one search
                self.priced += 1
                if rc.role == "prefill":
                    self._capacity[price] = role_capacity(data, step, self.isl, 1, 0, "p99_ttft_ms",
                                                          slo.p99_ttft_ms, seed=self.spec.workload.seed)
                else:
                    self._capacity[price] = role_capacity(data, step, self.isl, self.osl, self.isl, "p99_tpot_ms",
                                                          slo.p99_tpot_ms, seed=self.spec.workload.seed)
            cap = self._capacity[price]
            at = cap["at"]
            out = Priced(plan=plan, rps=float(cap["rps_per_instance"]), at=at, lowest=at,
                         output_tps=float(cap["rps_per_instance"]) * (self.osl if rc.role == "decode" else 1),
                         status="ranked" if cap["met"] else "misses SLO", note="; ".join(short)[:300])
        self._roles[key] = out
        return out

