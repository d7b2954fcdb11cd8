"""Issue 25 row 4: every key docs/configuration.md documents with a default composes as documented (``key=value``).

Before: ten of them (``hardware.peak_tflops_bf16``, ``hardware.memory_bandwidth_gbps``, ``hardware.non_torch_bytes``,
``hardware.k8s_device_resource``, ``hardware.multinode_moe_env``, ``model.trust_remote_code``,
``workload.random_input_len``, ``workload.random_output_len``, ``workload.prefix_suffix_len``,
``workload.num_prefixes``) were refused as misspellings, since the default options' YAML did not set them.
"""

from __future__ import annotations

import math
import re

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ascendflow.__main__ import refuse_bad_overrides
from ascendflow.schema import ConfigError, load_spec
from tests.conftest import CONF, REPO


def documented_keys() -> list[tuple[str, str]]:
    """``(dotted key, default as the reference writes it)`` for every row of the "Every key" tables."""
    text = (REPO / "docs" / "configuration.md").read_text()
    body = text.split("\n## Every key\n", 1)[1].split("\n## ", 1)[0]
    rows, section = [], None
    for line in body.splitlines():
        if m := re.match(r"^### `([a-z_.]+)`$", line):
            section = m.group(1)
        elif section and (m := re.match(r"^\| `([a-z_0-9]+)` \| `([^`…]*)` \|", line)):  # `{…}`: its own table
            rows.append((f"{section}.{m.group(1)}", m.group(2)))
    return rows


def _expected(default: str):
    if default == "inf":
        return math.inf
    value = yaml.safe_load(default)
    return value if not isinstance(value, str) or default == value else default


def _override(key: str, default: str) -> str:
    value = _expected(default)
    return f"{key}='{default}'" if isinstance(value, str) else f"{key}={default}"


DOCUMENTED = documented_keys()


def test_the_reference_lists_every_group_and_the_keys_the_issue_named():
    keys = {k for k, _ in DOCUMENTED}
    assert len(DOCUMENTED) > 100
    assert {"hardware.peak_tflops_bf16", "hardware.memory_bandwidth_gbps", "hardware.non_torch_bytes",
            "hardware.k8s_device_resource", "hardware.multinode_moe_env", "model.trust_remote_code",
            "workload.random_input_len", "workload.random_output_len", "workload.prefix_suffix_len",
            "workload.num_prefixes"} <= keys
    assert {k.split(".")[0] for k in keys} == {"hardware", "model", "parallel", "quantization", "engine", "graph",
                                               "ascend", "workload", "tracking", "run", "slo",
                                               "search"}


def _values(config: dict) -> dict:
    out = {}
    for key, _ in DOCUMENTED:
        node = config
        for part in key.split("."):
            node = node[part]
        out[key] = math.inf if node == "inf" else node  # YAML's `inf` is text until the schema reads it
    return out


def test_the_documented_defaults_are_the_default_config_s_values():
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = OmegaConf.to_container(compose(config_name="config"), resolve=True)
    got = _values(cfg)
    assert {k: got[k] for k, d in DOCUMENTED if got[k] != _expected(d)} == {}


def test_every_documented_key_composes_as_documented_and_validates():
    """All documented ``key=default`` overrides at once on the default config: Hydra composes them (no ``+``), the
    composed values are the documented defaults, and the schema accepts the result."""
    overrides = [_override(k, d) for k, d in DOCUMENTED]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    got = OmegaConf.to_container(cfg, resolve=True)
    values = _values(got)
    assert {k: values[k] for k, d in DOCUMENTED if values[k] != _expected(d)} == {}
    got.pop("hydra", None)
    load_spec(got)


@pytest.mark.parametrize("override", ["hardware.peak_tflops_bf16=300", "workload.num_prefixes=8",
                                      "model.trust_remote_code=true"])
def test_the_command_line_check_accepts_the_issue_s_keys_without_plus(override):
    refuse_bad_overrides([override])  # raised ConfigError "is not a config key; check the spelling" before


@pytest.mark.parametrize("override,line", [
    ("recipe=smollm2_cpu", "recipe='smollm2_cpu': is not a config key; recipe is a config group the defaults do not "
                           "select: add it with +recipe=smollm2_cpu"),
    ("+model.trust_remote_code=true", "model.trust_remote_code='true': is already a config key, so it takes no +: "
                                      "model.trust_remote_code=true sets it (++model.trust_remote_code=... sets or "
                                      "adds)"),
    ("sweep=capacity", "sweep='capacity': is not a config key; sweep is a config group the defaults do not select: "
                       "add it with +sweep=capacity"),
])
def test_a_group_that_needs_plus_says_so(override, line):
    """And a key the config has, given with ``+`` (the docs said ``+model.trust_remote_code=true`` before)."""
    with pytest.raises(ConfigError) as err:
        refuse_bad_overrides([override])
    assert str(err.value) == line
