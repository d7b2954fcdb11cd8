"""A ``vllm serve`` command, read with the installed vLLM's own server parser.

Sources: one command string, or shell text (one ``vllm serve`` per node, ``export NAME=VALUE`` lines before it and
``\\`` continuations, as the vllm-ascend tutorials write them): :func:`read_shell`. Files and vllm-ascend CI configs:
:func:`ascendflow.importer.sources.read_source`.

The argv is parsed by ``vllm.entrypoints.launchers.cli_args.make_arg_parser(FlexibleArgumentParser())`` of the
installed vLLM (the pinned one: ``ascendflow/runner/data/vllm_serve_flags.json``), so what vLLM would refuse is
refused here, with vLLM's own message. This module imports vLLM; the compiler never does.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ascendflow.schema.errors import ConfigError

KEY = "command"


@dataclass
class ServeCommand:
    """One parsed ``vllm serve``.

    Attributes:
        argv: the tokens after ``vllm serve`` (model positional included), as given.
        model: the model positional (or ``--model``).
        given: ``{dest: [tokens]}`` of every option the command sets, in order (the flag and its value tokens, as
            typed; ``--flag=value`` kept as one token).
        values: ``{dest: value}`` as vLLM's parser converts them (ints, bools, dicts); config objects vLLM builds
            (``--compilation-config``) as the JSON given.
        env: the environment the command runs with (``export`` lines, CI ``envs``), names to text.
        source: where it came from (``path@commit:line`` or ``command line``).
        name: a short name for the recipe (CI test case name, else derived from the model).
        role: ``prefill`` / ``decode`` for a PD config's command, else empty.
        node: the node it runs on (0 first).
    """

    argv: list[str]
    model: str
    given: dict[str, list[str]]
    values: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    source: str = "command line"
    name: str = ""
    role: str = ""
    node: int = 0

    @property
    def text(self) -> str:
        """The command as one shell line, secret values (``--api-key``) masked."""
        return shlex.join(["vllm", "serve", *mask_secrets(self.argv)]).replace("\n", " ")


#: Flags whose value is a secret: never echoed into a recipe or a report.
SECRET_FLAGS = ("--api-key",)


def mask_secrets(argv: list[str]) -> list[str]:
    """``argv`` with the value of every :data:`SECRET_FLAGS` flag replaced by ``***``."""
    from ascendflow.schema.secret_names import MASK

    out = list(argv)
    for i, token in enumerate(out):
        flag = token.split("=", 1)[0]
        if flag in SECRET_FLAGS:
            if "=" in token:
                out[i] = f"{flag}={MASK}"
            elif i + 1 < len(out):
                out[i + 1] = MASK
    return out


def mask_text(text: str) -> str:
    """``text`` with the value after every :data:`SECRET_FLAGS` flag replaced by ``***`` (a command in one string)."""
    for flag in SECRET_FLAGS:
        text = re.sub(rf"({re.escape(flag)}(?:=|\s+))('[^']*'|\"[^\"]*\"|\S+)", r"\1***", text)
    return text


@lru_cache(maxsize=1)
def serve_parser() -> argparse.ArgumentParser:
    """The installed vLLM's ``vllm serve`` parser (imports vLLM: seconds, once per process)."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))

    def error(message: str) -> None:
        raise parser_error(" ".join(message.split()), parser)

    parser.error = error  # argparse calls self.error(): one line instead of usage + exit 2
    return parser


class FlagError(ConfigError):
    """A flag given without the value it needs: ``--flag: <rule>`` (no value to quote)."""

    def __init__(self, key: str, rule: str) -> None:
        super().__init__(key, None, rule)
        self.args = (f"{key}: {rule}",)


#: The fix for a value vLLM's parser refuses, per the type function argparse names ("invalid <type> value").
#: ``human_readable_int(_or_auto)``: vLLM ``vllm/utils/argparse_utils.py`` (vLLM 0.32.0, the pinned one): digits,
#: or a number with k/m/g/t (×1000) or K/M/G/T (×1024); ``_or_auto`` also takes ``auto`` or ``-1``.
_TYPE_FIXES = {
    "human_readable_int_or_auto": ("an integer such as 32768 or 32k (k = 1000, K = 1024), or auto", "32768"),
    "human_readable_int": ("an integer such as 8192 or 8k (k = 1000, K = 1024)", "8192"),
    "int": ("a whole number such as 8", "8"),
    "float": ("a number such as 0.9", "0.9"),
}


def at_source(error: ConfigError, source: str) -> ConfigError:
    """``error`` with the command it came from (a file line, a CI config's node and rank) before its fix; once."""
    if source == "command line" or f"({source})" in error.rule:
        return error
    if error.key == KEY and error.value == "vllm serve":
        return ConfigError(KEY, source, error.rule)
    rule, sep, fix = error.rule.partition("; fix: ")
    rule = f"{rule} ({source}){sep}{fix}"
    return FlagError(error.key, rule) if isinstance(error, FlagError) else ConfigError(error.key, error.value, rule)


