"""Sweeps: what a Hydra multirun may be (:mod:`ascendflow.sweeps.checks`, refused before any job starts) and the Hydra
callback that opens and ends its MLflow parent run (:mod:`ascendflow.sweeps.callback`).

Layer: entry points (with :mod:`ascendflow.app`): it runs jobs; the MLflow records it writes are
:mod:`ascendflow.tracking.sweep`'s.
"""
