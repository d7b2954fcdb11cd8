"""What a sweep may be, checked in the launching process before any job starts (exit 2, one line each).

Called by :class:`ascendflow.sweeps.callback.MlflowSweepCallback` (the whole sweep) and by :mod:`ascendflow.app`
(a job of a parallel launcher).
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from ascendflow.schema.errors import ConfigError
from ascendflow.tracking.sweep import swept_keys


def refuse_parallel_engines(launcher: DictConfig | None, mode: str) -> None:
    """Jobs that start engines on this machine share its devices: a parallel launcher may only plan.

    Ray launchers are not refused: each job claims a whole node's devices (``ascendflow/tracking/cluster.py``
    ``ray_remote``), so Ray starts one engine per node at a time (docs/cluster.md).

    Raises:
        ConfigError: ``hydra/launcher=joblib`` with ``n_jobs != 1`` and a job that would serve or run offline.
    """
    target = str(OmegaConf.select(launcher, "_target_", default="")) if launcher is not None else ""
    n_jobs = OmegaConf.select(launcher, "n_jobs", default=1) if launcher is not None else 1
    if "joblib" in target and n_jobs != 1 and mode in ("serve", "offline", "capacity"):
        raise ConfigError("hydra.launcher.n_jobs", n_jobs,
                          "parallel jobs would start engines on the same devices at once; use run.mode=plan for "
                          "parallel sweeps, or hydra.launcher.n_jobs=1")


def hardware_here(config: DictConfig) -> bool:
    """Whether the sweep's hardware option is on this machine (``auto`` jobs then serve)."""
    from ascendflow.platforms import PLATFORMS
    from ascendflow.runner.detect import hardware_present
    from ascendflow.schema.hardware import HardwareSpec

    try:
        return hardware_present(HardwareSpec.model_validate(OmegaConf.to_container(config.hardware, resolve=True)))
    except Exception:  # an invalid hardware option fails in every job with its own message
        platform = PLATFORMS.get(OmegaConf.select(config, "hardware.kind", default="cpu"))
        return platform is not None and platform.always_present


_ABSENT = object()


def refuse_bad_search_space(config: DictConfig) -> None:
    """A sweeper's search space must name existing config keys; a capacity search must vary at least one server
    knob and never the workload or the SLO (the search sets the load itself and holds the rest fixed).

    Raises:
        ConfigError: a swept key (command line or ``hydra.sweeper.params``) that is not in the config (Hydra would
            fail the first job with a multi-line error), a swept value the schema refuses, an empty capacity search space, or a capacity search over
            ``workload.*``/``slo.*``.
    """
    choices = OmegaConf.select(config, "hydra.runtime.choices", default={}) or {}
    refuse_bad_group_options(config, choices)
    refuse_bad_swept_values(config, choices)
    added = {o.split("=", 1)[0].lstrip("+") for o in OmegaConf.select(config, "hydra.overrides.task", default=[]) or []
             if o.startswith("+")}
    for name in swept_keys(config):
        if name in added or name in choices or name.split("/")[0] in choices:
            continue  # an added key (explicit) or a config group option (graph=eager,compiled)
        if OmegaConf.select(config, name, default=_ABSENT) is _ABSENT:
            given = {o.split("=", 1)[0].lstrip("+~"): o.split("=", 1)[-1]
                     for o in OmegaConf.select(config, "hydra.overrides.task", default=[]) or []}
            params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
            raise ConfigError(name, given.get(name, params.get(name)), "is not a config key, so no job could use it (check the spelling; "
                                               "`python -m ascendflow --cfg job` lists the keys)")
    if OmegaConf.select(config, "run.mode", default="auto") != "capacity":
        return
    keys = swept_keys(config)
    if not keys:
        raise ConfigError("hydra.sweeper.params", "{}", "a capacity sweep needs at least one server knob to vary; "
                                                        "sweep one on the command line, e.g. engine.max_num_seqs=4,16")
    held = [k for k in keys if k.split(".")[0] in ("workload", "slo")]
    if held:
        raise ConfigError(held[0], OmegaConf.select(config, held[0], default=None),
                          "a capacity search varies the load itself and holds the workload and SLO fixed; sweep "
                          "server knobs (engine.*, graph, parallel.*, quantization) and run one sweep per workload")


def refuse_bad_group_options(config: DictConfig, choices: Any) -> None:
    """Every option a command-line sweep gives a config group (``model=smolm2,smollm2_135m``) must exist: Hydra
    would fail the first job with its 25-line block and leave the other jobs unrun. The options are those of Hydra's
    config repository (the ``conf/`` search path and plugins), as ``refuse_bad_overrides`` lists them for a single
    run.

    Raises:
        ConfigError: the group, the option that does not exist, and the options there are.
    """
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not GlobalHydra.instance().is_initialized():
        return
    loader = GlobalHydra.instance().config_loader()
    overrides = list(OmegaConf.select(config, "hydra.overrides.task", default=[]) or [])
    for o in OverridesParser.create().parse_overrides(overrides):
        group = o.get_key_element().lstrip("+~")
        if not o.is_sweep_override() or group not in choices or "@" in group:
            continue
        known = set(loader.get_group_options(group))
        if not known:
            continue
        for option in o.sweep_string_iterator():
            if option not in known:
                raise ConfigError(group, option, f"is not an option of the '{group}' group, so no job could use it; "
                                                 f"pick from: {', '.join(sorted(known))}")