def parser_error(message: str, parser: argparse.ArgumentParser) -> ConfigError:
    """One line for argparse's ``message`` about a ``vllm serve`` argument: the flag (its long spelling), the value,
    vLLM's rule and the fix (before: ``command='vllm serve': vLLM's parser: argument --max-model-len/...: ...``)."""
    found = re.fullmatch(r"argument (\S+): (.*)", message)
    if found is None:
        return ConfigError(KEY, "vllm serve", f"vLLM's parser: {message}; fix: see vllm serve --help")
    spellings = found.group(1).split("/")
    flag = next((f for f in spellings if f.startswith("--")), spellings[0])
    rule = found.group(2)
    action = parser._option_string_actions.get(flag)
    if bad := re.fullmatch(r"invalid (\w+) value: '(.*)'", rule):
        kind, value = bad.groups()
        fix = _TYPE_FIXES.get(kind, (f"a value of the form vllm serve --help gives for {flag}",))[0]
        return ConfigError(flag, value, f"is not a valid {kind} (vLLM's parser, type of {flag}); fix: give {fix}")
    if bad := re.fullmatch(r"invalid choice: '(.*)' \((choose from .*)\)", rule):
        return ConfigError(flag, bad.group(1), f"is not one of vLLM's choices; fix: {bad.group(2)}")
    if bad := re.fullmatch(r"ignored explicit argument '(.*)'", rule):
        switches = " or ".join(spellings[:2]) if len(spellings) > 1 else flag
        return ConfigError(flag, bad.group(1), f"is a switch and takes no value; fix: write {switches}")
    if rule.startswith("expected"):
        count = rule.removeprefix("expected ").removesuffix("s").removesuffix(" argument")
        kind = getattr(getattr(action, "type", None), "__name__", "")
        example = _TYPE_FIXES.get(kind, (None, "VALUE"))[1]
        if flag.endswith("-parallel-size"):
            example = "8"
        elif flag.endswith("-port"):
            example = "8000"
        return FlagError(flag, f"expects {count} value and none was given (vLLM's parser: {rule}); fix: give one ({flag} {example}) or drop the flag")
    fix = "give the whole value as valid JSON" if "Invalid JSON" in rule else "see vllm serve --help"
    return FlagError(flag, f"vLLM's parser: {rule}; fix: {fix}")


def vllm_version() -> str:
    """The installed vLLM's version (the parser's)."""
    import vllm

    return vllm.__version__


