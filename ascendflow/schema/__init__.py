"""Validated configuration: one pydantic module per config group, :class:`RunSpec` for the whole run."""

from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.spec import RunSpec, load_spec

__all__ = ["ConfigError", "ModelArchitecture", "RunSpec", "load_spec"]
