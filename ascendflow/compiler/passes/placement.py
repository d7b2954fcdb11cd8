"""Placement pass: parallel sizes checked against model and hardware, then ranks to nodes and the launcher."""

from __future__ import annotations

from typing import NamedTuple

from ascendflow.compiler.placement.idle import idle_warning
from ascendflow.compiler.placement.nodes import place
from ascendflow.compiler.placement.topology import check_mla_heads, check_parallel
from ascendflow.compiler.plan import NodePlacement
from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.spec import RunSpec
from ascendflow.platforms import platform_for


class Placed(NamedTuple):
    """The launcher's name (``Plan.launcher``) and what every node runs."""

    launcher: str
    nodes: list[NodePlacement]


def placement_pass(spec: RunSpec, arch: ModelArchitecture, rules: EngineRules, release: str,
                   role: str | None) -> tuple[Placed, list[str]]:
    """Check TP/PP/DP/EP against the model and hardware, place the ranks and pick the launcher.

    Returns:
        The placement and, for a co-located accelerator plan (``role`` ``None``), the idle-devices warning.

    Raises:
        ConfigError: see :func:`~ascendflow.compiler.placement.topology.check_parallel`,
            :func:`~ascendflow.compiler.placement.topology.check_mla_heads` and
            :func:`~ascendflow.compiler.placement.nodes.place`.
    """
    hw, par = spec.hardware, spec.parallel
    check_parallel(par, hw, arch)
    check_mla_heads(par, hw, arch, rules)
    launcher, nodes = place(par, hw, rules, release)
    idle = None
    if role is None and platform_for(hw.kind).warns_idle_devices:
        idle = idle_warning([len(n.devices) for n in nodes], hw.devices_per_node, par.tensor_parallel_size,
                            par.pipeline_parallel_size, par.data_parallel_size)
    return Placed(launcher, nodes), [idle] if idle else []
