"""The compiler: ``RunSpec`` + model architecture → :class:`Plan`. Pure: no I/O, no vLLM import.

:func:`compile_plan` (:mod:`.deployment`: co-located plans by :func:`.compile.compile_colocated`, the named passes of
:mod:`.passes`; PD plans per role) is the one entry; the passes use the sub-packages grouped by concern: :mod:`.rules`
(per-release rules and software rows), :mod:`.placement` (parallel topology, nodes, launcher), :mod:`.checks`
(refusals and limits), :mod:`.memory` (weights, KV cache, overheads), :mod:`.graph` (graph capture) and
:mod:`.launch` (engine arguments, environment, launchers, scripts). :mod:`.plan` holds the output types.
"""

from ascendflow.compiler.deployment import compile_plan
from ascendflow.compiler.deployment import deployment_scripts as launch_scripts
from ascendflow.compiler.plan import Plan

__all__ = ["Plan", "compile_plan", "launch_scripts"]
