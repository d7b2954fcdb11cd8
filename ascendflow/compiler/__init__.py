"""The compiler: ``RunSpec`` + model architecture → :class:`Plan`. Pure: no I/O, no vLLM import.

Passes, one module each: :mod:`topology` (parallel checks, placement), :mod:`weights`, :mod:`kv_budget`,
:mod:`graph`, :mod:`launch` (engine args, argv, environment, scripts). :func:`compile_plan` wires them.
"""

from ascendflow.compiler.compile import compile_plan
from ascendflow.compiler.launch import launch_scripts
from ascendflow.compiler.plan import Plan

__all__ = ["Plan", "compile_plan", "launch_scripts"]
