"""Credentials never reach the terminal: secret override values, URI passwords and API keys are masked in every log
record and every line this process prints.

Hydra's launchers log every job's overrides before the job starts (``hydra/_internal/core_plugins/basic_launcher.py``
``launch``: ``#0 : +ascend.env.HF_TOKEN=hf_... engine.seed=0``; the Ray and submitit launchers the same), so a secret
passed as an override would be echoed in clear although every file and MLflow value is masked
(:mod:`ascendflow.schema.secrets`). :func:`mask_log_records` installs a log-record factory that replaces those values
with :data:`~ascendflow.schema.secrets.MASK` in every record of this process; a factory (not a handler filter)
survives the ``logging.config.dictConfig`` Hydra applies when it configures its loggers.

The same masking (:func:`ascendflow.schema.secrets.mask_credentials`: every URI's userinfo password, and every value in
:data:`KNOWN`) also wraps ``sys.stdout`` and ``sys.stderr`` (:func:`mask_streams`), so a ``print``, a ``rich`` line, a
Hydra error or a traceback that quotes ``postgresql://u:pw@host/db`` shows ``postgresql://u:***@host/db``. Values
found later (a recipe's ``ascend.env`` secrets, the ``run.api_key_env`` key) join :data:`KNOWN` through
:func:`remember`.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Iterable

from ascendflow.schema.secrets import (MIN_TEXT_MASK_CHARS, is_secret, mask_credentials, scalar_leaves,
                                       uri_password)

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


#: Every secret value this process knows of (masked in log records and printed lines once installed).
KNOWN: set[str] = set()


def remember(values: Iterable[str]) -> None:
    """Add secret values (of at least :data:`~ascendflow.schema.secrets.MIN_TEXT_MASK_CHARS` characters) to
    :data:`KNOWN`; masked from then on wherever :func:`mask_log_records` / :func:`mask_streams` are installed."""
    KNOWN.update(v for v in values if v and len(v) >= MIN_TEXT_MASK_CHARS)


def process_secrets(argv: Iterable[str], environ: dict[str, str] | None = None) -> list[str]:
    """The credentials a command line and its environment carry, before any config is composed: secret override
    values (:func:`override_secrets`), the password of every URI among the overrides and of ``$MLFLOW_TRACKING_URI``,
    and the value of the variable an override ``run.api_key_env=NAME`` names."""
    environ = dict(os.environ if environ is None else environ)
    argv = list(argv)
    found = override_secrets(argv)
    found += [pw for a in argv if (pw := uri_password(a))]
    if pw := uri_password(environ.get("MLFLOW_TRACKING_URI")):
        found.append(pw)
    for a in argv:
        key, _, value = a.partition("=")
        if key.lstrip("+~") == "run.api_key_env" and environ.get(value.strip("'\"")):
            found.append(environ[value.strip("'\"")])
    return found


def mask(text: str) -> str:
    """``text`` with every URI password and every :data:`KNOWN` value masked."""
    return mask_credentials(text, KNOWN)


def mask_log_records(values: Iterable[str] = ()) -> None:
    """From now on, every log record of this process whose message holds a URI password or one of ``values`` (and
    of :data:`KNOWN`, which ``values`` join) carries the masked message instead (its arguments merged in first).
    Installed once per process; later calls only add values."""
    remember(values)
    if getattr(logging.getLogRecordFactory(), "_ascendflow_masking", False):
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a malformed record: left for logging to report as it would
            return record
        masked = mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        return record

    factory._ascendflow_masking = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


class MaskedStream:
    """A text stream that masks credentials (:func:`mask`) in everything written, passing the rest through
    (``isatty``, ``fileno``, ``encoding``, ``flush``...) to the stream it wraps."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(mask(text) if isinstance(text, str) else text)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def mask_streams(values: Iterable[str] = ()) -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` in :class:`MaskedStream` (once) and :func:`remember` ``values``."""
    remember(values)
    if not isinstance(sys.stdout, MaskedStream):
        sys.stdout = MaskedStream(sys.stdout)
    if not isinstance(sys.stderr, MaskedStream):
        sys.stderr = MaskedStream(sys.stderr)


def uri_credentials(config_uri: str | None, environ: dict[str, str] | None = None) -> dict[str, str]:
    """``{where: password}`` of the tracking URIs a job uses: ``tracking.tracking_uri`` and ``$MLFLOW_TRACKING_URI``
    (:func:`~ascendflow.schema.secrets.uri_password`); empty when neither carries one."""
    environ = dict(os.environ if environ is None else environ)
    found = {"tracking.tracking_uri": uri_password(config_uri),
             "MLFLOW_TRACKING_URI": uri_password(environ.get("MLFLOW_TRACKING_URI"))}
    return {k: v for k, v in found.items() if v}
