"""Plan an imported PD recipe (:mod:`ascendflow.importer.pd`) and read every ``vllm serve`` back, node by node and
process by process: each equals the CI command it came from (:func:`~ascendflow.importer.roundtrip.compare_argv`:
options as a set, values as vLLM's parser types them, JSON parsed), or the difference has its reason.

Differences the PD launcher makes on purpose, each a reason in the round trip: the ``--kv-transfer-config``
``kv_port`` moved out of AscendDirect's random-port range (:func:`~ascendflow.importer.pd.kv_port_offset`), its
``engine_id`` named ``<role><i>`` (unique by construction; CI numbers them or lets vLLM draw one),
``use_ascend_direct`` left out (not read by MooncakeConnector at v0.23.0/v0.25.1rc1: AscendDirect is Mooncake's build
option) and ``kv_connector_extra_config`` written from the roles' real layout (where CI's file names another);
node addresses written as deploy-time references (``${ASCENDFLOW_NODE<k>_IP}``).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from ascendflow.compiler.plan import Plan
from ascendflow.importer.command import ServeCommand, given_options
from ascendflow.importer.pd import ImportedPD, plan_address
from ascendflow.importer.roundtrip import RoundTrip, compare_argv, plan_recipe, typed_values
from ascendflow.schema.errors import ConfigError


def plan_processes(plan: Plan) -> dict[int, list[list[str]]]:
    """The tokens after ``vllm serve`` of every engine process of the plan, per node (node 0 first), in order."""
    out: dict[int, list[list[str]]] = {}
    for worker in plan.workers:
        if list(worker.command[:2]) == ["vllm", "serve"]:
            out.setdefault(worker.node_rank, []).append(list(worker.command[2:]))
    return out


def _layout(imported: ImportedPD) -> dict[str, dict[str, int]]:
    pd = imported.recipe["pd"]
    return {role: {"dp_size": pd[role]["data_parallel_size"], "tp_size": pd[role]["tensor_parallel_size"]}
            for role in ("prefill", "decode")}


def normalise_kv(ci: dict[str, Any], ours: dict[str, Any], imported: ImportedPD,
                 command: ServeCommand) -> tuple[dict[str, Any], list[str]]:
    """CI's ``--kv-transfer-config`` with the launcher's intended changes applied, and those changes as text."""
    kv, notes = copy.deepcopy(ci), []
    port = imported.kv_ports[command.node]
    if port != int(kv["kv_port"]):
        shift = port - int(kv["kv_port"]) - imported.kv_port_offset
        notes.append(f"kv_port {kv['kv_port']} -> {port} (" + (
            "out of AscendDirect's random-port range" if imported.kv_port_offset else "") + (
            ", " if imported.kv_port_offset and shift else "") + (
            f"+{shift}: this instance's kv_port_stride step, where CI gives every instance one port" if shift else "")
            + ")")
    kv["kv_port"] = port if isinstance(ours.get("kv_port"), int) else str(port)
    ci_id = kv.get("engine_id", f"node{command.node}")
    if ours.get("engine_id") == imported.engine_ids[command.node] and ci_id != ours.get("engine_id"):
        notes.append(f"engine_id {ci_id} -> {ours['engine_id']}")
        kv["engine_id"] = ours["engine_id"]
    extra = dict(kv.get("kv_connector_extra_config") or {})
    if extra.pop("use_ascend_direct", None) is not None:
        notes.append("use_ascend_direct not written (MooncakeConnector does not read it)")
    layout = _layout(imported)
    roles = {r: extra.get(r) for r in layout}
    if roles != layout and (ours.get("kv_connector_extra_config") or {}).get("prefill") == layout["prefill"]:
        notes.append(f"kv_connector_extra_config layout {roles} -> the roles' own {layout} (CI's file names another "
                     "layout; MooncakeConnector _get_prefill_decode_size pairs ranks by it)")
        extra.update(layout)
    kv["kv_connector_extra_config"] = extra
    return kv, notes


def compare_process(source: ServeCommand, argv: list[str], imported: ImportedPD) -> RoundTrip:
    """One CI process against the plan's: :func:`compare_argv` with the role's reasons and the launcher's
    intended ``--kv-transfer-config`` and address changes (listed in ``changed`` with their reason)."""
    _, given = given_options(argv)
    ours = typed_values(given, argv)
    values = dict(source.values)
    notes: list[tuple[str, Any, Any, str]] = []
    if "kv_transfer_config" in values and isinstance(ours.get("kv_transfer_config"), dict):
        kv, why = normalise_kv(values["kv_transfer_config"], ours["kv_transfer_config"], imported, source)
        if why and kv == ours["kv_transfer_config"]:
            notes.append(("--kv-transfer-config", values["kv_transfer_config"], kv, "; ".join(why)))
            values["kv_transfer_config"] = kv
    address = values.get("data_parallel_address")
    if ours.get("data_parallel_address") is not None and plan_address(str(address)) == ours["data_parallel_address"]:
        values["data_parallel_address"] = ours["data_parallel_address"]  # the same node, named at deploy time
    role = source.role
    trip = compare_argv(dataclasses.replace(source, values=values), argv, imported,
                        dropped={**imported.dropped, **imported.role_dropped[role], **imported.role_changed[role]},
                        dropped_additional=imported.role_dropped_additional[role])
    trip.changed += notes
    return trip


def pd_round_trip(imported: ImportedPD, overrides: list[str] | None = None) -> tuple[Plan, list[list[RoundTrip]]]:
    """Plan the PD recipe and compare every CI process with the plan's (per node, per process).

    Raises:
        ConfigError: the recipe is refused, or the plan runs another number of processes on a node than CI.
    """
    plan = plan_recipe(imported, overrides)
    ours = plan_processes(plan)
    shape = [len(ranks) for ranks in imported.nodes]
    if [len(ours.get(k, [])) for k in range(len(shape))] != shape or len(ours) != len(shape):
        raise ConfigError("pd", imported.name, f"the plan runs {[len(ours[k]) for k in sorted(ours)]} vllm serve per "
                                               f"node, CI {shape}")
    return plan, [[compare_process(c, argv, imported) for c, argv in zip(ranks, ours[k])]
                  for k, ranks in enumerate(imported.nodes)]
