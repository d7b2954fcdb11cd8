"""Calibration from a real node: an engine log beside the plan, recorded in MLflow (``python -m ascendflow.calibrate``).

Parsing: :mod:`ascendflow.runner.engine_facts`; comparison: :mod:`.compare`; recording: :mod:`.record`.
"""
