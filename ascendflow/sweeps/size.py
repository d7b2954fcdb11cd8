"""The size of a sweep, bounded before any job: ``-m engine.max_num_seqs='range(1,1000000000)'`` is one line.

Hydra's basic sweeper lists every job (the product of the swept values) before the first runs, so a typed size that
big filled memory for minutes; an Optuna sweep runs ``hydra.sweeper.n_trials`` jobs. Both are bounded by
:data:`~ascendflow.schema.bounds.MAX_SWEEP_JOBS`, counted without listing them (``range()`` by arithmetic).
"""

from __future__ import annotations

import math
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ascendflow.schema.bounds import MAX_SWEEP_JOBS
from ascendflow.schema.errors import ConfigError


def _values(sweep: Any) -> int | None:
    """How many values a parsed sweep override takes: a choice list's length, a ``range()``'s count by arithmetic;
    ``None`` for an interval (Optuna samples it ``n_trials`` times) or a ``glob()`` (bounded by the group's files)."""
    from hydra.core.override_parser.types import ChoiceSweep, RangeSweep

    if isinstance(sweep, ChoiceSweep):
        return len(sweep.list)
    if isinstance(sweep, RangeSweep) and sweep.start is not None and sweep.stop is not None and sweep.step:
        return max(0, math.ceil((sweep.stop - sweep.start) / sweep.step))
    return None


def sweep_jobs(config: DictConfig) -> tuple[int, str, str]:
    """The number of jobs the sweep would launch, the key that sets it and its value as typed
    (``hydra.sweeper.n_trials`` for an Optuna sweep, else the product of the command line's swept values, keyed by
    the sweep with the most values)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    trials = OmegaConf.select(config, "hydra.sweeper.n_trials", default=None)
    if trials is not None:
        return int(trials), "hydra.sweeper.n_trials", str(trials)
    overrides = list(OmegaConf.select(config, "hydra.overrides.task", default=[]) or [])
    jobs, widest, most, typed = 1, "", 0, ""
    for o in OverridesParser.create().parse_overrides(overrides):
        if not o.is_sweep_override():
            continue
        n = _values(o.value())
        if n is None:
            continue
        jobs *= max(n, 1)
        if n > most:
            widest, most = o.get_key_element().lstrip("+~"), n
            typed = (o.input_line or "").partition("=")[2]
    return jobs, widest, typed


def refuse_oversized_sweep(config: DictConfig) -> None:
    """A sweep launches at most :data:`~ascendflow.schema.bounds.MAX_SWEEP_JOBS` jobs.

    Raises:
        ConfigError: the key that sets the size (its value: the job count), the bound and the fix.
    """
    jobs, key, typed = sweep_jobs(config)
    if jobs <= MAX_SWEEP_JOBS:
        return
    if key == "hydra.sweeper.n_trials":
        raise ConfigError(key, jobs, f"is more than the {MAX_SWEEP_JOBS} jobs one sweep may run; set {key} to "
                                     f"{MAX_SWEEP_JOBS} or less, or split the search into several sweeps")
    raise ConfigError(key or "sweep", typed, f"the swept values make {jobs} jobs, more than the "
                                                      f"{MAX_SWEEP_JOBS} one sweep may run; sweep fewer values (a "
                                                      f"coarser range() step), or split the sweep")
