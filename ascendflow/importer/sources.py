"""Where ``python -m ascendflow.import`` reads a deployment from: one ``vllm serve`` command, a shell file of them
(one per node), or a vllm-ascend CI config (:mod:`ascendflow.importer.ci`: single-node test cases, multi-node internal
DP, PD roles)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from ascendflow.importer.ci import ci_commands, is_pd
from ascendflow.importer.command import KEY, ServeCommand, shell_commands, parse_command
from ascendflow.schema.errors import ConfigError


def read_yaml(path: str) -> Any:
    """A CI config file's content (YAML anchors merged by the loader).

    Raises:
        ConfigError: not YAML.
    """
    try:
        return yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as error:
        raise ConfigError(KEY, path, f"is not YAML ({' '.join(str(error).split())[:120]})") from None


def is_pd_config(text: str) -> bool:
    """Whether ``text`` names a PD CI config file (its roles are imported by :mod:`ascendflow.importer.pd`)."""
    path = Path(text)
    return path.suffix in (".yaml", ".yml") and path.is_file() and is_pd(read_yaml(text))


def looks_like_path(text: str) -> bool:
    """Whether ``text``, which is no file, was meant as one (new-user trial of 2026-12-03): one word ending ``.yaml``,
    ``.yml``, ``.json``, ``.txt`` or ``.sh``, or holding a ``/``."""
    return (bool(text) and not any(c.isspace() for c in text)
            and (text.endswith((".yaml", ".yml", ".json", ".txt", ".sh")) or "/" in text))


def read_source(text: str, *, case: str | None = None) -> list[ServeCommand]:
    """Every ``vllm serve`` of ``text``: a command, a path to a shell file of commands (one per node), or a path to a
    co-located vllm-ascend CI config (``case``: its test case name; default every case; a multi-node config: its
    nodes, in order).

    Raises:
        ConfigError: no command found, a PD config, an unknown case, or a command vLLM's parser refuses.
    """
    path = Path(text)
    if "\n" not in text and len(text) < 4096 and path.is_file():
        if path.suffix in (".yaml", ".yml"):
            return ci_commands(read_yaml(text), str(path), case)
        found = shell_commands(path.read_text())
        if not found:
            raise ConfigError(KEY, str(path), "holds no `vllm serve` command")
        return [parse_command(argv, env=env, source=f"{path}:{line}") for argv, env, line in found]
    found = shell_commands(text)
    if not found and looks_like_path(text):
        raise ConfigError(KEY, text, f"no such file: {text}; fix: give an existing file (a shell file of `vllm serve` "
                                     "commands or a vllm-ascend CI config) or a quoted `vllm serve MODEL ...` command")
    if not found:
        tokens = shlex.split(text)
        raise ConfigError(KEY, " ".join(tokens[:2]) or text[:60], "is not `vllm serve`; give a "
                                                                   "`vllm serve MODEL ...` command or a file")
    return [parse_command(argv, env=env) for argv, env, _ in found]


def read_pd_config(path: str, *, name: str | None = None, release: str | None = None):
    """The :class:`~ascendflow.importer.pd.ImportedPD` recipe of a PD CI config file (``name``: default from the file
    name; ``release``: the version-matrix row to plan on, default the hardware option's).

    Raises:
        ConfigError: not a PD config, or what :func:`~ascendflow.importer.pd.pd_recipe` refuses.
    """
    from ascendflow.importer.ci import ci_name, pd_commands
    from ascendflow.importer.pd import pd_recipe

    from ascendflow.importer.ci import carry_workload

    raw = read_yaml(path)
    if not is_pd(raw):
        raise ConfigError(KEY, path, "is not a PD CI config (no disaggregated_prefill, no routing)")
    imported = pd_recipe(pd_commands(raw, path), npu_per_node=int(raw["npu_per_node"]), name=name or ci_name(path),
                         external="templates" in raw, release=release)
    carry_workload(imported.recipe, imported.named, raw.get("benchmarks"))  # as a co-located config's
    return imported


def ci_benchmarks(raw: Any, case: str | None) -> Any:
    """The ``benchmarks`` of a co-located CI config: test case ``case``'s (default the first), a multi-node
    config's top-level ones."""
    if isinstance(raw, dict) and "test_cases" in raw:
        cases = [c for c in raw["test_cases"] if case is None or c.get("name") == case]
        return (cases[0].get("benchmarks") if cases else None) or {}
    return (raw.get("benchmarks") if isinstance(raw, dict) else None) or {}
