"""Deployment search (``run.mode=search``): enumerate the layouts a release supports for a model on some nodes,
prune them by symmetry and by the compiler's exact refusals, rank the feasible ones by predicted goodput per device at
an SLO, and write the best as recipes (docs/search.md).

:mod:`.space` enumerates candidates, :mod:`.evaluate` compiles and prices them (cached), :mod:`.rank` orders them
(ties by interval, the Pareto front), :mod:`.output` prints the table, draws the front and writes recipes,
:mod:`.record` writes the MLflow children, :mod:`.run` wires them.

Layer: entry points (beside :mod:`ascendflow.modes`): uses the compiler, the performance model and tracking.
"""
