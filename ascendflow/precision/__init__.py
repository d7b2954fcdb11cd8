"""Precision report: a candidate engine (the run's config) against a reference engine, token by token.

``python -m ascendflow.precision [overrides]`` (config ``conf/precision_report.yaml``). See
``docs/w8a8_precision.md`` for the metrics, thresholds and the figures measured here.
"""
