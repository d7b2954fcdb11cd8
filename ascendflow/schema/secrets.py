"""Secret environment values: which names are secret, how they are masked, and which names are valid (pure).

A value is secret when its variable's name looks secret (:data:`~ascendflow.schema.secret_names.SECRET_NAME`) or
the user lists the name in ``ascend.secret_env``. Secret values are never written: plans and launch scripts hold
``${NAME}`` (the launch script refuses to start while ``NAME`` is unset), and MLflow params, tags and every file of
the run directory show :data:`~ascendflow.schema.secret_names.MASK` instead.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from ascendflow.schema.errors import ConfigError
from ascendflow.schema.secret_names import MASK, is_secret

#: Environment names bash exports and MLflow accepts as a param key part (mlflow/utils/validation.py
#: ``_validate_param_name``: at most 250 characters in all, with the ``ascend.env.`` prefix).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
#: Shortest value masked inside free text (shorter ones would mask unrelated text; their keys are still masked).
MIN_TEXT_MASK_CHARS = 4


def check_env_names(env: Mapping[str, object] | None, key: str = "ascend.env") -> None:
    """Refuse environment names that bash cannot export or MLflow cannot record.

    Raises:
        ConfigError: the first bad name (the value is not shown: it may be a secret).
    """
    for name in env or {}:
        if not ENV_NAME.fullmatch(str(name)):
            shown = str(name) if len(str(name)) <= 60 else str(name)[:60] + f"…({len(str(name))} characters)"
            raise ConfigError(key, shown, "is not a valid environment variable name (letters, digits and _, not "
                                          "starting with a digit, at most 128 characters); rename it")


def scalar_leaves(value: object) -> list[str]:
    """Every scalar inside ``value`` as text (a list- or dict-valued entry, refused later, is still masked whole)."""
    if isinstance(value, Mapping):
        return [leaf for v in value.values() for leaf in scalar_leaves(v)]
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in scalar_leaves(v)]
    return [] if value is None else [str(value)]


def secret_values(env: Mapping[str, object] | None, marked: Iterable[str] = ()) -> dict[str, str]:
    """``{name: value}`` of the secret entries of ``env`` (``NAME[i]`` for each scalar of a list/dict value)."""
    found: dict[str, str] = {}
    for k, v in (env or {}).items():
        if not is_secret(str(k), marked):
            continue
        leaves = scalar_leaves(v)
        found.update({str(k): leaves[0]} if len(leaves) == 1 and not isinstance(v, (list, tuple, Mapping))
                     else {f"{k}[{i}]": leaf for i, leaf in enumerate(leaves)})
    return found


def env_ref(name: str) -> str:
    """The launch-time reference written instead of a secret value: ``${NAME}``."""
    return f"${{{name}}}"


def mask_text(text: str, values: Iterable[str]) -> str:
    """``text`` with every secret value of at least :data:`MIN_TEXT_MASK_CHARS` characters replaced by
    :data:`MASK` (longest first, so a value containing another is masked whole)."""
    for value in sorted({v for v in values if len(v) >= MIN_TEXT_MASK_CHARS}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def mask_env_config(config: dict, marked: Iterable[str] = ()) -> dict:
    """A copy of a config dict (``{"ascend": {"env": ...}}``) whose secret ``ascend.env`` values are :data:`MASK`."""
    ascend = config.get("ascend")
    if not isinstance(ascend, Mapping) or not isinstance(ascend.get("env"), Mapping):
        return config
    env = {k: (MASK if is_secret(str(k), marked) else v) for k, v in ascend["env"].items()}
    return {**config, "ascend": {**ascend, "env": env}}


#: A URI's userinfo password: ``scheme://user:PASSWORD@host`` (RFC 3986 §3.2.1; the ``user:password`` form is
#: deprecated there but SQLAlchemy, requests and MLflow's REST client all read it). Group 1 keeps ``scheme://user:``.
URI_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@'\"]*:)([^\s/?#@'\"]+)@")


def uri_password(uri: str | None) -> str | None:
    """The password in ``uri``'s userinfo (``postgresql://u:pw@host/db`` → ``pw``), or ``None``."""
    found = URI_PASSWORD.search(uri or "")
    return found.group(2) if found else None


def mask_uris(text: str) -> str:
    """``text`` with the password of every URI in it replaced by :data:`MASK`
    (``http://admin:hunter2@host:5000`` → ``http://admin:***@host:5000``)."""
    return URI_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}@", text)


def mask_credentials(text: str, values: Iterable[str] = ()) -> str:
    """The one masking of credentials: every URI password (:func:`mask_uris`) and every known secret value
    (:func:`mask_text`: ``ascend.env`` secrets, the ``run.api_key_env`` key, passwords named elsewhere)."""
    return mask_uris(mask_text(text, values))
