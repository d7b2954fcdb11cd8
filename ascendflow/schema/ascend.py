"""vllm-ascend option (``conf/ascend/*.yaml``): the plugin's ``additional_config`` and the node environment bundle."""

from __future__ import annotations

from typing import Any

from pydantic import BeforeValidator, Field
from typing_extensions import Annotated

from ascendflow.schema.base import Spec
from ascendflow.schema.bounds import MAX_ENV_INT

#: Environment values as strings: ``+ascend.env.X=1`` arrives from Hydra as an int.
def _env_value(value: object) -> str:
    """One exported string: bools as ``true``/``false``, numbers as text; lists and dicts refused (bash exports one
    string per variable)."""
    if isinstance(value, (list, tuple, dict)):
        raise ValueError("must be a single string or number (a launch script exports one string per variable); "
                         "quote it as one string")
    return str(value).lower() if isinstance(value, bool) else str(value)


EnvValue = Annotated[str, BeforeValidator(_env_value)]


def _drop_nulls(value: object) -> object:
    """A ``null`` entry removes it: ``ascend.env.KEY=null`` (or ``additional_config.other.KEY=null``) takes out what a
    recipe set, since Hydra merges dicts (``ascend.env={}`` keeps the recipe's entries). Hydra's own
    ``~ascend.env.KEY`` deletes it too (docs/configuration.md, "Removing a recipe's entry")."""
    return {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else value


#: ``ascend.env`` / ``pd.<role>.env``: variable names to exported strings, ``null`` removing an entry.
EnvDict = Annotated[dict[str, EnvValue], BeforeValidator(_drop_nulls)]


class AdditionalConfig(Spec):
    """Typed ``--additional-config`` keys of vllm-ascend (``vllm_ascend/ascend_config.py``); ``None`` is not emitted.

    Every emitted key is checked against the key set of the target vllm-ascend version
    (``ascendflow/compiler/rules/data/additional_config_keys.yaml``): vllm-ascend silently ignores unknown keys.

    Attributes:
        enable_shared_expert_dp: run shared experts data-parallel (capture sizes must be multiples of TP).
        multistream_overlap_shared_expert: overlap shared experts on a second stream (one more stream per graph).
        recompute_scheduler_enable: recompute scheduler (prefill/decode disaggregation decode nodes).
        enable_kv_nz: NZ layout for the KV cache.
        other: further keys, passed through as given (validated by name against the version's key set); ``null``
            removes a key (a recipe's).
    """

    enable_shared_expert_dp: bool | None = None
    multistream_overlap_shared_expert: bool | None = None
    recompute_scheduler_enable: bool | None = None
    enable_kv_nz: bool | None = None
    other: Annotated[dict[str, Any], BeforeValidator(_drop_nulls)] = Field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The keys to emit (typed ones that are set, then ``other``)."""
        typed = {k: v for k, v in self.model_dump(exclude={"other"}).items() if v is not None}
        return {**typed, **self.other}


class AscendSpec(Spec):
    """vllm-ascend settings: ``additional_config`` and the environment bundle of every node
    (``shared/reference/vllm_ascend.md`` §6).

    Attributes:
        name: option name.
        additional_config: typed ``--additional-config`` keys.
        hccl_op_expansion_mode_aiv: ``HCCL_OP_EXPANSION_MODE=AIV`` (nearly every recipe; changes the stream budget).
        hccl_buffsize_mb: ``HCCL_BUFFSIZE`` in MB per communicator (200–2560; MoE/EP needs more).
        omp_num_threads: ``OMP_NUM_THREADS`` (1–10 in recipes).
        hccl_connect_timeout_s / hccl_exec_timeout_s: ``HCCL_CONNECT_TIMEOUT`` / ``HCCL_EXEC_TIMEOUT`` (120–600 s).
        enable_sequence_parallelism: vLLM's sequence-parallel pass (capture sizes must be multiples of TP).
        env: further environment variables for every node (``ASCEND_LAUNCH_BLOCKING=1`` is refused with graphs).
            Names must be valid for bash and MLflow (``ascendflow.schema.secrets.ENV_NAME``). Values of secret-looking
            names (``*_TOKEN``, ``*_KEY``, ``*PASSWORD*``..., ``ascendflow.schema.secret_names.SECRET_NAME``) and of
            names in ``secret_env`` are never written: plans and launch scripts reference ``${NAME}``, records show ``***``.
            ``null`` removes an entry (a recipe's): ``ascend.env.KEY=null``, or Hydra's ``~ascend.env.KEY``.
        secret_env: further names of ``env`` (or of the launch environment) to treat as secret.
    """

    name: str = "default"
    additional_config: AdditionalConfig = Field(default_factory=AdditionalConfig)
    hccl_op_expansion_mode_aiv: bool = True
    hccl_buffsize_mb: int = Field(default=200, ge=1, le=MAX_ENV_INT)
    omp_num_threads: int = Field(default=10, ge=1, le=MAX_ENV_INT)
    hccl_connect_timeout_s: int = Field(default=120, ge=1, le=MAX_ENV_INT)
    hccl_exec_timeout_s: int = Field(default=300, ge=1, le=MAX_ENV_INT)
    enable_sequence_parallelism: bool = False
    env: EnvDict = Field(default_factory=dict)
    secret_env: list[str] = Field(default_factory=list)