def refuse_bad_shared_values(config: DictConfig) -> None:
    """Validate what every job of the sweep shares before any job starts: the spec (:func:`ascendflow.schema.load_spec`)
    of the sweep's config and, for a capacity sweep, its SLO against the workload
    (:func:`ascendflow.capacity.search.load_range`). A broken value that a sweep override replaces is left to the
    job (its swept values are validated there).

    Raises:
        ConfigError: a value outside the swept keys breaks a rule (e.g. ``slo.p99_ttft_ms=0``).
    """
    from ascendflow.capacity.search import load_range
    from ascendflow.schema import load_spec

    swept = set(swept_keys(config))
    try:
        raw = OmegaConf.to_container(OmegaConf.masked_copy(config, [k for k in config if k != "hydra"]), resolve=True,
                                     throw_on_missing=True)
    except Exception:  # an interpolation only a job can resolve: the jobs validate it
        return
    try:
        spec = load_spec(raw)
        if spec.run.mode == "capacity":
            load_range(spec.slo, spec.workload)
    except ConfigError as exc:
        if not any(exc.key == k or exc.key.startswith(f"{k}.") for k in swept):
            raise


_ABSENT = object()


def refuse_bad_swept_values(config: DictConfig, choices: Any = ()) -> None:
    """Every value a command-line sweep gives a key (``engine.max_num_seqs=4,abc``) must pass the schema on its own:
    the sweep's config with that one value, through :func:`ascendflow.schema.load_spec`. A value that can never be
    valid (a type, a bound) is refused before job 0, instead of failing its job after the others have served (new-user
    trial of 2026-12-03: job 0 served for 2 minutes, then job 1 failed and the sweep exited 0). A value the compiler
    refuses for this model (``engine.max_model_len=9000``) is a result, left to its job (a FAILED child). Group options
    are :func:`refuse_bad_group_options`'s; errors that name another key (a rule across keys) are left to the jobs.

    Raises:
        ConfigError: the swept key and value, the rule it breaks, and that no job could use it.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from ascendflow.schema import load_spec

    try:
        base = OmegaConf.masked_copy(config, [k for k in config if k != "hydra"])
    except Exception:  # noqa: BLE001 - nothing to check against: the jobs validate their values
        return
    overrides = list(OmegaConf.select(config, "hydra.overrides.task", default=[]) or [])
    for o in OverridesParser.create().parse_overrides(overrides):
        key = o.get_key_element().lstrip("+~")
        if not o.is_sweep_override() or key in choices or "@" in key or key.startswith("hydra."):
            continue
        if OmegaConf.select(base, key, default=_ABSENT) is _ABSENT:  # an unknown key: refuse_bad_search_space's
            continue
        try:
            values = list(o.sweep_iterator())  # parsed as the job gets them (``-1`` an int, ``{A: 1}`` a dict)
        except Exception:  # noqa: BLE001 - an Optuna interval or a glob: its sweeper draws the values
            continue
        for value in values:
            try:
                one = OmegaConf.create({})
                OmegaConf.update(one, key, value, force_add=True)
                raw = OmegaConf.to_container(OmegaConf.merge(base, one), resolve=True, throw_on_missing=True)
            except Exception:  # noqa: BLE001 - an interpolation only a job can resolve
                break
            try:
                load_spec(raw)
            except ConfigError as exc:
                if exc.key == key or exc.key.startswith(f"{key}."):
                    raise ConfigError(key, value, f"{exc.rule} (a swept value no job could use: fix or drop it; "
                                                  f"nothing was run)") from None


def refuse_search_without_measurements(config: DictConfig, engines: bool) -> None:
    """An Optuna search needs a measured objective; plan-only jobs return none (Optuna then fails after the last
    trial: "No trials are completed yet").

    Raises:
        ConfigError: an Optuna sweeper with jobs that only plan (``run.mode=plan``, or ``auto`` on hardware that is
            not on this machine).
    """
    sweeper = str(OmegaConf.select(config, "hydra.sweeper._target_", default="") or "")
    if "optuna" not in sweeper.lower() or engines:
        return
    mode = OmegaConf.select(config, "run.mode", default="auto")
    raise ConfigError("run.mode", mode, f"an Optuna search needs measured jobs, and these only write plans "
                                        f"(hardware.kind={OmegaConf.select(config, 'hardware.kind')}); sweep them "
                                        f"with the basic sweeper (-m, without a sweep= preset), or serve on "
                                        f"hardware that is here")


def refuse_bad_measure_top(config: DictConfig, tracking_enabled: bool) -> int | None:
    """``slo.measure_top`` of a multirun: the number of capacity configs to measure, or ``None`` (measure all).

    Raises:
        ConfigError: not an integer ≥ 1, set outside ``run.mode=capacity``, with an Optuna sweeper (it picks its
            own trials), or with tracking off (pruned configs are recorded as MLflow runs).
    """
    top = OmegaConf.select(config, "slo.measure_top", default=None)
    if top is None:
        return None
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ConfigError("slo.measure_top", top, "must be an integer ≥ 1 (configs to measure) or null (measure "
                                                  "all); e.g. slo.measure_top=2")
    if OmegaConf.select(config, "run.mode", default="auto") != "capacity":
        raise ConfigError("slo.measure_top", top, f"prunes a capacity sweep, and this is run.mode="
                                                  f"{OmegaConf.select(config, 'run.mode')}; add +sweep=capacity "
                                                  f"(or run.mode=capacity), or drop slo.measure_top")
    if "optuna" in str(OmegaConf.select(config, "hydra.sweeper._target_", default="") or "").lower():
        raise ConfigError("slo.measure_top", top, "prunes a basic-sweeper grid before any job runs, and an Optuna "
                                                  "sweeper picks its own trials; sweep with -m and the basic "
                                                  "sweeper, or drop slo.measure_top")
    if not tracking_enabled:
        raise ConfigError("slo.measure_top", top, "pruned configs are recorded as MLflow runs, and tracking is off; "
                                                  "set tracking.enabled=true or drop slo.measure_top")
    return top
