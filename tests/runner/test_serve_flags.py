"""``engine.extra_args`` against vLLM's own server parser (issue 26 item 6): the stored flag table is the installed
vLLM's, an unknown flag is one line naming it (in process and through the CLI), a short alias of a planned flag is
refused with its key, and a row whose vLLM has no table says which table was used."""

from __future__ import annotations

import pytest

from ascendflow.models.resolve import resolve_model
from ascendflow.runner.detect import compile_for_this_host
from ascendflow.runner.serve_flags import flag_table, flags_for, parser_flags
from ascendflow.schema import ConfigError, load_spec
from tests.conftest import compose_config, run_ascendflow


def _compile(overrides: list[str]):
    raw = compose_config(overrides)
    raw.pop("hydra", None)
    spec = load_spec(raw)
    return compile_for_this_host(spec, resolve_model(spec.model, need_weights=False))


def test_the_stored_table_is_the_installed_vllm_s_parser():
    import vllm

    assert flag_table()[vllm.__version__.split("+")[0]] == parser_flags()


def test_a_row_s_version_without_a_table_uses_the_newest_below_it():
    assert flags_for("0.32.0")[0] == "0.32.0"
    assert flags_for("0.40.1")[0] == "0.32.0"
    assert flags_for("0.23.0")[0] == "0.32.0"  # none older stored: the oldest one


def test_known_flags_pass_and_unknown_flags_are_refused_in_one_line():
    plan = _compile(["engine.extra_args=[--enable-log-requests,--max-logprobs,5,'--api-server-count=1']"])
    assert plan.extra_args == ["--enable-log-requests", "--max-logprobs", "5", "--api-server-count=1"]
    assert plan.warnings == _compile([]).warnings
    with pytest.raises(ConfigError) as err:
        _compile(["engine.extra_args=[--enable-log-request]"])
    assert str(err.value) == ("engine.extra_args='--enable-log-request': is not a flag of vLLM 0.32.0's vllm serve "
                              "(its parser, ascendflow/runner/data/vllm_serve_flags.json); check the spelling "
                              "against vllm serve --help")


def test_a_short_alias_of_a_planned_flag_is_refused_with_its_key():
    with pytest.raises(ConfigError) as err:
        _compile(["engine.extra_args=[-tp,1]"])
    assert str(err.value) == ("engine.extra_args='-tp': is planned by ascendflow (vLLM's tensor_parallel_size); set "
                              "parallel.tensor_parallel_size instead")


def test_an_npu_row_says_which_vllm_s_flags_were_checked():
    plan = _compile(["+recipe=qwen3_0_6b", "run.mode=plan", "engine.extra_args=[--enable-log-requests]"])
    assert plan.warnings[-1] == ("engine.extra_args checked against vLLM 0.32.0's flags, not vLLM 0.23.0's (the row's; "
                                 "none stored): run scripts/serve_flags.py where vLLM 0.23.0 is installed to add them")


def test_the_cli_refuses_an_unknown_flag_in_one_line(tmp_path):
    proc = run_ascendflow(["run.mode=plan", "tracking=none", "engine.extra_args=[--no-such-flag]"], cwd=tmp_path,
                          timeout=600)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: engine.extra_args='--no-such-flag': is not a flag of vLLM 0.32.0's vllm serve (its parser, "
        "ascendflow/runner/data/vllm_serve_flags.json); check the spelling against vllm serve --help")
