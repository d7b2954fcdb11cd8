"""Issue 26 item 1: a command-line change of a length key under ``model.architecture`` is refused (vLLM reads the
checkpoint's config.json at start and refuses a longer ``--max-model-len``); ``model.hf_overrides`` is the fix."""

from __future__ import annotations

import pytest

from ascendflow.job_inputs import check_architecture_overrides
from ascendflow.schema.errors import ConfigError
from tests.conftest import REPO, run_ascendflow


def test_length_keys_are_refused_with_the_hf_override_to_write():
    with pytest.raises(ConfigError) as err:
        check_architecture_overrides(["engine.max_model_len=131072", "model.architecture.max_position_embeddings=131072"])
    assert str(err.value) == (
        "model.architecture.max_position_embeddings='131072': vLLM reads the checkpoint's config.json at start, not "
        "model.architecture, and refuses a --max-model-len beyond it (vllm/config/model.py _get_and_verify_max_len); "
        "set model.hf_overrides={max_position_embeddings: 131072} instead (written as --hf-overrides)")
    with pytest.raises(ConfigError, match=r"^model.architecture.rope_scaling='\{rope_type: yarn, factor: 4\}'"):
        check_architecture_overrides(["+model.architecture.rope_scaling={rope_type: yarn, factor: 4}"])
    check_architecture_overrides(["model.architecture.num_hidden_layers=2", "model.hf_overrides={factor: 4}"])


def test_the_cli_refuses_it_in_one_line(tmp_path):
    result = run_ascendflow(["+recipe=qwen3_235b_w8a8", "run.mode=plan", "tracking=none", "engine.max_model_len=131072",
                             "model.architecture.max_position_embeddings=131072", f"hydra.run.dir={tmp_path}/run"],
                            cwd=REPO)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert lines == ["error: model.architecture.max_position_embeddings='131072': vLLM reads the checkpoint's "
                     "config.json at start, not model.architecture, and refuses a --max-model-len beyond it "
                     "(vllm/config/model.py _get_and_verify_max_len); set model.hf_overrides="
                     "{max_position_embeddings: 131072} instead (written as --hf-overrides)"]
