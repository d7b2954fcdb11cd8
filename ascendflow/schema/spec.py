"""RunSpec: the whole validated configuration, built from the composed Hydra config."""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import ValidationError

from ascendflow.schema.ascend import AscendSpec
from ascendflow.schema.base import Spec
from ascendflow.schema.engine import EngineSpec
from ascendflow.schema.errors import format_validation_error
from ascendflow.schema.graph import GraphSpec
from ascendflow.schema.hardware import HardwareSpec
from ascendflow.schema.model import ModelSpec
from ascendflow.schema.parallel import ParallelSpec
from ascendflow.schema.pd import PDSpec
from ascendflow.schema.quantization import QuantizationSpec
from ascendflow.schema.run import RunOptions
from ascendflow.schema.search import SearchSpec
from ascendflow.schema.secrets import check_env_names
from ascendflow.schema.slo import SloSpec
from ascendflow.schema.tracking import TrackingSpec
from ascendflow.schema.workload import WorkloadSpec


class RunSpec(Spec):
    """One run: every config group, validated. Frozen; unknown keys anywhere are rejected."""

    hardware: HardwareSpec
    model: ModelSpec
    parallel: ParallelSpec
    quantization: QuantizationSpec
    engine: EngineSpec
    graph: GraphSpec
    ascend: AscendSpec
    workload: WorkloadSpec
    tracking: TrackingSpec
    run: RunOptions
    slo: SloSpec = SloSpec()
    pd: PDSpec = PDSpec()
    search: SearchSpec = SearchSpec()


def load_spec(config: Mapping[str, Any]) -> RunSpec:
    """Validate a resolved config (``OmegaConf.to_container(cfg, resolve=True)``) into a :class:`RunSpec`.

    Args:
        config: plain dict with one key per config group (``hydra`` excluded).

    Returns:
        The frozen RunSpec.

    Raises:
        ConfigError: the first broken rule, as ``<dotted.key>=<value>: <rule>``.
    """
    ascend = config.get("ascend")
    check_env_names(ascend.get("env") if isinstance(ascend, Mapping) else None)
    try:
        return RunSpec.model_validate(dict(config))
    except ValidationError as exc:
        raise format_validation_error(exc, model=RunSpec) from None
