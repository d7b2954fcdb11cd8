"""Secret values given on the command line never reach the terminal through a log line.

Hydra's launchers log every job's overrides before the job starts (``hydra/_internal/core_plugins/basic_launcher.py``
``launch``: ``#0 : +ascend.env.HF_TOKEN=hf_... engine.seed=0``; the Ray and submitit launchers the same), so a secret
passed as an override would be echoed in clear although every file and MLflow value is masked
(:mod:`ascendflow.schema.secrets`). :func:`mask_log_records` installs a log-record factory that replaces those values
with :data:`~ascendflow.schema.secrets.MASK` in every record of this process; a factory (not a handler filter)
survives the ``logging.config.dictConfig`` Hydra applies when it configures its loggers.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from ascendflow.schema.secrets import MIN_TEXT_MASK_CHARS, is_secret, mask_text, scalar_leaves

ENV_KEY = "ascend.env"
MARKED_KEY = "ascend.secret_env"


def _leaves(value: Any) -> list[str]:
    """Every scalar inside an override's parsed value as text: a ``choice``/``a,b`` sweep's choices, a list, a dict's
    values (:func:`~ascendflow.schema.secrets.scalar_leaves`); range/interval/glob sweeps give none (numbers or key
    patterns, not values given)."""
    from hydra.core.override_parser.types import ChoiceSweep, Sweep

    if isinstance(value, ChoiceSweep):
        return scalar_leaves(value.list)
    return [] if isinstance(value, Sweep) else scalar_leaves(value)


def override_secrets(overrides: Iterable[str]) -> list[str]:
    """Secret values among command-line overrides: every value of ``ascend.env.NAME=...`` whose ``NAME`` is secret
    (:func:`ascendflow.schema.secrets.is_secret`, with names listed by an ``ascend.secret_env=[...]`` override), the
    secret entries of an ``ascend.env={...}`` dict, and the raw text after ``=`` of those overrides (as a launcher
    prints it: a sweep's ``a,b`` or a quoted value). Overrides Hydra cannot parse give nothing here (Hydra refuses
    them before any job is logged).

    Returns:
        the values as text, in the order given (duplicates kept; :func:`mask_log_records` masks each once).
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    overrides = [o for o in overrides if "=" in o and not o.startswith("-")]
    parser = OverridesParser.create()
    parsed = []
    for text in overrides:
        try:
            parsed.append((text, parser.parse_override(text)))
        except (HydraException, ValueError):
            continue
    marked = [leaf for _, o in parsed if o.key_or_group == MARKED_KEY for leaf in _leaves(o.value())]
    found: list[str] = []
    for text, o in parsed:
        key, value = o.key_or_group, o.value()
        if key.startswith(ENV_KEY + ".") and is_secret(key[len(ENV_KEY) + 1:], marked):
            found += [text.split("=", 1)[1], *_leaves(value)]
        elif key == ENV_KEY and isinstance(value, dict):
            found += [leaf for name, v in value.items() if is_secret(str(name), marked) for leaf in _leaves(v)]
    return found


def mask_log_records(values: Iterable[str]) -> None:
    """From now on, every log record of this process whose message contains one of ``values`` (of at least
    :data:`~ascendflow.schema.secrets.MIN_TEXT_MASK_CHARS` characters) carries the masked message instead (its
    arguments merged in first). Does nothing when there is no such value."""
    secrets = sorted({v for v in values if len(v) >= MIN_TEXT_MASK_CHARS}, key=len, reverse=True)
    if not secrets:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a malformed record: left for logging to report as it would
            return record
        if any(s in message for s in secrets):
            record.msg, record.args = mask_text(message, secrets), None
        return record

    logging.setLogRecordFactory(factory)
