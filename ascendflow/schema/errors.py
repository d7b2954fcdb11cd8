"""The one error type for bad input: a config key, the value given and the rule it broke."""

from __future__ import annotations

from typing import Any

from ascendflow.schema.secret_names import MASK, is_secret


class ConfigError(ValueError):
    """A configuration value breaks a rule.

    Rendered as one line, ``<dotted.key>=<value>: <rule>``, so the command line can print it without a traceback.

    Args:
        key: dotted config key, e.g. ``parallel.tensor_parallel_size``.
        value: the value that was given.
        rule: what the value must satisfy, ideally with the nearest fix.
    """

    def __init__(self, key: str, value: Any, rule: str) -> None:
        self.key = key
        self.value = value
        self.rule = rule
        super().__init__(f"{key}={value!r}: {rule}")


def format_validation_error(exc: Any, prefix: str = "") -> ConfigError:
    """Turn the first error of a pydantic ``ValidationError`` into a :class:`ConfigError`.

    Args:
        exc: a ``pydantic.ValidationError``.
        prefix: dotted prefix to put before the error location (e.g. ``"engine"``).

    Returns:
        ConfigError naming the dotted key, the input value and pydantic's message (the rule).
    """
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"])
    key = ".".join(p for p in (prefix, loc) if p)
    value = err.get("input")
    # A validator's ValueError comes back as "Value error, <its message>": the message alone is the rule.
    rule = err["msg"].removeprefix("Value error, ") if err["type"] == "value_error" else err["msg"]
    if len(err["loc"]) >= 2 and err["loc"][-2] == "env":  # never echo a secret environment value
        if is_secret(str(err["loc"][-1])):
            value = MASK
    if err["type"] == "extra_forbidden":
        rule = "unknown key (not part of the schema; check the spelling)"
    elif err["type"] == "missing":
        value = None
        rule = "required key is missing"
    elif (fix := _FIXES.get(err["type"])) is not None:
        ctx = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in (err.get("ctx") or {}).items()}
        rule = f"{rule}; {fix.format(key=key, **ctx)}"
    return ConfigError(key or "<root>", value, rule)


#: The fix appended to pydantic's rule, per pydantic error type (``ctx`` values filled in).
_FIXES = {
    "greater_than": "set {key} above {gt}",
    "greater_than_equal": "set {key} to {ge} or more",
    "less_than": "set {key} below {lt}",
    "less_than_equal": "set {key} to {le} or less",
    "literal_error": "pick one of those",
    "int_parsing": "give a whole number",
    "int_from_float": "give a whole number",
    "float_parsing": "give a number",
    "bool_parsing": "give true or false",
}
