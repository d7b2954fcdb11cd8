"""The Hydra config turned into the job's typed inputs, once: :func:`job_inputs`.

A bad config must still be recorded: the MLflow run is created (tracking settings), its failure scored (run options)
and secrets masked before the config is validated as a whole. So the sections the recording needs are read on their
own, with defaults when they are bad too, and the spec's own error is kept for the job to raise inside its tracked run
(one line, exit 2, the run FAILED).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ascendflow.schema import ConfigError, RunSpec, load_spec
from ascendflow.schema.parallel import ParallelSpec
from ascendflow.schema.run import RunOptions
from ascendflow.schema.secrets import secret_values, uri_password
from ascendflow.schema.tracking import TrackingSpec
from ascendflow.secret_logging import remember, uri_credentials


@dataclass(frozen=True)
class JobInputs:
    """The job's typed inputs.

    Attributes:
        tracking: the tracking section alone (defaults when it is bad: ``load_spec`` reports it).
        run: the run options: the spec's, else the run section alone, else defaults (the failed-job objective).
        secrets: secret values, ``{name: value}``: secret ``ascend.env`` entries (:mod:`ascendflow.schema.secrets`)
            the API key named by ``run.api_key_env`` when it is set in the environment, and the password of a
            ``tracking.tracking_uri`` (:func:`ascendflow.secret_logging.uri_credentials`) and of a ``run.server_url``
            (refused: credentials go in the variable ``run.api_key_env`` names).
        marked: the ``ascend.secret_env`` names.
        layout: the effective parallel layout's name (:func:`layout_name`), ``None`` when the parallel section is bad.
        raw: the resolved config (``None`` when it does not resolve).
        spec: the validated spec, ``None`` when the config is bad.
        error: why ``spec`` is ``None``: a :class:`ConfigError` (or an unexpected error of validation).
    """

    tracking: TrackingSpec
    run: RunOptions
    secrets: dict[str, str]
    marked: list[str]
    layout: str | None
    raw: dict[str, Any] | None
    spec: RunSpec | None
    error: Exception | None

    def valid_spec(self) -> RunSpec:
        """The spec.

        Raises:
            ConfigError: the config's first broken rule (or the unexpected error validation raised).
        """
        if self.spec is None:
            raise self.error
        return self.spec


def job_inputs(cfg: DictConfig) -> JobInputs:
    """Read the job's composed config once (never raises: a bad config is kept in ``error``)."""
    raw, spec, error = None, None, None
    try:
        raw = _resolved(cfg)
        parsed = load_spec(raw)
        check_architecture_overrides(_task_overrides())
        spec = parsed
    except Exception as exc:  # recorded FAILED by the job, inside its tracked run
        error = exc
    secrets, marked = _secrets(cfg)
    return JobInputs(
        tracking=_section(cfg, "tracking", TrackingSpec) or TrackingSpec(),
        run=spec.run if spec is not None else _section(cfg, "run", RunOptions) or RunOptions(),
        secrets=secrets, marked=marked,
        layout=layout_name(spec.parallel if spec is not None else _section(cfg, "parallel", ParallelSpec)),
        raw=raw, spec=spec, error=error)


#: ``config.json`` keys vLLM derives the maximum length from (``vllm/config/model.py`` ``_get_and_verify_max_len``
#: and ``derive_max_model_len_and_key``, vLLM 0.32.0) and the RoPE dicts that scale it.
LENGTH_KEYS = frozenset({"max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                         "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len",
                         "rope_scaling", "rope_parameters", "original_max_position_embeddings"})