def _action(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    """The action of option token ``flag`` (``_`` or ``-`` spelling, ``--x.y`` dot notation, ``-O3``)."""
    actions = parser._option_string_actions
    name = flag.split(".", 1)[0] if flag.startswith("--") else flag
    for candidate in (name, "--" + name[2:].replace("_", "-") if name.startswith("--") else name):
        if candidate in actions:
            return actions[candidate]
    if re.fullmatch(r"-O\d?", flag):
        return actions.get("--optimization-level")
    return None


def _nearest_flags(parser: argparse.ArgumentParser, flag: str) -> str:
    """The fix for an unknown ``flag``: the installed parser's nearest option strings (``difflib``, ratio ≥ 0.6, up to
    three; new-user trial of 2026-12-03: the line had no fix), or dropping it."""
    import difflib

    name = "--" + flag.lstrip("-").replace("_", "-")
    options = sorted(o for o in parser._option_string_actions if o.startswith("--"))
    near = difflib.get_close_matches(name, options, n=3, cutoff=0.6)
    return (f"did you mean {' or '.join(near)}? else drop it" if near
            else "drop it (no flag of vllm serve is near; vllm serve --help lists them)")


def _is_flag(token: str) -> bool:
    return token.startswith("-") and token != "-" and not re.fullmatch(r"-\d+(\.\d+)?(e-?\d+)?", token)


def given_options(argv: list[str]) -> tuple[str | None, dict[str, list[str]]]:
    """The model positional and ``{dest: tokens}`` of ``argv`` (tokens after ``vllm serve``), in order.

    Raises:
        ConfigError: a flag vLLM's parser does not know.
    """
    parser = serve_parser()
    model, given, i = None, {}, 0
    while i < len(argv):
        token = argv[i]
        if not _is_flag(token):
            if model is None:
                model, i = token, i + 1
                continue
            raise ConfigError(KEY, token, "is a second positional argument; vllm serve takes one model")
        flag = token.split("=", 1)[0]
        action = _action(parser, flag)
        if action is None:
            raise ConfigError(KEY, flag, "is not a flag of the installed vLLM's vllm serve (vllm serve --help); "
                                         f"fix: {_nearest_flags(parser, flag)}")
        tokens = [token]
        i += 1
        inline = "=" in token or re.fullmatch(r"-O\d", token)
        if not inline and action.nargs != 0:
            if action.nargs in ("+", "*"):
                while i < len(argv) and not _is_flag(argv[i]):
                    tokens.append(argv[i])
                    i += 1
            elif action.nargs == "?":
                if i < len(argv) and not _is_flag(argv[i]):
                    tokens.append(argv[i])
                    i += 1
            elif i < len(argv) and not _is_flag(argv[i]):  # a flag next: vLLM's parser says "expected one argument"
                tokens.append(argv[i])
                i += 1
        given.setdefault(action.dest, []).extend(tokens)
    return model, given


def json_value(tokens: list[str]) -> Any:
    """The JSON value of a config flag's tokens (``--x '{...}'`` or ``--x={...}``); dot notation refused."""
    flag = tokens[0].split("=", 1)[0]
    if "." in flag.lstrip("-"):
        raise ConfigError(KEY, flag, "dot notation is not imported; give the whole value as JSON")
    text = tokens[0].split("=", 1)[1] if "=" in tokens[0] else (tokens[1] if len(tokens) > 1 else "")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(KEY, flag, f"value is not JSON ({error.msg})") from None


#: vLLM dests whose parsed value is a config object; the importer keeps the JSON given.
CONFIG_DESTS = {"compilation_config", "kv_transfer_config", "attention_config", "structured_outputs_config",
                "profiler_config", "kernel_config", "reasoning_config", "weight_transfer_config", "kv_events_config",
                "ec_transfer_config", "observability_config", "aux_output_config", "diffusion_config"}


def parse_command(argv: list[str], *, env: dict[str, str] | None = None, source: str = "command line",
                  name: str = "") -> ServeCommand:
    """Parse ``argv`` (with or without a leading ``vllm serve``) with vLLM's parser.

    Raises:
        ConfigError: not a ``vllm serve`` command, no model, a flag or value vLLM's parser refuses (vLLM's message,
            on one line).
    """
    try:
        return _parse_command(argv, env=env, source=source, name=name)
    except ConfigError as error:  # which command: a file's line, a CI config's node and rank
        raise at_source(error, source) from None


def _parse_command(argv: list[str], *, env: dict[str, str] | None, source: str, name: str) -> ServeCommand:
    if argv[:2] == ["vllm", "serve"]:
        argv = argv[2:]
    elif argv and argv[0] in ("vllm", "python", "python3"):
        raise ConfigError(KEY, " ".join(argv[:2]), "is not `vllm serve`; give a `vllm serve MODEL ...` command")
    placeholder = next((t for t in argv if re.search(r"<[\w -]+>|\$\{?\w+", t)), None)
    if placeholder is not None:
        raise ConfigError(KEY, placeholder, "is a placeholder, not a value; fill it in before importing")
    model, given = given_options(argv)
    namespace = serve_parser().parse_args(argv)
    if model is None:
        model = getattr(namespace, "model", None) if "model" in given else None
    if not model:
        raise ConfigError(KEY, "vllm serve", "names no model; give `vllm serve MODEL ...`")
    values = {dest: (json_value(tokens) if dest in CONFIG_DESTS else getattr(namespace, dest))
              for dest, tokens in given.items()}
    return ServeCommand(argv=list(argv), model=model, given=given, values=values, env=dict(env or {}), source=source,
                        name=name)


def shell_commands(text: str) -> list[tuple[list[str], dict[str, str], int]]:
    """``(argv, env, line)`` of every ``vllm serve`` in shell text (``export`` lines before it set its env)."""
    joined: list[tuple[str, int]] = []
    buffer, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not buffer:
            start = number
        if stripped.endswith("\\"):
            buffer += stripped[:-1] + " "
            continue
        joined.append((buffer + stripped, start))
        buffer = ""
    if buffer:
        joined.append((buffer, start))
    env: dict[str, str] = {}
    out = []
    for line, number in joined:
        if not line or line.startswith("#"):
            continue
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError as error:
            raise ConfigError(KEY, line[:60] + ("..." if len(line) > 60 else ""),
                              f"is not a shell command line ({error})") from None
        if tokens[:1] == ["export"]:
            for assignment in tokens[1:]:
                key, _, value = assignment.partition("=")
                env[key] = value
        elif "vllm" in tokens and tokens[tokens.index("vllm") + 1: tokens.index("vllm") + 2] == ["serve"]:
            out.append((tokens[tokens.index("vllm"):], dict(env), number))
    return out


def read_shell(text: str, source: str) -> list[ServeCommand]:
    """Every ``vllm serve`` of shell text (``export`` lines before a command set its environment).

    Raises:
        ConfigError: no command found, or a command vLLM's parser refuses.
    """
    found = shell_commands(text)
    if not found:
        raise ConfigError(KEY, source, "holds no `vllm serve` command")
    return [parse_command(argv, env=env, source=f"{source}:{line}" if source != "command line" else source)
            for argv, env, line in found]
