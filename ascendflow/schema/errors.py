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


def format_validation_error(exc: Any, prefix: str = "", model: Any = None) -> ConfigError:
    """Turn the first error of a pydantic ``ValidationError`` into a :class:`ConfigError`.

    Args:
        exc: a ``pydantic.ValidationError``.
        prefix: dotted prefix to put before the error location (e.g. ``"engine"``).
        model: the pydantic model validated; a list- or tuple-typed field's fix then shows an example of its own
            element type (``'search.tensor_parallel_sizes=[1,2,4]'``), else a generic one.

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
    elif err["type"] in _SEQUENCE_TYPES:
        example = _list_example(model, err["loc"]) if model is not None else "[a,b]"
        rule = (f"{rule}; give a list in Hydra's syntax, quoted for the shell: '{key}={example}' "
                f"(one value: '{key}=[{example[1:].split(',')[0].rstrip(']')}]')")
    elif (fix := _FIXES.get(err["type"])) is not None:
        ctx = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in (err.get("ctx") or {}).items()}
        rule = f"{rule}; {fix.format(key=key, **ctx)}"
    return ConfigError(key or "<root>", value, rule)


#: pydantic error types of a value that is not a sequence where the field is a list, tuple or set (``'abc'`` where
#: ``tuple[int, ...]`` is declared: pydantic 2 "Input should be a valid tuple").
_SEQUENCE_TYPES = {"tuple_type", "list_type", "set_type", "frozen_set_type"}


def _list_example(model: Any, loc: tuple) -> str:
    """A Hydra list of the element type of the field at ``loc`` of pydantic ``model`` (``[1,2,4]`` for integers)."""
    import typing

    annotation: Any = model
    for part in loc:
        fields = getattr(annotation, "model_fields", None)
        if not fields or part not in fields:
            return "[a,b]"
        annotation = fields[part].annotation
        while typing.get_origin(annotation) is typing.Union:  # Optional[...]: the non-None member
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    element = next((a for a in typing.get_args(annotation) if a is not Ellipsis), None)
    while typing.get_origin(element) is typing.Annotated:
        element = typing.get_args(element)[0]
    if typing.get_origin(element) is typing.Literal:
        return "[" + ",".join(str(v) for v in typing.get_args(element)[:2]) + "]"
    return {bool: "[false,true]", int: "[1,2,4]", float: "[0.5,1.0]"}.get(element, "[a,b]")


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