def check_architecture_overrides(overrides: list[str]) -> None:
    """Refuse a command-line change of a length key under ``model.architecture`` (``model.architecture.
    max_position_embeddings=131072``, ``+model.architecture.rope_scaling=...``).

    The inline architecture stands for the checkpoint's ``config.json``; vLLM reads that file at start, not
    ascendflow's values, and refuses a ``--max-model-len`` (every script passes one) above the length it derives from
    it (``_get_and_verify_max_len`` raises ``ValueError``). A plan made longer this way is refused at start; the
    overrides vLLM does read are ``--hf-overrides``, i.e. ``model.hf_overrides``.

    Raises:
        ConfigError: the key, its value and the ``model.hf_overrides`` to write instead.
    """
    for item in overrides:
        key, _, value = item.lstrip("+~").partition("=")
        field = key.removeprefix("model.architecture.")
        if field != key and field.split(".")[0] in LENGTH_KEYS:
            raise ConfigError(key, value, f"vLLM reads the checkpoint's config.json at start, not model.architecture, "
                                          f"and refuses a --max-model-len beyond it (vllm/config/model.py "
                                          f"_get_and_verify_max_len); set model.hf_overrides={{{field}: {value}}} "
                                          f"instead (written as --hf-overrides)")


def _task_overrides() -> list[str]:
    """The job's command-line overrides (Hydra's ``overrides.task``); none outside a Hydra job."""
    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def layout_name(parallel: ParallelSpec | None) -> str | None:
    """The parallel layout in a run name: ``single`` on one device, else ``tp<T>`` with ``pp<P>`` and ``dp<D>`` when
    above 1, ``ep`` with expert parallelism and ``<N>nodes`` over several nodes, joined by ``-`` (``tp16-ep-2nodes``,
    ``tp8-pp2-2nodes``, ``tp8-dp2-ep-2nodes``) — from the effective values, whatever ``parallel`` option or recipe set
    them."""
    if parallel is None:
        return None
    if parallel.world_size == 1 and parallel.nodes == 1:
        return "single"
    parts = [f"tp{parallel.tensor_parallel_size}"]
    parts += [f"pp{parallel.pipeline_parallel_size}"] if parallel.pipeline_parallel_size > 1 else []
    parts += [f"dp{parallel.data_parallel_size}"] if parallel.data_parallel_size > 1 else []
    parts += ["ep"] if parallel.enable_expert_parallel else []
    parts += [f"{parallel.nodes}nodes"] if parallel.nodes > 1 else []
    return "-".join(parts)


def _resolved(cfg: DictConfig) -> dict[str, Any]:
    """The config resolved to plain data.

    Raises:
        ConfigError: a value that is missing (``???``) or does not resolve, named by its key.
    """
    try:
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "?"
        raise ConfigError(key, "???", f"is missing or cannot be resolved; set it on the command line "
                                      f"({key}=...)") from None


def _section(cfg: DictConfig, key: str, model: type) -> Any:
    """One config section validated on its own, ``None`` when it is bad (``load_spec`` reports why)."""
    try:
        return model.model_validate(OmegaConf.to_container(cfg[key], resolve=True))
    except Exception:
        return None


def _secrets(cfg: DictConfig) -> tuple[dict[str, str], list[str]]:
    """Secret values of this job ``{name: value}`` and the names marked secret (see :class:`JobInputs`)."""
    env = OmegaConf.select(cfg, "ascend.env", default=None)
    marked = OmegaConf.select(cfg, "ascend.secret_env", default=None)
    try:
        env = OmegaConf.to_container(env, resolve=True) if env is not None else {}
        marked = [str(m) for m in OmegaConf.to_container(marked, resolve=True)] if marked is not None else []
    except Exception:  # unresolvable values are reported by load_spec
        env, marked = {}, []
    values = secret_values(env if isinstance(env, dict) else {}, marked)
    key_env = OmegaConf.select(cfg, "run.api_key_env", default=None)
    if isinstance(key_env, str) and os.environ.get(key_env):
        values[key_env] = os.environ[key_env]
    values.update(uri_credentials(OmegaConf.select(cfg, "tracking.tracking_uri", default=None)))
    server_url = OmegaConf.select(cfg, "run.server_url", default=None)  # refused with credentials, never echoed
    if isinstance(server_url, str) and (password := uri_password(server_url)):
        values["run.server_url"] = password
    remember(values.values())  # masked in every line printed from now on (ascendflow.secret_logging)
    return values, marked
